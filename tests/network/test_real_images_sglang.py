"""The shipped SGLang image (h100-sglang-fp8) built from the real packages on PyPI.

The same build and overrides as tests/network/test_real_images.py (see its docstring); a module of
its own so that the vLLM image and its build cache are removed (at that module's end) before
this one is built: the disk holds one real image at a time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

import pytest

from dockergen.build.smoke import serve_parser_check
from dockergen.parts import engine_jit, flashinfer
from dockergen.resolve.model import CommandCheck
from dockergen.resources import templates_dir
from tests.network.test_real_images import (
    RealImage,
    _assert_checks_passed,
    _build,
    _checks,
    _derive,
    _run,
)

pytestmark = [pytest.mark.daemon, pytest.mark.network, pytest.mark.slow]


@pytest.fixture(scope="module")
def sglang_image(docker_client, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealImage]:  # type: ignore[no-untyped-def]
    yield from _build("h100-sglang-fp8.yaml", "sglang", tmp_path_factory.mktemp("real"),
                      docker_client)


def test_the_sglang_image_builds_from_pypi_and_passes_every_check(sglang_image: RealImage
                                                                  ) -> None:
    _assert_checks_passed(sglang_image)
    checks = _checks(sglang_image.record)
    jit = [c for name, c in checks.items() if "start-up JIT kernels are in the image's cache"
           in name]
    aot = [c for name, c in checks.items() if "FlashInfer's start-up kernels load" in name]
    assert len(jit) == 1 and jit[0]["ok"], jit
    assert "3 kernel(s) (activation, fused_rope, per_token_quant_fp8) found for 9.0 with " \
        "SGLANG_CRASH_ON_JIT_COMPILE=1" in jit[0]["detail"], jit[0]
    assert len(aot) == 1 and aot[0]["ok"], aot


def test_the_jit_check_fails_where_the_cache_lacks_a_kernel(sglang_image: RealImage,
                                                            docker_client) -> None:  # type: ignore[no-untyped-def]
    """SGLang's own switch turns the missing kernel into an error: the seeded cache is what
    spares a GPU node the compile, and the check tells a miss from a hit."""
    jit = sglang_image.resolved.engine_jit
    assert jit is not None
    broken = _derive(docker_client, sglang_image.image,
                     f"rm -r {jit.cache_dir}/sm90a/sgl_kernel_jit_fused_rope_*")
    ok, detail = _run(engine_jit.load_check(jit), broken)
    assert not ok
    assert "9.0 fused_rope: RuntimeError: JIT module 'sgl_kernel_jit_fused_rope_" in detail, detail
    assert "SGLANG_CRASH_ON_JIT_COMPILE forbids compiling at runtime" in detail, detail
    assert "activation" not in detail and "per_token_quant_fp8" not in detail, detail


def test_a_kernel_not_seeded_compiles_in_the_image_as_the_runtime_user(
        sglang_image: RealImage) -> None:
    """The image carries the compiler the engine's JIT uses (nvcc from CUDA's wheels, g++)
    and a cache the runtime user may write: a kernel the image was not seeded with (float16
    SiLU-and-mul, another model's) builds and loads at run time, as on a GPU node."""
    jit = sglang_image.resolved.engine_jit
    assert jit is not None
    builder = next(k.builder for k in jit.kernels if k.name == "activation")
    seed = CommandCheck("compile", (
        f"{jit.venv}/bin/python", f"{engine_jit.SCRIPT_DIR}/engine_jit.py", "seed",
        "--archs", "9.0", "--override", jit.override, "--cache-env", jit.cache_env,
        "--cache-dir", jit.cache_dir, "--kernels",
        json.dumps([{"name": "activation", "builder": builder, "args": ["torch.float16"]}])),
        lambda code, out: (code == 0 and '"activation": "built"' in out, out.strip()[-800:]))
    ok, detail = _run(seed, sglang_image.image)
    assert ok, detail


def test_the_sampling_module_check_fails_without_its_library(sglang_image: RealImage,
                                                              docker_client) -> None:  # type: ignore[no-untyped-def]
    aot = sglang_image.resolved.flashinfer_aot
    assert aot is not None
    broken = _derive(docker_client, sglang_image.image, f"rm -r {aot.aot_dir}/sampling")
    ok, detail = _run(flashinfer.load_check(aot, (templates_dir() / "context" /
                                                  "driver_stub.py").read_text()), broken)
    assert not ok
    assert detail.startswith("sampling: MissingJITCacheError"), detail


def test_the_sglang_parser_check_fails_on_a_flag_the_release_lacks(sglang_image: RealImage
                                                                   ) -> None:
    runtime = sglang_image.resolved.runtime
    wrong = replace(sglang_image.resolved, runtime=replace(
        runtime, cmd=(*runtime.cmd, "--swap-space", "4")))
    ok, detail = _run(serve_parser_check(wrong, (templates_dir() / "context" /
                                                 "driver_stub.py").read_text()),
                      sglang_image.image)
    assert not ok
    assert "unrecognized arguments: --swap-space 4" in detail, detail
