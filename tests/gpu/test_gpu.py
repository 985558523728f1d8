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

from dockergen.build.smoke import FA_GPU_SCRIPT

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
    from dockergen.build.daemon.docker import DockerDaemon

    daemon = DockerDaemon()
    labels = daemon.inspect(image)["Config"]["Labels"]
    port = int(os.environ.get("DOCKERGEN_GPU_PORT", "8000"))
    ok, detail = daemon.serve_check(image, port, os.environ.get("DOCKERGEN_GPU_MODEL", ""),
                                    timeout=900, gpus=True)
    assert ok, f"{labels.get('dockergen.profile.name')}: {detail}"


# A Llama-shaped model with random weights, made offline inside the image with its own
# transformers (no hub, no tokenizer: the server takes token ids), small enough for any GPU.
TINY_MODEL = """
import sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
torch.manual_seed(0)
config = LlamaConfig(vocab_size=512, hidden_size=256, intermediate_size=512,
                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                     max_position_embeddings=512, torch_dtype="bfloat16")
LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(sys.argv[1])
"""


def test_the_vllm_image_serves_a_first_token_with_flashinfer_jit_disabled(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The image starts on its GPU with every FlashInfer kernel it needs shipped: JIT
    disabled, /health answers, the first token comes, and no module was built at start."""
    import json
    import time
    import urllib.request

    image = os.environ.get("DOCKERGEN_GPU_IMAGE")
    if not image:
        pytest.skip("set DOCKERGEN_GPU_IMAGE to a vLLM image built by dockergen")
    import docker

    client = docker.from_env()
    model = tmp_path / "tiny"
    model.mkdir(mode=0o777)
    gpus = [docker.types.DeviceRequest(count=1, capabilities=[["gpu"]])]
    client.containers.run(image, ["-c", TINY_MODEL, "/models/tiny"], entrypoint=["python"],
                          volumes={str(tmp_path): {"bind": "/models", "mode": "rw"}},
                          remove=True)
    server = client.containers.run(
        image, ["/models/tiny", "--port", "8000", "--max-model-len", "256",
                "--skip-tokenizer-init", "--gpu-memory-utilization", "0.3",
                "--served-model-name", "tiny"],
        environment={"FLASHINFER_DISABLE_JIT": "1"}, device_requests=gpus,
        volumes={str(tmp_path): {"bind": "/models", "mode": "ro"}},
        ports={"8000/tcp": ("127.0.0.1", None)}, detach=True)
    try:
        deadline = time.monotonic() + 600
        while True:
            server.reload()
            assert server.status == "running", server.logs()[-3000:]
            port = server.attrs["NetworkSettings"]["Ports"]["8000/tcp"][0]["HostPort"]
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5)
                break
            except OSError:
                assert time.monotonic() < deadline, server.logs()[-3000:]
                time.sleep(5)
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/completions", method="POST",
            headers={"Content-Type": "application/json"},
            data=json.dumps({"model": "tiny", "prompt": [1, 2, 3, 4], "max_tokens": 1,
                             "temperature": 0.8, "top_k": 20, "top_p": 0.9}).encode())
        answer = json.load(urllib.request.urlopen(request, timeout=120))
        assert answer["usage"]["completion_tokens"] == 1, answer
        logs = server.logs().decode(errors="replace")
        assert "Building JIT module" not in logs and "MissingJITCacheError" not in logs
    finally:
        server.remove(force=True)
