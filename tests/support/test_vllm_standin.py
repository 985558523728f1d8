"""The vLLM stand-in fails where the real server fails, and the images keep what vLLM needs.

The stand-in `vllm serve` parses with the real release's option strings (vllm/flags.json,
extracted from the wheels by tools/vllm_flags.py) and builds Triton's C launcher before
serving, as triton/runtime/build.py does at the first kernel launch. The build tests
(test_build_daemon.py) run it inside the built image, so an image without a C compiler or a
serve command with a flag the release lacks fails there as it would on a GPU host.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dockergen.api import resolve_profile, shipped_single_images
from dockergen.knowledge.facts import facts as known_facts
from dockergen.parts.engines.vllm import ENGINE
from tests.conftest import PROFILES
from tests.support.standin import VLLM_CLI, VLLM_STANDIN_MODULES

KNOWN = known_facts()  # the shipped knowledge


def _standin_package(tmp_path: Path, version: str) -> Path:
    pkg = tmp_path / "vllm"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "cli.py").write_text(VLLM_CLI)
    for name, text in VLLM_STANDIN_MODULES.items():  # vllm.entrypoints.cli.main -> serve
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    flags = ENGINE.flag_list(KNOWN, version)
    assert flags is not None, version
    (pkg / "flags.json").write_text(json.dumps(sorted(flags)))
    return tmp_path


def _serve(root: Path, *args: str, env: dict[str, str] | None = None
           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from vllm.cli import main; main()", *args],
                          cwd=root, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(root),
                               "TRITON_CACHE_DIR": str(root / "triton"), **(env or {})},
                          check=False)


def test_standin_vllm_rejects_a_flag_the_release_lacks(tmp_path: Path) -> None:
    # --swap-space was removed in vLLM 0.18.0 (PR #36216); the real 0.33.0 parser exits 2
    root = _standin_package(tmp_path, "0.33.0")
    result = _serve(root, "serve", "m", "--swap-space", "4")
    assert result.returncode == 2
    assert "unrecognized arguments: --swap-space 4" in result.stderr


def test_standin_vllm_needs_a_c_compiler_like_triton(tmp_path: Path) -> None:
    root = _standin_package(tmp_path, "0.33.0")
    result = _serve(root, "serve", "m", "--port", "1",
                    env={"PATH": str(tmp_path / "empty"), "CC": ""})
    assert result.returncode != 0
    assert "Failed to find C compiler" in result.stderr


@pytest.mark.parametrize("profile", [p.name for p in shipped_single_images()
                                     if p.stem not in ("h100-trtllm-fp8", "h100-sglang-fp8")])
def test_the_stand_in_parses_every_shipped_serve_command(profile: str, tmp_path: Path) -> None:
    """dockergen's own serve command passes the real release's parser (argparse, exit 2 on
    anything unknown); the stand-in stops at the compiler so nothing listens."""
    r = resolve_profile(PROFILES / profile)
    root = _standin_package(tmp_path, r.profile.engine.version)
    cmd = list(r.runtime.cmd)
    entry = list(r.runtime.entrypoint)
    assert entry == ["vllm", "serve"]
    result = _serve(root, "serve", *cmd, env={"PATH": str(tmp_path / "empty"), "CC": ""})
    assert "unrecognized arguments" not in result.stderr, result.stderr
    assert "Failed to find C compiler" in result.stderr  # parsed; stopped at Triton


def test_every_vllm_image_keeps_a_c_compiler_for_triton() -> None:
    for path in shipped_single_images():
        r = resolve_profile(path)
        if r.profile.engine.name != "vllm":
            continue
        assert r.runtime.jit_c_compiler, path.name
        assert {"gcc", "libc6-dev"} <= set(r.runtime.apt), path.name


def test_standin_vllm_parses_like_the_real_parser(tmp_path: Path) -> None:
    """No prefix matching (the real parser knows every flag by its full name), and
    FlexibleArgumentParser's underscores are read as dashes."""
    root = _standin_package(tmp_path, "0.33.0")
    abbrev = _serve(root, "serve", "m", "--max-model", "4096")
    assert abbrev.returncode == 2 and "unrecognized arguments: --max-model" in abbrev.stderr
    nocc = {"PATH": str(tmp_path / "empty"), "CC": ""}
    underscores = _serve(root, "serve", "m", "--max_model_len", "4096",
                         "--gpu_memory_utilization=0.9", env=nocc)
    assert "unrecognized" not in underscores.stderr
    assert "Failed to find C compiler" in underscores.stderr
