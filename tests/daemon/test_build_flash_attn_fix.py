"""flash-attn on torch 2.14 in a real build: the pinned-source fix builds; a false claim fails.

Stand-ins (tests/support/standin.py): torch 2.14's headers refuse C++17 as the real ones do; the
released flash-attn sdist forces -std=c++17, ``flash_attn-2.8.4.dev0.tar.gz`` carries the
fix (-std=c++20). BuildKit, the registries and the compilers are real.
"""

from __future__ import annotations

import hashlib
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.daemon


def _profile(tmp: Path, index: str, archive: str, version: str) -> Path:
    with urllib.request.urlopen(f"{index}/files/{archive}", timeout=30) as resp:
        sha = hashlib.sha256(resp.read()).hexdigest()
    text = (ROOT / "tests" / "profiles" / "standin.yaml").read_text()
    text = text.replace('  version: "0.30.0"', '  version: "0.33.0"')  # torch 2.14.0
    text = text.replace('  version: "2.8.3"', f'  version: "{version}"\n  source:\n'
                        f"    url: {index}/files/{archive}\n    sha256: \"{sha}\"\n"
                        "    cxx_std: 20")
    path = tmp / "fa-fix.yaml"
    path.write_text(text)
    return path


def _build(profile: Path, index: str, out: Path):  # type: ignore[no-untyped-def]
    # vLLM 0.33.0 builds FlashInfer's sampler ahead of time with CUDA's compiler wheels, which
    # the stand-in index does not serve (the real image builds it: tests/network)
    return run_cli("build", str(profile), "--network", "host", "-q", "--progress", "plain",
                   "--set", "build.flashinfer_aot=false",
                   "--set", f"build.pip_index_url={index}/simple",
                   "--set", f"build.torch_index_url={index}", "-o", str(out))


def test_a_pinned_fixed_source_builds_against_torch_2_14(index: str, tmp_path: Path) -> None:
    profile = _profile(tmp_path, index, "flash_attn-2.8.4.dev0.tar.gz", "2.8.4.dev0")
    assert run_cli("validate", "-q", str(profile)).rc == 0
    result = _build(profile, index, tmp_path / "ctx")
    assert result.rc == 0, result.err[-3000:]
    dockerfile = (tmp_path / "ctx" / "Dockerfile").read_text()
    assert "--require-hashes" in dockerfile and "flash_attn-2.8.4.dev0.tar.gz" in dockerfile
    smoke = [line for line in result.err.splitlines() if line.startswith("smoke ")]
    assert smoke and all(line.startswith("smoke ok") for line in smoke), smoke
    assert any("flash-attn" in line and "import" in line for line in smoke), smoke


def test_a_source_that_still_forces_cxx17_fails_in_the_flash_attn_stage(
        index: str, tmp_path: Path) -> None:
    # the profile claims cxx_std: 20 for the released 2.8.3 sdist, which forces C++17: the
    # rule cannot see through the claim, the stand-in headers stop the compile as torch's do
    profile = _profile(tmp_path, index, "flash_attn-2.8.3.tar.gz", "2.8.3")
    result = _build(profile, index, tmp_path / "ctx")
    assert result.rc == 5, result.err[-3000:]
    assert "C++20 or later compatible compiler is required to use ATen" in result.err
    ours = [line for line in result.err.splitlines() if not line.startswith("#")]
    assert ours[0].startswith("Dockerfile:") and "[flash-attn" in ours[0], ours[:3]
    assert not any(line.startswith("Traceback") for line in ours)  # pip's is in the log
