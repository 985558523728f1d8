"""No profile string can change the instruction structure of the rendered Dockerfile.

Hypothesis throws arbitrary text (newlines, quotes, `$`, backslashes, shell metacharacters,
instruction keywords) at every string field that reaches the Dockerfile. Each value is
either rejected with a ProfileError or rendered inertly: the instruction sequence stays
that of a benign value, and the value comes back unchanged from BuildKit's own parser.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import dockerfile
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dockergen.api import resolve_profile
from dockergen.errors import ProfileError
from dockergen.outputs.dockerfile import dockerfile_quote, render_dockerfile, shell_quote
from tests.support.bad_profile_cases import VALID

pytestmark = pytest.mark.slow

NASTY = st.lists(
    st.one_of(
        st.sampled_from(list("\n\r\t \"'$`\\;&|#{}()<>*?!=:,@/.-_")
                        + ["RUN ", "\nRUN touch /pwned", "${PATH}", "--x=1", "a", "/m"]),
        st.characters(blacklist_categories=("Cs",)),
    ),
    min_size=1, max_size=12,
).map("".join)

# field -> (line of VALID to anchor on, what replaces it; {q} is the quoted value)
FIELDS = {
    "description": ("name: test\n", "name: test\ndescription: {q}\n"),
    "serving.model": ("model: /models/m", "model: {q}"),
    "serving.served_model_name": ("  model: /models/m",
                                  "  model: /models/m\n  served_model_name: {q}"),
    "serving.extra_args": ("  model: /models/m", "  model: /models/m\n  extra_args: [{q}]"),
    "serving.env": ("  model: /models/m", "  model: /models/m\n  env: {{LOG_FMT: {q}}}"),
    "image.labels": ("  name: registry.example.com/llm/vllm",
                     "  name: registry.example.com/llm/vllm\n  labels: {{com.x.y: {q}}}"),
    "image.name": ("  name: registry.example.com/llm/vllm", "  name: {q}"),
    "image.tags": ("  name: registry.example.com/llm/vllm",
                   "  name: registry.example.com/llm/vllm\n  tags: [{q}]"),
    "cuda.devel_image": ("  os: ubuntu22.04", "  os: ubuntu22.04\n  devel_image: {q}"),
    "serving.host": ("  model: /models/m", "  model: /models/m\n  host: {q}"),
    "build.pip_index_url": ("  memory_gib: 64", "  memory_gib: 64\n  pip_index_url: {q}"),
}


def _yaml_quoted(value: str) -> str:
    """A YAML double-quoted scalar that reads back as exactly ``value``.

    Every character but printable ASCII is written as a ``\\UXXXXXXXX`` escape, so YAML's
    line folding (e.g. of U+0085) and UTF-16 surrogate pairs cannot change the value.
    """
    body = "".join(ch if " " <= ch <= "~" and ch not in '"\\' else f"\\U{ord(ch):08X}"
                   for ch in value)
    return f'"{body}"'


def _profile_text(field: str, value: str) -> str:
    anchor, replacement = FIELDS[field]
    q = _yaml_quoted(value)
    assert anchor in VALID
    return VALID.replace(anchor, replacement.format(q=q), 1)


def _unquote(word: str) -> str:
    assert word.startswith('"') and word.endswith('"'), word
    return re.sub(r'\\(["\\$])', r"\1", word[1:-1])


def _structure(text: str) -> list[tuple[str, tuple[str, ...]]]:
    return [(c.cmd, c.flags) for c in dockerfile.parse_string(text)]


def _render(tmp: Path, field: str, value: str) -> str | None:
    path = tmp / "profile.yaml"
    path.write_text(_profile_text(field, value), encoding="utf-8")
    try:
        text = render_dockerfile(resolve_profile(path))
    except ProfileError:
        return None
    return text


BENIGN = {"description": "a plain description", "serving.model": "/models/other",
          "serving.served_model_name": "served", "serving.extra_args": "--enforce-eager",
          "serving.env": "json", "image.labels": "team-a", "image.name": "r.example.com/x/y",
          "image.tags": "v1", "cuda.devel_image": "mirror.example.com/cuda:13.0.2-devel",
          "serving.host": "127.0.0.1", "build.pip_index_url": "https://pypi.example.com/simple"}


@pytest.fixture(scope="module")
def baselines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("baseline")
    out = {}
    for field, value in BENIGN.items():
        text = _render(tmp, field, value)
        assert text is not None, field  # the benign value must be accepted
        out[field] = _structure(text)
    return out


@pytest.mark.parametrize("field", sorted(FIELDS))
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=NASTY)
def test_no_string_changes_instruction_structure(field: str, value: str, baselines: dict[str, Any],
                                                 tmp_path: Path) -> None:
    text = _render(tmp_path, field, value)
    if text is None:
        return  # rejected with a clear ProfileError: fine
    assert _structure(text) == baselines[field]
    commands = dockerfile.parse_string(text)
    runtime = commands[max(i for i, c in enumerate(commands) if c.cmd == "FROM"):]
    by_cmd = {c.cmd: c for c in runtime}
    cmd_args = list(by_cmd["CMD"].value)
    labels = dict(zip(by_cmd["LABEL"].value[::2], map(_unquote, by_cmd["LABEL"].value[1::2]),
                      strict=True))
    env = dict(zip(by_cmd["ENV"].value[::2], by_cmd["ENV"].value[1::2], strict=True))
    if field == "serving.extra_args":
        assert cmd_args[-1] == value
    elif field == "serving.model":
        assert cmd_args[0] == value
    elif field == "description":
        assert labels["org.opencontainers.image.description"] == value
    elif field == "image.labels":
        assert labels["com.x.y"] == value
    elif field == "serving.env":
        assert _unquote(env["LOG_FMT"]) == value


@settings(max_examples=300, deadline=None)
@given(value=st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=60))
def test_dockerfile_quote_is_one_inert_word(value: str) -> None:
    text = f"FROM scratch\nLABEL k={dockerfile_quote(value)}\nUSER 1\n"
    commands = dockerfile.parse_string(text)
    assert [c.cmd for c in commands] == ["FROM", "LABEL", "USER"]
    assert _unquote(commands[1].value[1]) == value


@settings(max_examples=300, deadline=None)
@given(value=st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=60))
def test_shell_quote_survives_a_real_shell(value: str) -> None:
    import subprocess

    out = subprocess.run(["bash", "-c", f"printf %s {shell_quote(value)}"], capture_output=True,
                         check=True).stdout.decode("utf-8")
    assert out == value


@pytest.mark.parametrize("value", ["a\nRUN rm -rf /", "a\rb", "\x00"])
def test_quoting_refuses_control_characters(value: str) -> None:
    with pytest.raises(ValueError):
        dockerfile_quote(value)
    with pytest.raises(ValueError):
        shell_quote(value)


@pytest.mark.parametrize("field", ["description", "image.labels"])
@pytest.mark.parametrize("value", ["ends with a backslash \\", "a\\\\", "\\"])
def test_a_label_ending_in_a_backslash_is_refused(tmp_path: Path, field: str,
                                                  value: str) -> None:
    """It rendered `LABEL k="...\\\\"`, which Docker reads but hadolint rejects
    ("unexpected '\"'"); now the profile says so, at the field."""
    from tests.conftest import run_cli

    (tmp_path / "profile.yaml").write_text(_profile_text(field, value), encoding="utf-8")
    result = run_cli("validate", "profile.yaml", cwd=tmp_path)
    assert result.rc == 2 and "Traceback" not in result.err
    shown = "description" if field == "description" else "image.labels.com.x.y"
    assert f": {shown}: must not end with a backslash" in result.err, result.err


@pytest.mark.parametrize("field", ["description", "image.labels"])
@pytest.mark.parametrize("value", ["a\\b", "trailing space \\ ", "C:\\models\\x", "\\\\n"])
def test_backslashes_inside_a_label_pass_hadolint(tmp_path: Path, field: str, value: str,
                                                  hadolint: str) -> None:
    from tests.conftest import lint

    text = _render(tmp_path, field, value)
    assert text is not None
    result = lint(hadolint, text)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    commands = dockerfile.parse_string(text)
    labels = next(c for c in reversed(commands) if c.cmd == "LABEL").value
    key = "org.opencontainers.image.description" if field == "description" else "com.x.y"
    assert _unquote(labels[labels.index(key) + 1]) == value
