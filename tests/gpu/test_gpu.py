"""GPU-only checks (pytest marker `gpu`, deselected by default; run `pytest -m gpu`).

On a GPU host with torch and flash-attn installed, the flash-attn numeric check used by
`dockergen build --gpus` must pass; with DOCKERGEN_GPU_IMAGE set to a built image and the
NVIDIA container toolkit installed, the server check must see /health and one token.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dockergen.smoke import FA_GPU_SCRIPT

pytestmark = pytest.mark.gpu


def test_flash_attn_matches_reference_attention() -> None:
    probe = subprocess.run([sys.executable, "-c", "import torch, flash_attn; "
                            "assert torch.cuda.is_available()"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("needs torch with CUDA, flash-attn and a GPU")
    result = subprocess.run([sys.executable, "-c", FA_GPU_SCRIPT], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("max abs error ")


def test_server_check_on_a_gpu_image() -> None:
    image = os.environ.get("DOCKERGEN_GPU_IMAGE")
    if not image:
        pytest.skip("set DOCKERGEN_GPU_IMAGE to an image built by dockergen")
    from dockergen.daemon.docker import DockerDaemon

    daemon = DockerDaemon()
    labels = daemon.inspect(image)["Config"]["Labels"]
    port = int(os.environ.get("DOCKERGEN_GPU_PORT", "8000"))
    ok, detail = daemon.serve_check(image, port, os.environ.get("DOCKERGEN_GPU_MODEL", ""),
                                    timeout=900, gpus=True)
    assert ok, f"{labels.get('dockergen.profile.name')}: {detail}"
