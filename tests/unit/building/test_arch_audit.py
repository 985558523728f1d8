"""The arch audit script, run against real CUDA code compiled with the real nvcc.

nvcc comes from the machine's CUDA toolkit and cuobjdump from NVIDIA's PyPI wheel
(nvidia-cuda-cuobjdump, a test dependency). No GPU is needed: the audit reads the
embedded cubins.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

AUDIT = ROOT / "templates" / "context" / "arch_audit.py"
KERNEL = "__global__ void scale(float *x, float a) { x[threadIdx.x] *= a; }\n"


def _cuobjdump() -> str | None:
    site = Path(sysconfig.get_paths()["purelib"])
    for candidate in sorted(site.glob("nvidia/*/bin/cuobjdump")):
        return str(candidate)
    return shutil.which("cuobjdump")


NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)
CUOBJDUMP = _cuobjdump()
pytestmark = pytest.mark.skipif(
    NVCC is None or CUOBJDUMP is None,
    reason="needs nvcc (CUDA toolkit) and cuobjdump (pip install nvidia-cuda-cuobjdump)")


@pytest.fixture(scope="module")
def wheel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel holding a shared object compiled for sm_80 and sm_90, as flash-attn's is."""
    tmp = tmp_path_factory.mktemp("audit")
    (tmp / "k.cu").write_text(KERNEL)
    so = tmp / "kern.so"
    subprocess.run([NVCC, "-shared", "-Xcompiler", "-fPIC", "-o", str(so), str(tmp / "k.cu"),
                    "-gencode", "arch=compute_80,code=sm_80",
                    "-gencode", "arch=compute_90,code=sm_90"], check=True)
    wheels = tmp / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "fake_attn-1.0-cp311-cp311-linux_x86_64.whl", "w") as zf:
        zf.write(so, "fake_attn/kern.so")
    return wheels


def _audit(wheels: Path, expect: str, manifest: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": str(Path(CUOBJDUMP).parent) + ":/usr/bin:/bin"}  # type: ignore[arg-type]
    return subprocess.run([sys.executable, str(AUDIT), "--wheel-dir", str(wheels), "--expect",
                           expect, "--manifest", str(manifest)], capture_output=True, text=True,
                          env=env, check=False)


def test_audit_finds_requested_archs(wheel_dir: Path, tmp_path: Path) -> None:
    result = _audit(wheel_dir, "sm_80,sm_90", tmp_path / "m.json")
    assert result.returncode == 0, result.stderr
    assert "arch audit: ok: sm_80, sm_90" in result.stdout
    manifest = json.loads((tmp_path / "m.json").read_text())
    assert manifest["ok"] is True and manifest["present"] == ["sm_80", "sm_90"]


def test_audit_fails_when_an_arch_is_missing(wheel_dir: Path, tmp_path: Path) -> None:
    result = _audit(wheel_dir, "sm_80,sm_90,sm_100", tmp_path / "m.json")
    assert result.returncode == 1
    assert "arch audit: FAILED: no code for sm_100 (found sm_80, sm_90)" in result.stderr
    assert json.loads((tmp_path / "m.json").read_text())["missing"] == ["sm_100"]


def test_audit_fails_without_device_code(tmp_path: Path) -> None:
    wheels = tmp_path / "w"
    wheels.mkdir()
    plain = tmp_path / "plain.so"
    (tmp_path / "p.c").write_text("int f(void) { return 1; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(plain), str(tmp_path / "p.c")],
                   check=True)
    with zipfile.ZipFile(wheels / "x-1.0-py3-none-any.whl", "w") as zf:
        zf.write(plain, "x/plain.so")
    result = _audit(wheels, "sm_80", tmp_path / "m.json")
    assert result.returncode == 2
    assert "no CUDA device code found" in result.stderr
