"""The profile's sections of the image and its build: name, tags and labels, the build
host and package sources, extra packages and the runtime stage.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dockergen.input.values import (
    AptName,
    HostPath,
    ImageRepo,
    LabelKey,
    LabelText,
    MirrorUrl,
    PipPin,
    RefTemplate,
    Section,
    TagTemplate,
    Url,
)


class Image(Section):
    """Name, tags and extra labels of the built image."""

    name: ImageRepo
    tags: tuple[TagTemplate, ...] = ("{engine.version}-cu{cuda.major_minor}-{name}",)
    labels: dict[LabelKey, LabelText] = Field(default_factory=dict)
    cache_ref: RefTemplate | None = Field(
        None, description="Registry build-cache ref of the bake target (cache-from/cache-to, "
                          "mode=max); placeholders as in tags. Default: "
                          "<image.name>:buildcache-{name}. One ref per target.")
    attest: tuple[Literal["provenance", "sbom"], ...] = Field(
        (), description="Build attestations the bake target asks for (opt-in): provenance "
                        "(mode=max) and/or sbom.")
    compression: Literal["zstd", "gzip"] = Field(
        "zstd", description="Layer compression of the pushed image. zstd (default): nodes "
                            "decompress it about 6x faster (vLLM's venv: 8.4 s vs 52.6 s) and "
                            "need containerd >= 1.5 or Docker Engine >= 23; building it needs "
                            "BuildKit with the containerd image store. gzip: any node and any "
                            "engine.")


class Build(Section):
    """The build host and the package sources of the build stages."""

    memory_gib: int = Field(64, ge=4, le=4096,
                            description="Build host memory; sizes MAX_JOBS of CUDA compiles.")
    platform: Literal["linux/amd64", "linux/arm64"] = Field(
        "linux/amd64",
        description="The machine the image runs on: its wheels, the compiled kernels the "
                    "checks read and the GPUs it may target are that machine's (GH200, "
                    "GB200 and GB10 exist only as linux/arm64 hosts).")
    ca_certificates: tuple[HostPath, ...] = Field(
        (), description="Extra CA certificate files (PEM) for TLS-intercepting proxies; "
                        "installed in build stages only. Relative to the profile.")
    python_from: Literal["uv", "image"] = Field(
        "uv", description="uv: a relocatable CPython installed by uv; image: the base "
                          "image's own python3 (must be the profile's version).")
    python_mirror: MirrorUrl | None = Field(
        None, description="Mirror of python-build-standalone for build.python_from: uv "
                          "(uv's UV_PYTHON_INSTALL_MIRROR): uv fetches "
                          "MIRROR/RELEASE/ARCHIVE instead of its built-in download URL and "
                          "still checks the sha256 built into uv. http(s) (no credentials) "
                          "or file:///path inside the build stage: dockergen copies "
                          "nothing from the host, so the archives must already be in "
                          "cuda.devel_image.")
    pip_index_url: Url | None = Field(None, description="PyPI mirror (no credentials).")
    torch_index_url: Url = Field(
        "https://download.pytorch.org/whl",
        description="Root of PyTorch's own download index (or a mirror of it); dockergen "
                    "appends the CUDA-matched folder (/cu130). Used with torch_from: "
                    "pytorch-index.")
    torch_from: Literal["pytorch-index", "main-index"] = Field(
        "pytorch-index",
        description="Where torch comes from. pytorch-index: torch_index_url's CUDA-matched "
                    "folder. main-index: the main index (build.pip_index_url or PyPI), for "
                    "shops that mirror only PyPI; allowed only where PyPI's wheel of the "
                    "engine's torch release is built for the profile's CUDA major (its "
                    "cuda-toolkit / nvidia-*-cuNN dependencies, torch.yaml pypi_cuda_major).")
    engine_index_url: Url | None = Field(
        None, description="Replaces the engine's own extra index (TensorRT-LLM: "
                          "https://pypi.nvidia.com), e.g. with a mirror.")
    flashinfer_index_url: Url | None = Field(
        None, description="Index with FlashInfer's precompiled kernels (flashinfer-cubin) "
                          "for vLLM releases that leave them out and whose version PyPI lacks "
                          "(vLLM >= 0.27.1: https://flashinfer.ai/whl, or a mirror). Unset: "
                          "those images carry no precompiled kernels (explain says so).")
    flashinfer_aot: bool = Field(
        True, description="Build the FlashInfer kernels the engine release runs at start-up "
                          "(e.g. vLLM 0.33.0's sampler) for gpu.targets in the build, with "
                          "CUDA's compiler wheels from the index (no GPU needed). false: none "
                          "are built and the engine JIT-compiles them at its first start, "
                          "which needs nvcc on the node (runtime.jit_toolchain).")


class Packages(Section):
    """Extra packages: pip pins installed with the engine (keeping its torch pin, checked
    against the pins dockergen derives) and apt packages of the runtime image."""

    pip: tuple[PipPin, ...] = Field((), description="Exact pins NAME==VERSION, installed in the "
                                                    "engine stage together with the engine.")
    apt: tuple[AptName, ...] = Field((), description="Packages of the runtime image (no "
                                                     "compilers unless runtime.jit_toolchain).")


class Runtime(Section):
    """The runtime stage."""

    uid: int = Field(10001, ge=1, le=2_000_000_000, description="Numeric non-root user.")
    jit_toolchain: bool = Field(
        False, description="Keep nvcc and gcc in the runtime image for JIT kernels.")
