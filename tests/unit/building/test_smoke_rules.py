"""Smoke checks: zero checks is not a pass; smoke regexes are checked by `validate`."""

from __future__ import annotations

from pathlib import Path

from dockergen.build.smoke import SmokeReport
from tests.conftest import run_cli
from tests.support.bad_profile_cases import VALID


def test_a_profile_without_any_smoke_check_is_rejected(tmp_path: Path) -> None:
    """Before the fix: `smoke.defaults: false` and nothing else passed, so --push ran unchecked."""
    (tmp_path / "profile.yaml").write_text(VALID + "smoke:\n  defaults: false\n")
    result = run_cli("validate", "profile.yaml", cwd=tmp_path)
    assert result.rc == 2
    assert result.err.splitlines()[0] == (
        "profile.yaml:25:3: smoke: no smoke checks at all (defaults off, no commands, no "
        "files); an image would be pushed that nothing has checked; keep `defaults: true`, or "
        "add `commands:` or `files:`")


def test_one_own_check_is_enough(tmp_path: Path) -> None:
    (tmp_path / "profile.yaml").write_text(
        VALID + "smoke:\n  defaults: false\n  files:\n    - {path: /usr/bin/sudo, "
                "should_exist: false}\n")
    assert run_cli("validate", "-q", "profile.yaml", cwd=tmp_path).rc == 0


def test_an_empty_report_is_not_ok() -> None:
    report = SmokeReport()
    assert not report.ok
    report.add("something", True)
    assert report.ok


def test_an_invalid_smoke_regex_is_a_validate_error(tmp_path: Path) -> None:
    """Was: it passed `validate` and raised re.error in the smoke test after the build."""
    (tmp_path / "profile.yaml").write_text(
        VALID + 'smoke:\n  commands:\n    - name: x\n      command: ["true"]\n'
                '      expected_output: ["(unclosed"]\n      excluded_output: ["ok", "*x"]\n')
    result = run_cli("validate", "profile.yaml", cwd=tmp_path)
    assert result.rc == 2
    fix = "write a Python regular expression; escape ( [ { * + ? . with a backslash"
    assert result.err.splitlines()[:2] == [
        "profile.yaml:28:25: smoke.commands[0].expected_output[0]: '(unclosed' is not a valid "
        "regular expression: missing ), unterminated subpattern at position 0; " + fix,
        "profile.yaml:29:31: smoke.commands[0].excluded_output[1]: '*x' is not a valid "
        "regular expression: nothing to repeat at position 0; " + fix]
