"""The profile's sections of what runs on the GPUs: the targets, CUDA, the engine and
its release, FlashAttention, quantization and the server's command.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from dockergen.input.values import (
    INT32_MAX,
    CudaVersion,
    EngineName,
    EnvName,
    EnvValue,
    ExtraArg,
    FilePath,
    Host,
    ImageRef,
    KvQuant,
    MaxJobs,
    ModelPath,
    PackageVersion,
    Section,
    Text,
    WeightQuant,
    shaped,
)

# The defaults fit the headline release, vLLM 0.33.0 (torch 2.14.0, CUDA 13 wheels,
# Requires-Python >=3.10): a stand-alone profile that names only its GPUs, the engine
# release, the model and the image validates (profiles/h100-standalone.yaml).
HEADLINE_CUDA = "13.0.2"
HEADLINE_PYTHON = "3.12"


class Gpu(Section):
    """Which GPUs the image must run on."""

    targets: tuple[str, ...] = Field(
        min_length=1,
        description="GPU names (a100, h100, l40s, b200, ...) or compute capabilities "
                    "(\"8.0\", \"9.0\"); list several for one image serving all of them.")


class Cuda(Section):
    """The CUDA toolkit of the base images."""

    version: CudaVersion = Field(HEADLINE_CUDA, description="CUDA toolkit version; drives the "
                                 "nvidia/cuda tags.")
    os: Literal["ubuntu20.04", "ubuntu22.04", "ubuntu24.04"] = "ubuntu22.04"
    devel_image: ImageRef | None = Field(
        None, description="Explicit build image (a mirror, NGC, or an @sha256 pin); "
                          "replaces nvidia/cuda:<version>-devel-<os>.")
    runtime_image: ImageRef | None = Field(
        None, description="Explicit runtime image; replaces nvidia/cuda:<version>-<flavor>-<os>.")
    runtime_flavor: Literal["runtime", "base"] = Field(
        "base", description="nvidia/cuda flavour of the runtime stage. base: the CUDA "
                            "runtime (cudart) only; torch and the engines bring their CUDA "
                            "libraries as wheels (nvidia-*), so runtime's own cuBLAS, cuFFT, "
                            "NCCL, ... would be a second, unused set (vLLM's own Dockerfile "
                            "ends on base too).")


class Engine(Section):
    """The inference engine and its release; torch and friends are derived from it."""

    name: EngineName
    version: PackageVersion
    torch: PackageVersion | None = Field(
        None, description="Override the torch pin derived from the engine release.")


class FlashAttnSource(Section):
    """A pinned flash-attn source built instead of the PyPI sdist of ``version``.

    For fixes merged upstream but not released (e.g. Dao-AILab/flash-attention PR #2879/#2899:
    C++20 for torch >= 2.14): an sdist-like archive (with csrc/cutlass) at ``url`` checked
    against ``sha256``, or a git repository at ``commit`` (pip checks out the submodules).
    """

    url: Annotated[str, shaped("url")] | None = None
    sha256: Annotated[str, shaped("sha256")] | None = None
    git: Annotated[str, shaped("url")] | None = None
    commit: Annotated[str, shaped("git_commit")] | None = None
    cxx_std: Literal[17, 20, 23] | None = Field(
        None, description="The C++ standard this source's setup.py forces (-std=c++NN); "
        "checked against the torch headers. Unset: unknown until the build.")

    @model_validator(mode="after")
    def _one_kind(self) -> FlashAttnSource:
        archive = self.url is not None or self.sha256 is not None
        git = self.git is not None or self.commit is not None
        if archive == git:
            raise ValueError("give either url + sha256 (an archive) or git + commit")
        if archive and (self.url is None or self.sha256 is None):
            raise ValueError("an archive source needs both url and sha256")
        if git and (self.git is None or self.commit is None):
            raise ValueError("a git source needs both git and commit")
        return self


class FlashAttn(Section):
    """FlashAttention-2, compiled from source for exactly the target GPUs."""

    # none: the headline vLLM release's attention uses its bundled kernels, and every
    # released flash-attn forces C++17, which its torch (2.14) refuses (rule fa2-cxx-std)
    build: Literal["source", "none"] = "none"
    version: PackageVersion = "2.8.3.post2"
    source: FlashAttnSource | None = None
    max_jobs: MaxJobs = Field("auto", description="ninja jobs; auto = build.memory_gib / 9 GiB.")
    nvcc_threads: int = Field(4, ge=1, le=32)
    purpose: Text | None = Field(
        None, description="What in the image uses this FlashAttention-2 build (e.g. "
        "transformers attn_implementation=flash_attention_2). Engines with their own "
        "attention kernels (vLLM, SGLang) warn about an unexplained build; a purpose "
        "answers that warning and is shown by explain.")


class Quantization(Section):
    """Weight and KV-cache precision."""

    weights: WeightQuant = "auto"
    kv_cache: KvQuant = "auto"


class Serving(Section):
    """How the OpenAI-compatible server is started (ENTRYPOINT/CMD of the image)."""

    model: ModelPath = Field(description="Model directory in the image/volume, or a HF id.")
    served_model_name: ModelPath | None = None
    host: Host = "0.0.0.0"
    port: int = Field(8000, ge=1, le=65535)
    max_model_len: int | None = Field(None, ge=1, le=INT32_MAX)
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    max_num_batched_tokens: int | None = Field(None, ge=1, le=INT32_MAX)
    max_num_seqs: int | None = Field(None, ge=1, le=INT32_MAX)
    enable_chunked_prefill: bool | None = None
    tensor_parallel_size: int = Field(1, ge=1, le=64)
    extra_args: tuple[ExtraArg, ...] = Field(
        (), description="Extra server arguments, appended after the derived ones.")
    env: dict[EnvName, EnvValue] = Field(
        default_factory=dict, description="Non-secret runtime environment (never tokens).")
    health_start_period_s: int = Field(600, ge=0, le=7200,
                                       description="HEALTHCHECK --start-period (model load).")
    hf_config: FilePath | None = Field(
        None, description="The model's Hugging Face config.json (relative to the profile "
                          "file) or a built-in model name (dockergen plan); validate then "
                          "checks that max_model_len fits. For an engine that JIT-builds "
                          "kernels at start-up (SGLang), the image's JIT cache is seeded "
                          "for this model's dtype and RoPE shape; unset, its first start on "
                          "each node compiles them.")
