"""Shipped profile names work like paths, also from a plain (non-editable) wheel install."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli


@pytest.mark.parametrize("command", [("render", "-q", "h100-fp8"), ("explain", "a100-bf16"),
                                     ("validate", "-q", "base", "l40s-awq")])
def test_shipped_names_work_where_a_path_does(command: tuple[str, ...], tmp_path: Path) -> None:
    """Before the fix: `dockergen profiles` listed names that `render h100-fp8` could not find."""
    result = run_cli(*command, cwd=tmp_path)  # no profiles/ folder in sight
    assert result.rc == 0, result.err


def test_a_local_file_of_that_name_wins(tmp_path: Path) -> None:
    (tmp_path / "h100-fp8").write_text("not: a profile\n")
    result = run_cli("render", "h100-fp8", cwd=tmp_path)
    assert result.rc == 2
    assert "unknown key 'not'" in result.err


def test_an_unknown_name_lists_the_shipped_ones(tmp_path: Path) -> None:
    result = run_cli("render", "h100-fp9", cwd=tmp_path)
    assert result.rc == 2
    names = ", ".join(sorted(p.stem for p in (ROOT / "profiles").glob("*.yaml")))
    assert "h100-fp8, h100-sglang-fp8" in names
    assert result.err.splitlines()[0] == (
        "h100-fp9: no such file, and no shipped profile of that name; give a path, or one of: "
        + names)


@pytest.mark.slow
def test_render_by_name_from_an_installed_wheel(tmp_path: Path) -> None:
    """Build the wheel with hatchling, install it (not editable) into a fresh venv, render."""
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(wheels), str(ROOT)], check=True)
    (wheel,) = wheels.glob("dockergen-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-deps", str(wheel)], check=True)
    # dockergen's dependencies come from this environment (no download); the .pth line adds
    # its site-packages after the venv's own, where the installed wheel is found first.
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig."
                                   "get_paths()['purelib'])"], capture_output=True, text=True,
                                  check=True).stdout.strip())
    (purelib / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    work = tmp_path / "elsewhere"
    work.mkdir()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(venv / "bin" / "dockergen"), *args], capture_output=True,
                              text=True, cwd=work, check=False)

    where = subprocess.run([str(python), "-c", "import dockergen.resources as r; "
                            "print(r.__file__); print(r.profiles_dir())"], capture_output=True,
                           text=True, cwd=work, check=True).stdout.splitlines()
    assert where[0].startswith(str(purelib)), where  # the wheel, not the checkout
    assert where[1] == str(purelib / "dockergen" / "_shipped" / "profiles")
    listed = run("profiles")
    assert listed.returncode == 0, listed.stderr
    assert "h100-fp8" in listed.stdout
    rendered = run("render", "-q", "h100-fp8")
    assert rendered.returncode == 0, rendered.stderr
    assert rendered.stdout == run_cli("render", "-q", "profiles/h100-fp8.yaml").out
    written = run("render", "-q", "h100-fp8", "-o", "ctx")
    assert written.returncode == 0, written.stderr
    assert (work / "ctx" / "Dockerfile").is_file()
