"""The stages of the kernels an engine would otherwise compile at start-up: FlashInfer's
modules built ahead of time, and the engine's own JIT kernels seeded into its cache (part of
the typed resolved model, :mod:`dockergen.resolve.model`, which names them too).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from dockergen.resolve.mode import Mode


# --- FlashInfer ahead of time ----------------------------------------------------------------
@dataclass(frozen=True)
class FlashInferModule:
    """One FlashInfer kernel module the engine loads at start-up or first request: its name
    (``flashinfer/data/aot/<name>/<name>.so``) and the JIT spec that builds it
    (``package.module:function``)."""

    name: str
    spec: str


@dataclass(frozen=True)
class FlashInferAotStage:
    """FlashInfer's start-up kernels compiled in the build for the GPU targets, with CUDA's
    compiler wheels (no GPU needed; the runtime loads them before any JIT)."""

    version: str  # flashinfer-python
    modules: tuple[FlashInferModule, ...]
    arch_list: str  # FLASHINFER_CUDA_ARCH_LIST, e.g. "9.0a 10.0a"
    # the compiler wheels: cuda-toolkit[nvcc,cccl,cudart,curand,cublas]==13.0.2 and the
    # nvvm/crt wheels pinned to its nvcc
    nvcc: tuple[str, ...]
    ninja: str  # the build driver FlashInfer's JIT specs use, e.g. ninja==1.13.2
    cuda_home: str  # CUDA home inside the compiler wheels' target folder
    target: str  # the folder the compiler wheels are installed into
    max_jobs: int
    venv: str
    mode: Mode
    aot_dir: str  # the installed flashinfer's data/aot folder in the venv


@dataclass(frozen=True)
class JitKernel:
    """One kernel the engine JIT-builds at start-up, as its own builder is called: the
    builder (``package.module:function``) with arguments as JSON values, where a string
    ``torch.NAME`` stands for that torch dtype."""

    name: str
    builder: str
    args: tuple[Any, ...]


@dataclass(frozen=True)
class EngineJit:
    """The engine's own start-up JIT: the compiler it needs at run time (CUDA's compiler
    wheels in a folder of their own, g++ from the runtime image's distribution) and the
    kernels seeded into its JIT cache in the runtime stage, for each GPU target."""

    engine: str  # e.g. "sglang 0.5.23"
    toolchain: tuple[str, ...]  # the compiler wheels (cuda-toolkit[...]==X, nvvm, crt)
    target: str  # the folder the compiler wheels are installed into
    cuda_home: str  # CUDA home inside it (CUDA_HOME at run time)
    apt: tuple[str, ...]  # the host compiler nvcc hands host code to, and links with
    script_dir: str  # where the seeding script and the driver stub are in the image
    cache_dir: str  # the engine's JIT cache, seeded here, writable by the runtime user
    cache_env: str  # the engine's variable naming its JIT cache folder
    crash_env: str  # the engine's switch that turns a cache miss into an error
    override: str  # the engine's arch override (``module:function(major, minor)``)
    archs: tuple[str, ...]  # compute capabilities to seed, e.g. ("9.0",)
    kernels: tuple[JitKernel, ...]  # empty: nothing seeded (the model is not known)
    max_jobs: int
    venv: str
    mode: Mode

    @property
    def env(self) -> dict[str, str]:
        """The runtime image's environment for it: CUDA_HOME and the engine's cache folder."""
        return {"CUDA_HOME": self.cuda_home, self.cache_env: self.cache_dir}

    @property
    def kernel_rows(self) -> list[dict[str, Any]]:
        """The kernels as JSON values: what the seeding script and the check read, and what
        the profile hash covers."""
        return [{"name": k.name, "builder": k.builder, "args": list(k.args)}
                for k in self.kernels]

    @property
    def kernels_json(self) -> str:
        """:attr:`kernel_rows` as the seeding script's and the check's argument."""
        return json.dumps(self.kernel_rows, sort_keys=True, separators=(",", ":"))
