"""Error messages blame the right place, suggest valid fixes, and -q really is quiet."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.conftest import run_cli
from tests.support.bad_profile_cases import VALID


def test_quiet_hides_warnings_also_when_there_are_errors() -> None:
    """Before the fix: with errors, the warnings were printed despite -q."""
    args = ("render", "profiles/h100-fp8.yaml", "--set", "gpu.targets=[v100]")
    loud = run_cli(*args)
    quiet = run_cli(*args, "-q")
    assert loud.rc == quiet.rc == 2
    assert any(line.endswith("[warning]") for line in loud.err.splitlines())
    assert not any(line.endswith("[warning]") for line in quiet.err.splitlines())
    errors = [line for line in loud.err.splitlines() if not line.endswith("[warning]")]
    assert quiet.err.splitlines() == errors


def test_top_level_set_typo_points_at_the_set() -> None:
    """Before the fix: `--set sevring.port=9000` was blamed on base.yaml:1:1."""
    result = run_cli("render", "profiles/h100-fp8.yaml", "--set", "sevring.port=9000")
    assert result.rc == 2
    assert result.err.splitlines()[0].startswith(
        "--set sevring.port: sevring: unknown key 'sevring' (did you mean 'serving'?)")


def test_missing_field_of_a_child_is_reported_in_the_child(tmp_path: Path) -> None:
    """Problems without a position belong to the file named, not to its base profile."""
    (tmp_path / "child.yaml").write_text("extends: base\nname: child\n")
    result = run_cli("validate", "child.yaml", cwd=tmp_path)
    assert result.rc == 2
    assert all(line.startswith("child.yaml:") for line in result.err.splitlines()[:-1])


def test_unquoted_list_item_hint_is_valid_yaml(tmp_path: Path) -> None:
    """Before the fix: `targets: [h100, 8.0]` got the hint `quote it: 1: "8.0"`."""
    (tmp_path / "profile.yaml").write_text(VALID.replace("targets: [h100]",
                                                         "targets: [h100, 8.0]"))
    result = run_cli("render", "profile.yaml", cwd=tmp_path)
    assert result.rc == 2
    first = result.err.splitlines()[0]
    assert first == ('profile.yaml:3:19: gpu.targets[1]: 8.0 is a number in YAML (read as 8.0), '
                     'not text; quote it: targets: [h100, "8.0"]')
    hint = first.split("quote it: ", 1)[1]
    assert yaml.safe_load(hint) == {"targets": ["h100", "8.0"]}  # valid, and the text "8.0"
    fixed = VALID.replace("targets: [h100]", hint)
    (tmp_path / "profile.yaml").write_text(fixed)
    assert run_cli("render", "-q", "profile.yaml", cwd=tmp_path).rc == 0


def test_rejected_list_items_are_not_also_an_empty_list() -> None:
    result = run_cli("render", "profiles/h100-fp8.yaml", "--set", "gpu.targets=[8.0]")
    assert result.rc == 2
    assert "must not be empty" not in result.err
    assert "quote it: --set 'gpu.targets=[\"8.0\"]'" in result.err
