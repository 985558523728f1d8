"""Credential patterns: a left boundary, every field scanned, and type errors hide nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from dockergen.errors import redact
from tests.conftest import run_cli
from tests.support.bad_profile_cases import VALID

TOKEN = "hf_AbCdEf0123456789GhIjKlMnOpQr"


@pytest.mark.parametrize("text", [
    "risk-management-prod",
    "#7 task-4f3a9c21d0 finished",  # a BuildKit log line
    "disk-usage-report-2026",
    "shf_abcdefghijkl",  # hf_ inside a word
    "sk-team-inference-prod",  # words joined by dashes: no digit, not a key
    "nvidia/cuda:13.0.2-devel-ubuntu22.04@sha256:" + "a" * 64,  # a digest pin
    "ubuntu:24.04@sha256:" + "b" * 64,
    "localhost:5000/llm/vllm:1",
    "git@github.com:org/repo.git",
    "mail admin@example.com at 12:30",
    "https://example.com/file?raw=true",
    "(TRTLLM:requirements.txt@000867d)",  # a source citation REPO:path@commit
    "VLLM:vllm/config.py@v0.9.1",
])
def test_words_that_contain_a_token_prefix_are_not_redacted(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("secret", [TOKEN, "sk-proj-4hT9xQ2mZ8vL1nB6cR3w",
                                    "ghp_0123456789abcdefghij", "AKIAIOSFODNN7EXAMPLE",
                                    "https://bob:hunter2@example.com",
                                    # no scheme: what a user pastes as an image reference
                                    "bob:hunter2@registry.example.com/cuda:13",
                                    # credentials in a query: token indexes, pre-signed links
                                    "https://pypi.example.com/simple?token=hunter2secret",
                                    "https://blob.example.com/f.whl?sv=1&sig=hunter2secret",
                                    "https://:hunter2@mirror.example.com/",  # no user name
                                    "https://bob:p@hunter2@x.example.com/simple",  # '@' in it
                                    "bob:p@hunter2@registry.example.com/cuda:13",
                                    "HTTPS://bob:hunter2@example.com/",  # any case
                                    "https://b.example.com/f?X-Amz-Signature=hunter2sig",
                                    "https://pypi.example.com/simple?Token=hunter2tok"])
def test_real_token_shapes_are_redacted(secret: str) -> None:
    assert "<redacted>" in redact(f"log: {secret} end")
    assert secret not in redact(f"log: {secret} end")
    assert "hunter2" not in redact(f"log: {secret} end")


def test_label_risk_management_prod_is_accepted(tmp_path: Path) -> None:
    """Before the fix: the label value `risk-management-prod` was rejected as an `sk-` key."""
    text = VALID.replace("  name: registry.example.com/llm/vllm",
                         "  name: registry.example.com/llm/vllm\n  labels:\n"
                         "    com.example.team: risk-management-prod")
    (tmp_path / "profile.yaml").write_text(text)
    result = run_cli("render", "-q", "profile.yaml", cwd=tmp_path)
    assert result.rc == 0, result.err
    assert 'com.example.team="risk-management-prod"' in result.out


def test_token_in_description_is_rejected(tmp_path: Path) -> None:
    """Before the fix: `description` becomes a label, and an hf_ token rendered into it."""
    (tmp_path / "profile.yaml").write_text(VALID.replace(
        "name: test", f"name: test\ndescription: serving with {TOKEN}"))
    result = run_cli("render", "profile.yaml", cwd=tmp_path)
    assert result.rc == 2
    assert result.err.splitlines() == [
        "profile.yaml:2:14: description: the value looks like a credential and would be "
        "readable by anyone who pulls the image (it becomes a label); never put credentials "
        "in labels or the description",
        "dockergen: 1 problem(s); nothing was written"]
    assert TOKEN not in result.err + result.out


def test_type_errors_do_not_hide_the_secret_checks(tmp_path: Path) -> None:
    """Before the fix: a wrong type anywhere used to stop validation before the secret checks."""
    text = VALID.replace("  max_model_len: 8192", "  max_model_len: lots\n  env:\n"
                                                   "    HF_TOKEN: abc\n"
                                                   f"    LOG_SINK: {TOKEN}")
    (tmp_path / "profile.yaml").write_text(text)
    result = run_cli("render", "profile.yaml", cwd=tmp_path)
    assert result.rc == 2
    assert result.err.splitlines() == [
        "profile.yaml:19:18: serving.max_model_len: expected a whole number, got 'lots'; "
        "write a whole number without quotes",
        "profile.yaml:21:15: serving.env.HF_TOKEN: HF_TOKEN looks like a secret and would be "
        "readable by anyone who pulls the image; pass it when the container starts (docker run "
        "-e HF_TOKEN) instead",
        "profile.yaml:22:15: serving.env.LOG_SINK: the value looks like a credential and would "
        "be readable by anyone who pulls the image; pass it when the container starts (docker "
        "run -e LOG_SINK) instead",
        "dockergen: 3 problem(s); nothing was written"]


def test_a_token_in_any_other_field_is_rejected(tmp_path: Path) -> None:
    """Smoke commands end up in logs and build records: scanned like everything else."""
    text = VALID + f"smoke:\n  commands:\n    - name: x\n      command: [curl, {TOKEN}]\n"
    (tmp_path / "profile.yaml").write_text(text)
    result = run_cli("render", "profile.yaml", cwd=tmp_path)
    assert result.rc == 2
    assert result.err.splitlines()[0] == (
        "profile.yaml:27:23: smoke.commands[0].command[1]: the value looks like a credential; "
        "profiles are copied into images, logs and build records; pass credentials at run "
        "time, never in a profile")


@pytest.mark.parametrize("args", [
    # usage errors quote the refused value: click's messages are redacted like ours
    ("lock", "--mirror", "nvidia/cuda=https://bob:hunter2@registry.example.com/x", "h100-fp8"),
    ("observe", "h100-fp8", "--target", f"{TOKEN}:80"),
    ("render", "h100-fp8", "--set", "build.pip_index_url=https://x.example/simple?token=hunter2x"),
    ("render", "h100-fp8", "--set", "cuda.devel_image=bob:hunter2@registry.example.com/c:13"),
    ("build", "--dry-run", "h100-fp8", "--tag", f"registry.example.com/x:{TOKEN}"),
])
def test_no_error_message_echoes_a_secret(args: tuple[str, ...]) -> None:
    result = run_cli(*args)
    assert result.rc in (2, 64), result.err
    assert "Traceback" not in result.err
    assert "hunter2" not in result.out + result.err
    assert TOKEN not in result.out + result.err


def test_a_huge_value_is_scanned_in_linear_time(tmp_path: Path) -> None:
    """The URL branch restarted at every letter of a long word: 20 s for a 200 kB
    description (quadratic); a hang guard, not a speed target (linear takes ~0.1 s)."""
    profile = tmp_path / "p.yaml"
    profile.write_text("extends: h100-fp8\nname: p\ndescription: " + "x" * 200_000 + "\n")
    import subprocess
    import sys

    from tests.conftest import ROOT

    proc = subprocess.run([sys.executable, "-m", "dockergen", "validate", str(profile)],
                          capture_output=True, text=True, cwd=ROOT, timeout=15, check=False)
    assert proc.returncode in (0, 2), proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("text", ["x" * 200_000, "=a:" * 70_000, ",a:" * 70_000,
                                  "=a:@" * 50_000, "sk-" * 70_000, "(a:" * 70_000,
                                  "http://" + "a" * 200_000])
def test_no_shape_makes_the_scan_quadratic(text: str) -> None:
    """Each of these took 20-46 s (a branch restarted at every '=', ',' or 'sk-' and ran
    to the end of the text); linear, each is well under a second. A hang guard with 20x
    headroom, not a speed target."""
    import time

    from dockergen.errors import SECRET_VALUE

    start = time.perf_counter()
    SECRET_VALUE.search(text)
    assert time.perf_counter() - start < 2.0


# --- the formats people really leak: gitleaks' rules (vendored) and the few it lacks --------

JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
       "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
LEAKS = {  # format -> (the credential, a part of it that must never be printed)
    "nvidia-ngc": ("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",
                   "Q7x2Lm9Kp4Rt8Vw1"),
    "gitlab-pat": ("glpat-Xy7Kq2Lm9Np4Rs8Tv1W3", "Xy7Kq2Lm9Np4"),
    "stripe-live": ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWD"),
    "npm": ("npm_Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc0Ef3Hi6", "Ab3De6Gh9Jk2"),
    "jwt": (JWT, "SflKxwRJSMeKKF2QT4fw"),
    "openssh-private-key": ("-----BEGIN OPENSSH PRIVATE KEY-----", "BEGIN OPENSSH PRIVATE"),
    "aws-secret-option": ("aws_secret_access_key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                          "wJalrXUtnFEMI"),
    "password-assignment": ("password=hunter2", "hunter2"),
}


@pytest.mark.parametrize("fmt", sorted(LEAKS))
def test_each_leaked_format_is_redacted(fmt: str) -> None:
    secret, part = LEAKS[fmt]
    shown = redact(f"log: {secret} end")
    assert "<redacted>" in shown and part not in shown, shown


# where a value reaches the image: a label (description, image.labels), an ENV, the server
# command, a smoke command (logs and build records)
_PLACES = {
    "description": ("name: test", "name: test\ndescription: {v}", "description"),
    "label": ("  name: registry.example.com/llm/vllm",
              "  name: registry.example.com/llm/vllm\n  labels:\n    com.example.note: {v}",
              "image.labels.com.example.note"),
    "env": ("  max_model_len: 8192", "  max_model_len: 8192\n  env:\n    LOG_NOTE: {v}",
            "serving.env.LOG_NOTE"),
    "extra-args": ("  max_model_len: 8192", "  max_model_len: 8192\n  extra_args: [{v}]",
                   "serving.extra_args[0]"),
}


@pytest.mark.parametrize("place", sorted(_PLACES))
@pytest.mark.parametrize("fmt", sorted(LEAKS))
def test_each_leaked_format_is_refused_at_validate(tmp_path: Path, fmt: str,
                                                   place: str) -> None:
    """Before, each of these rendered into a LABEL or an ENV line (exit 0)."""
    import json

    secret, part = LEAKS[fmt]
    anchor, replacement, field = _PLACES[place]
    (tmp_path / "profile.yaml").write_text(
        VALID.replace(anchor, replacement.format(v=json.dumps(secret)), 1))
    for args in (("validate", "profile.yaml"), ("render", "profile.yaml", "-o", "out")):
        result = run_cli(*args, cwd=tmp_path)
        assert result.rc == 2, result.out + result.err
        assert "Traceback" not in result.err
        assert f": {field}: " in result.err and "credential" in result.err, result.err
        assert part not in result.out + result.err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fmt", sorted(LEAKS))
def test_each_leaked_format_is_refused_on_the_command_line(fmt: str, tmp_path: Path) -> None:
    # an nvapi- or glpat- key is a valid host name: `observe --target KEY:80` wrote it into
    # prometheus.yml
    secret, part = LEAKS[fmt]
    for args, rc in ((("render", "h100-fp8", "--set", f"description={secret}"), 2),
                     (("build", "--dry-run", "h100-fp8", "--build-arg",
                       f"HTTP_PROXY={secret}"), 64),
                     (("observe", "h100-fp8", "-o", str(tmp_path / "obs"), "--target",
                       f"{secret}:80"), 64)):
        result = run_cli(*args)
        assert result.rc == rc, result.out + result.err
        assert "Traceback" not in result.err
        assert part not in result.out + result.err
    assert not (tmp_path / "obs").exists()


def test_a_url_taken_for_a_path_is_redacted() -> None:
    """The path's '//' collapsed (https:/alice:s3cret@...), which defeated the redaction."""
    for command in (("validate",), ("render",), ("plan",), ("deploy", "--format", "compose"),
                    ("explain",)):
        result = run_cli(*command, "https://alice:s3cret@example.com/p.yaml")
        assert result.rc == 2, result.err
        assert "Traceback" not in result.err
        assert "s3cret" not in result.out + result.err
    assert "s3cret" not in redact("https:/alice:s3cret@example.com/p.yaml")


def test_the_shipped_files_hold_nothing_the_rules_flag() -> None:
    """The vendored rules must not refuse dockergen's own output: every line of the shipped
    profiles, templates and examples (Dockerfiles, bake, Compose, k8s, observe files)."""
    from dockergen.errors import SECRET_VALUE
    from tests.conftest import ROOT

    hits = []
    for folder in ("examples", "profiles", "templates"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and path.suffix not in (".png",):
                for line in path.read_text(encoding="utf-8").splitlines():
                    hits += [(str(path), rule, line[:120])
                             for _, _, rule in SECRET_VALUE.spans(line)]
    assert hits == []


# --- the vendored rule set: where it came from, and that every rule scans in linear time ---

def _rule_data() -> dict[str, object]:
    import json

    from tests.conftest import ROOT

    data = json.loads((ROOT / "dockergen" / "data" / "secret_rules.json").read_text())
    assert isinstance(data, dict)
    return data


def test_the_rule_set_names_its_source_version_and_licence() -> None:
    from tests.conftest import ROOT

    data = _rule_data()
    assert str(data["source"]).startswith("https://github.com/gitleaks/gitleaks/blob/")
    assert str(data["commit"]) in str(data["source"]) and data["version"]
    assert "MIT" in str(data["licence"])
    licence = (ROOT / "dockergen" / "data" / "secret_rules.LICENSE").read_text()
    assert licence.startswith("MIT License") and "Zachary Rice" in licence
    rules = data["rules"]
    assert isinstance(rules, list) and len(rules) > 200
    # the formats above each come from a rule of gitleaks or a supplement with its source
    ids = {r["id"] for r in rules}
    assert {"gitlab-pat", "stripe-access-token", "npm-access-token", "jwt", "private-key",
            "generic-api-key", "nvidia-api-key", "aws-secret-access-key-option"} <= ids
    assert all(r.get("gitleaks_regex") or r.get("src") for r in rules)


def test_the_rules_are_derived_by_the_maintainer_script() -> None:
    """Each kept rule is the script's conversion of the gitleaks pattern it records, and
    none has a nested quantifier; skipped rules say why."""
    from dockergen.maint.secret_rules import nested_quantifier, python_pattern

    data = _rule_data()
    for rule in data["rules"]:  # type: ignore[attr-defined]
        if "gitleaks_regex" in rule:
            assert python_pattern(rule["gitleaks_regex"]) == (rule["regex"],
                                                              rule["lead"]), rule["id"]
        assert not nested_quantifier(rule["regex"]), rule["id"]
    assert all(s["why"] for s in data["skipped"])  # type: ignore[attr-defined]


@pytest.mark.parametrize(("go", "python"), [
    (r"\b(p8e-(?i)[a-z0-9]{32})\b", r"\b(p8e-(?i:[a-z0-9]{32}))\b"),  # flags to group end
    (r"(?i)abc", r"(?i)abc"),  # at the start Python takes them as they are
    (r"\b(pat[[:alnum:]]{14})", r"\b(pat[a-zA-Z0-9]{14})"),
    (r"x\z", r"x\Z"),
    (r"[a-z--]", r"[a-z-\-]"),  # '--' in a class is a set operation to Python
])
def test_go_patterns_become_python_patterns(go: str, python: str) -> None:
    from dockergen.maint.secret_rules import to_python

    assert to_python(go) == python


def test_the_lazy_lead_is_stripped_without_changing_what_is_found() -> None:
    from dockergen.maint.secret_rules import strip_lead

    go = r"(?i)[\w.-]{0,50}?(?:adobe)(?:[ \t\w.-]{0,20})[=:]([a-f0-9]{8})"
    stripped, lead = strip_lead(go)
    assert stripped == r"(?i)(?:adobe)(?:[ \t\w.-]{0,20})[=:]([a-f0-9]{8})" and lead == 50
    for text in ("my_adobe_key=0123abcd", "adobe:deadbeef", "x adobe = 12345678 y", "adobe"):
        import re

        assert ([m.group(1) for m in re.finditer(go, text)]
                == [m.group(1) for m in re.finditer(stripped, text)])


def test_a_secret_also_ends_at_a_port_a_list_or_a_url() -> None:
    """gitleaks ends a secret at a quote, a space or ';': `npm_<36>:80` in a message was not
    redacted."""
    npm = LEAKS["npm"][0]
    for text in (f"{npm}:80", f"({npm})", f"[{npm}, x]", f"https://x/{npm}/y", f"a={npm}&b"):
        assert LEAKS["npm"][1] not in redact(text), text


def test_nested_quantifiers_are_found() -> None:
    from dockergen.maint.secret_rules import nested_quantifier

    assert nested_quantifier(r"(a+)+b") and nested_quantifier(r"(?:x[a-z]{2,})*")
    assert not nested_quantifier(r"[a-z]{32}(?:-[a-z]{4}){3}") and not nested_quantifier("a+b")


def _hostile(rule_keywords: tuple[str, ...], size: int = 40_000) -> list[str]:
    """Texts that make a backtracking pattern restart at every keyword and run far."""
    out = []
    for k in rule_keywords or ("a",):
        out += [k * (size // len(k)), (k + "a") * (size // (len(k) + 1)), k + "a" * size,
                (k + "=") * (size // (len(k) + 1)), (k + " = a") * (size // (len(k) + 4)),
                ("-" + k + "_") * (size // (len(k) + 2)), (k + ".ey") * (size // (len(k) + 3))]
    return out


def _vendored() -> list[object]:
    from dockergen.errors import SECRET_VALUE

    return list(SECRET_VALUE.rules())


@pytest.mark.parametrize("rule", _vendored(), ids=lambda r: r.id)  # type: ignore[attr-defined]
def test_no_vendored_rule_is_quadratic(rule: object) -> None:
    """A hang guard per rule: 40 kB of its own keywords, repeated, each well under a second
    in linear time; a pattern that restarts and runs to the end takes minutes."""
    import time

    for text in _hostile(rule.keywords):  # type: ignore[attr-defined]
        start = time.perf_counter()
        for _ in rule.regex.finditer(text):  # type: ignore[attr-defined]
            pass
        assert time.perf_counter() - start < 2.0, (rule.id, text[:40])  # type: ignore[attr-defined]


@pytest.mark.parametrize("text", ["password=" * 25_000, "ey" * 100_000,
                                  "-----BEGIN PRIVATE KEY-----" * 8_000, "nvapi-" * 35_000,
                                  "aws_secret_access_key " * 10_000, "LICENSE token=" * 15_000,
                                  "api_key = " * 20_000 + "x" * 20, "token:" * 35_000])
def test_no_shape_makes_the_whole_scan_quadratic(text: str) -> None:
    """Every rule whose keywords are in the text runs, with its allowlists: the same guard
    as test_no_shape_makes_the_scan_quadratic for the whole scan."""
    import time

    from dockergen.errors import SECRET_VALUE

    start = time.perf_counter()
    SECRET_VALUE.sub("<redacted>", text)
    assert time.perf_counter() - start < 4.0


# a file name can hold a token too (a name pasted from a secret store, a folder called after
# a key): every path dockergen reads is written into headers, bake files and messages, and
# every -o path into "wrote PATH"
_NAME_SAFE = sorted(f for f in LEAKS if "/" not in LEAKS[f][0])


@pytest.mark.parametrize("fmt", _NAME_SAFE)
def test_a_file_name_holding_a_credential_is_refused_unprinted(fmt: str, tmp_path: Path
                                                               ) -> None:
    """Before, ``render glpat-....yaml`` wrote the token into the Dockerfile's header and
    the bake file with exit 0, ``deploy -o glpat-.../x.yaml`` printed it in "wrote", and
    ``plan --model-config`` printed the config's name."""
    secret, part = LEAKS[fmt]
    named = tmp_path / f"{secret}.yaml"
    named.write_text(VALID)
    config = tmp_path / f"{secret}.json"
    config.write_text('{"num_hidden_layers": 2}')
    (tmp_path / "p.yaml").write_text(VALID)
    cases = [(("validate", str(named)), 2), (("render", str(named), "-o", "o1"), 2),
             (("explain", str(named)), 2), (("deploy", str(named), "--format", "k8s"), 2),
             (("plan", str(named)), 2), (("build", "--dry-run", str(named)), 2),
             (("lock", str(named)), 2), (("observe", str(named), "-o", "o2"), 2),
             (("plan", "p.yaml", "--model-config", str(config)), 2),
             (("render", "p.yaml", "-o", secret), 4),
             (("deploy", "p.yaml", "--format", "compose", "-o", f"d/{secret}/x.yaml"), 4),
             (("observe", "p.yaml", "-o", f"o/{secret}"), 4),
             (("schema", "-o", f"{secret}.json"), 4)]
    for args, rc in cases:
        result = run_cli(*args, cwd=tmp_path)
        assert result.rc == rc, (args, result.out + result.err)
        assert "Traceback" not in result.err and "credential" in result.err, result.err
        assert part not in result.out + result.err, args
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["p.yaml", named.name, config.name])
