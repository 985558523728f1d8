"""Same profile, same bytes: across processes, hash seeds and working directories."""

from __future__ import annotations

import filecmp
from pathlib import Path

import pytest

from tests.conftest import PROFILES, run_cli, shipped_names


@pytest.mark.parametrize("name", shipped_names())
def test_two_processes_render_identical_bytes(name: str, tmp_path: Path) -> None:
    a = run_cli("render", "-q", str(PROFILES / f"{name}.yaml"), env={"PYTHONHASHSEED": "1"})
    b = run_cli("render", "-q", f"{name}.yaml", cwd=PROFILES,
                env={"PYTHONHASHSEED": "2", "TZ": "Asia/Tokyo"})
    assert a.rc == 0 and b.rc == 0
    assert a.out.encode() == b.out.encode()


def test_build_contexts_are_identical(tmp_path: Path) -> None:
    for i, seed in enumerate(("3", "4")):
        result = run_cli("render", "--all", "-q", "-o", str(tmp_path / str(i)),
                         env={"PYTHONHASHSEED": seed})
        assert result.rc == 0, result.err
    cmp = filecmp.dircmp(tmp_path / "0", tmp_path / "1")
    assert not cmp.left_only and not cmp.right_only and not cmp.diff_files
    for name in cmp.common_dirs:
        sub = filecmp.dircmp(tmp_path / "0" / name, tmp_path / "1" / name)
        _, mismatch, errors = filecmp.cmpfiles(sub.left, sub.right, sub.common_files,
                                               shallow=False)
        assert not mismatch and not errors and not sub.left_only and not sub.right_only
