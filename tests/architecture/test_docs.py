"""The documentation: a short README, and docs/ built by MkDocs with broken links failing.

The README keeps the pitch, the two set-up commands, the command table, the exit codes and
one worked example; everything else is in docs/, which `mkdocs build --strict` builds with
every broken link, missing anchor and page left out of the navigation an error
(mkdocs.yml). The profile reference in docs/ is what `dockergen reference` generates.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from dockergen.errors import ExitCode
from dockergen.input.profile import Profile
from tests.conftest import ROOT, run_cli

README = ROOT / "README.md"
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference" / "profile.md"
# The set-up commands, byte for byte: .ci/run runs the test one (tests/cli/test_cli.py).
RENDER_COMMAND = ("python3 -m venv .venv && .venv/bin/pip install -q -e . && "
                  ".venv/bin/dockergen render profiles/h100-fp8.yaml")
TEST_COMMAND = ("python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && "
                ".venv/bin/python -m pytest")


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``config`` into ``site``, as CI runs it."""
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "--config-file", str(config), "--site-dir", str(site)],
                          capture_output=True, text=True, check=False, timeout=300)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real docs, built once for the tests that read the result."""
    out = tmp_path_factory.mktemp("site")
    result = mkdocs_build(ROOT / "mkdocs.yml", out)
    assert result.returncode == 0, result.stderr
    return out


def test_the_readme_is_short_and_keeps_the_set_up_commands() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move text to docs/"
    assert RENDER_COMMAND in lines and TEST_COMMAND in lines
    assert TEST_COMMAND in (ROOT / ".ci" / "run").read_text().splitlines()


def test_the_readme_lists_every_command_and_exit_code() -> None:
    from dockergen.cli import cli

    readme = README.read_text()
    missing = [name for name in cli.commands if f"| `dockergen {name}" not in readme]
    assert missing == []
    codes = [int(code) for code in ExitCode if f"| `{int(code)}` |" not in readme]
    assert codes == []


# where a page shows a command run: a row of the README's command table, or a line of a code
# block (``dockergen NAME``, ``$ dockergen NAME``, ``.venv/bin/dockergen NAME``)
_TABLE_ROW = re.compile(r"^\|\s*`dockergen ([a-z][a-z-]*)", re.M)
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
_RUN = re.compile(r"^\s*(?:\$ )?(?:\.venv/bin/)?dockergen ([a-z][a-z-]*)", re.M)


def commands_shown(text: str) -> set[str]:
    """The commands a Markdown page shows run (its command table, its code blocks)."""
    return set(_TABLE_ROW.findall(text)) | {
        name for block in _FENCE.findall(text) for name in _RUN.findall(block)}


def test_the_docs_show_only_commands_the_cli_has() -> None:
    from dockergen.cli import cli

    pages = [README, *sorted(DOCS.rglob("*.md"))]
    shown = {page.relative_to(ROOT).as_posix(): commands_shown(page.read_text())
             for page in pages}
    unknown = {page: sorted(names - set(cli.commands)) for page, names in shown.items()
               if names - set(cli.commands)}
    assert unknown == {}
    # the README's table names every command, and the docs show each one run
    assert set(cli.commands) <= shown["README.md"]
    # the reading sees a renamed command in either place
    assert commands_shown("| `dockergen bake X` | ... |") == {"bake"}
    assert commands_shown("text\n```sh\n$ dockergen bake x\n```\n") == {"bake"}
    assert commands_shown("`dockergen deployment profile`, dockergen turns") == set()


def test_the_docs_build_strict(site: Path) -> None:
    """Every page is built (strict mode already failed on a warning)."""
    pages = sorted(p.relative_to(DOCS).with_suffix("") for p in DOCS.rglob("*.md"))
    for page in pages:
        html = site / "index.html" if page == Path("index") else site / page / "index.html"
        assert html.is_file(), page


@pytest.mark.parametrize(("case", "change", "message"), [
    ("broken link", ("index.md", "\n[gone](no-such-page.md)\n"),
     "contains a link 'no-such-page.md', but the target is not found"),
    ("missing anchor", ("index.md", "\n[gone](profiles.md#no-such-heading)\n"),
     "does not contain an anchor '#no-such-heading'"),
    ("page left out of the navigation", ("orphan.md", "# Orphan\n"),
     "orphan.md"),
])
def test_a_broken_link_fails_the_build(case: str, change: tuple[str, str], message: str,
                                       tmp_path: Path) -> None:
    """The check can fail: a copy of the docs with one mistake does not build."""
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    name, text = change
    with (tmp_path / "docs" / name).open("a") as fh:
        fh.write(text)
    result = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    said = result.stdout + result.stderr
    assert result.returncode != 0, case
    assert message in said and "Aborted with 1 warnings in strict mode" in said, said


def test_the_readme_links_resolve(site: Path) -> None:
    """MkDocs does not read the README: its links into docs/ are checked here, anchors
    against the ids of the built pages."""
    links = re.findall(r"\]\(([^)]+)\)", README.read_text())
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        path, _, anchor = link.partition("#")
        assert not path.startswith(("/", "http")), link
        assert (ROOT / path).is_file(), link
        if anchor:
            page = Path(path).relative_to("docs").with_suffix("")
            html = (site / page / "index.html").read_text()
            assert f'id="{anchor}"' in html, link


def _fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every field path of the profile model, sections and list entries included."""
    out = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        out.append(path)
        inner = [a for a in getattr(info.annotation, "__args__", (info.annotation,))
                 if isinstance(a, type) and issubclass(a, BaseModel)]
        for section in inner:
            entries = getattr(info.annotation, "__origin__", None) is tuple
            out += _fields(section, f"{path}[]." if entries else f"{path}.")
    return out


def test_the_profile_reference_is_what_the_product_generates() -> None:
    """docs/reference/profile.md is regenerated by `dockergen reference` (CI: drift check)."""
    result = run_cli("reference")
    assert result.rc == 0, result.err
    assert REFERENCE.read_text() == result.out, (
        "docs/reference/profile.md drifted; run "
        "`dockergen reference -o docs/reference/profile.md`")


def test_the_profile_reference_names_every_field() -> None:
    text = REFERENCE.read_text()
    top = list(Profile.model_fields)
    assert {"name", "gpu", "engine", "serving", "image", "observe"} <= set(top)
    missing = [path for path in _fields(Profile) if f"| `{path}` |" not in text]
    assert missing == []
    # the model's own words: a field's description reaches its row
    serving = Profile.model_fields["serving"].annotation
    assert isinstance(serving, type) and issubclass(serving, BaseModel)
    start = serving.model_fields["health_start_period_s"].description
    assert start and f"| {start} |" in text


def test_the_profile_reference_is_its_own_output(tmp_path: Path) -> None:
    """`reference -o` replaces a file it wrote, and no other."""
    out = tmp_path / "profile.md"
    assert run_cli("reference", "-o", str(out)).rc == 0
    assert out.read_text() == REFERENCE.read_text()
    assert run_cli("reference", "-o", str(out)).rc == 0  # its own file: replaced
    out.write_text("# my notes\n")
    result = run_cli("reference", "-o", str(out))
    assert result.rc == 4 and "was not written by dockergen" in result.err
    assert out.read_text() == "# my notes\n"


def test_the_checks_page_is_what_the_registry_generates(tmp_path: Path) -> None:
    """docs/reference/checks.md is `dockergen reference --checks` (CI: drift check); it
    names every registered check and every resolution rule, and `-o` keeps a file of the
    user's."""
    from dockergen.checks import CHECKS, RESOLUTION, rule_docs

    result = run_cli("reference", "--checks")
    assert result.rc == 0, result.err
    page = DOCS / "reference" / "checks.md"
    assert page.read_text() == result.out, (
        "docs/reference/checks.md drifted; run "
        "`dockergen reference --checks -o docs/reference/checks.md`")
    assert all(f"| {c.name} |" in result.out for c in (RESOLUTION, *CHECKS))
    rules = rule_docs()
    assert {"cuda.check_gpus", "flash_attn.check", "torch.check"} <= {n for n, _, _ in rules}
    assert all(f"| `{name}` |" in result.out for name, _, _ in rules)
    mine = tmp_path / "checks.md"
    mine.write_text("# my notes\n")
    refused = run_cli("reference", "--checks", "-o", str(mine))
    assert refused.rc == 4 and mine.read_text() == "# my notes\n"


def test_the_rule_table_is_only_the_generated_one() -> None:
    """The rules in detail are the registry's data (dockergen.checks.RULE_DETAILS), shown
    on the generated checks page; docs/knowledge.md links there instead of keeping a
    second, hand-written table that would drift from it."""
    from dockergen.checks import RULE_DETAILS, checks_reference

    page = checks_reference()
    assert all(f"| {d.rules} | {d.kind} | {d.what} |" in page for d in RULE_DETAILS)
    knowledge = (DOCS / "knowledge.md").read_text()
    assert "| rule |" not in knowledge and not any(
        f"| {d.rules} |" in knowledge for d in RULE_DETAILS)
    assert "reference/checks.md#the-rules-in-detail" in knowledge


def test_the_readme_names_every_file_render_writes(tmp_path: Path) -> None:
    """The README's render row lists the build context's files by name: a file the code
    starts writing (or stops writing) shows up here, not in a user's surprised diff."""
    from dockergen.resolve.model import CERT_DIR

    run = run_cli("render", "--all", "-q", "-o", str(tmp_path / "out"))
    assert run.rc == 0, run.err
    written = {path.name for path in (tmp_path / "out").rglob("*") if path.is_file()}
    assert {"Dockerfile", "constraints.txt", "etc-hosts"} <= written
    row = next(line for line in README.read_text().splitlines()
               if line.startswith("| `dockergen render PROFILE -o DIR`"))
    named = set(re.findall(r"`([^`]+)`", row))
    assert f"`{CERT_DIR}/`" in row
    assert sorted(written - named) == []


def test_the_deploy_docs_run_compose_as_the_output_says() -> None:
    """The Compose file's own "# Run:" line and docs/deploy.md give one command."""
    compose = (ROOT / "examples" / "deploy" / "h100-fp8" / "compose.yaml").read_text()
    run = next(line for line in compose.splitlines() if line.startswith("# Run: "))
    assert run.removeprefix("# Run: ") in (DOCS / "deploy.md").read_text()
