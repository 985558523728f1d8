"""Run-time facts per engine, each with its source: health endpoint, writable caches, shm.

A table keyed by ``engine.name`` so adding an engine (e.g. SGLang) is one row.
May import: nothing of dockergen.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CacheDir:
    """A directory the engine writes at run time; it gets a tmpfs/emptyDir mount."""

    name: str  # volume name (DNS-1123 label)
    path: str  # "{home}" is the image's HOME
    why: str
    src: str
    # The engine loads code it compiled at run time from here (dlopen/mmap PROT_EXEC): a
    # tmpfs mounted noexec, Docker's default (moby daemon/oci_linux.go tmpfs options
    # "noexec,nosuid,nodev"), fails with "failed to map segment from shared object".
    loads_code: bool = False


@dataclass(frozen=True)
class EngineRun:
    """How an engine's server is probed and which directories it writes."""

    health_path: str
    health_src: str
    caches: tuple[CacheDir, ...]
    env: tuple[tuple[str, str, str], ...]  # (name, value, why + src) set at run time


# Every engine: /tmp and the XDG cache / config roots under HOME.
_TMP = CacheDir(
    "tmp", "/tmp",
    "torch inductor writes /tmp/torchinductor_<user>; Python tempfiles; vLLM IPC sockets",
    "torch/_inductor/runtime/cache_dir_utils.py default_cache_dir (tempfile.gettempdir() + "
    "'torchinductor_' + user; torch wheel not unpacked here); vllm 0.33.0 wheel "
    "vllm/envs.py VLLM_RPC_BASE_PATH = tempfile.gettempdir()", loads_code=True)
_CACHE = CacheDir(
    "cache", "{home}/.cache",
    "XDG cache root: HF_HOME (huggingface), vLLM (VLLM_CACHE_ROOT ~/.cache/vllm: "
    "torch.compile artifacts), FlashInfer JIT (~/.cache/flashinfer)",
    "huggingface_hub 2.4.0 wheel constants.py HF_HOME = $XDG_CACHE_HOME/huggingface; "
    "vllm 0.33.0 wheel vllm/envs.py get_default_cache_root / VLLM_CACHE_ROOT; "
    "flashinfer-python 0.7.2.post1 wheel flashinfer/jit/env.py FLASHINFER_CACHE_DIR = "
    "$FLASHINFER_WORKSPACE_BASE(~)/.cache/flashinfer", loads_code=True)
_TRITON = CacheDir(
    "triton", "{home}/.triton",
    "Triton kernel cache (TRITON_HOME defaults to ~, cache in ~/.triton/cache)",
    "triton 3.7.1 wheel triton/knobs.py cache_knobs.home_dir / get_triton_dir", loads_code=True)
_CONFIG = CacheDir(
    "config", "{home}/.config",
    "XDG config root: vLLM writes VLLM_CONFIG_ROOT ~/.config/vllm (usage-stats marker)",
    "vllm 0.33.0 wheel vllm/envs.py get_default_config_root / VLLM_CONFIG_ROOT")

_CACHE_SGLANG = CacheDir(
    "cache", "{home}/.cache",
    "HF_HOME (huggingface); SGLang's SGLANG_CACHE_DIR ~/.cache/sglang (DeepGEMM and JIT "
    "kernel caches); FlashInfer JIT (~/.cache/flashinfer)",
    "huggingface_hub 2.4.0 wheel constants.py HF_HOME; sglang 0.5.23 wheel "
    "sglang/srt/environ.py SGLANG_CACHE_DIR = expanduser('~/.cache/sglang'), "
    "SGLANG_DG_CACHE_DIR / SGLANG_JIT_CACHE_DIR under it; flashinfer-python wheel "
    "flashinfer/jit/env.py FLASHINFER_CACHE_DIR", loads_code=True)

ENGINES: dict[str, EngineRun] = {
    "vllm": EngineRun(
        health_path="/health",
        health_src="vllm 0.33.0 wheel vllm/entrypoints/serve/instrumentator/health.py "
                   "@router.get('/health'): 200 once the engine answers, 503 if dead",
        caches=(_TMP, _CACHE, _TRITON, _CONFIG),
        env=(("XDG_CACHE_HOME", "{home}/.cache",
              "pin the cache root to the mounted folder (vllm/envs.py get_default_cache_root)"),
             ("XDG_CONFIG_HOME", "{home}/.config",
              "pin the config root to the mounted folder "
              "(vllm/envs.py get_default_config_root)")),
    ),
    "tensorrt-llm": EngineRun(
        health_path="/health",
        health_src="doc:nvidia.github.io/TensorRT-LLM commands/trtllm-serve (endpoints "
                   "/health, /metrics, /version; engines-compat.md 3.5)",
        # The PyTorch backend uses torch inductor, Triton and FlashInfer like vLLM
        # (TRTLLM requirements.txt: triton, flashinfer-python); the tensorrt_llm wheel is
        # not on PyPI, so a TensorRT-LLM-specific cache path is not verified here.
        caches=(_TMP, _CACHE, _TRITON, _CONFIG),
        env=(("XDG_CACHE_HOME", "{home}/.cache", "pin the cache root to the mounted folder"),
             ("XDG_CONFIG_HOME", "{home}/.config", "pin the config root to the mounted "
                                                   "folder")),
    ),
    "sglang": EngineRun(
        health_path="/health",
        health_src="sglang 0.5.23 wheel srt/entrypoints/http_server.py:721 (one-token "
                   "generation; 503 while loading); dockergen/components/serving/sglang.yaml",
        caches=(_TMP, _CACHE_SGLANG, _TRITON),
        env=(("XDG_CACHE_HOME", "{home}/.cache", "pin the cache root to the mounted folder"),),
    ),
}

# /dev/shm: Docker's default is 64 MB; NVIDIA recommends --shm-size=1g for NGC containers
# (NGC banner quoted in awslabs/benchmark-ai#17), vLLM's Kubernetes example mounts a 2Gi
# memory emptyDir for tensor parallelism (vllm docs/deployment/k8s.md). vLLM's own
# shared-memory queues need 160 MiB + 240 MiB per rank (below); PyTorch and NCCL's SHM
# transport use /dev/shm on top. dockergen sizes 1 GiB plus 1 GiB per additional
# tensor-parallel rank, which covers both examples and the queues with room to spare.
SHM_BASE_GIB = 1
SHM_PER_EXTRA_RANK_GIB = 1
SHM_SRC = ("NGC: --shm-size=1g (awslabs/benchmark-ai#17); vLLM docs/deployment/k8s.md: 2Gi "
           "memory emptyDir at /dev/shm; vLLM queues 160 MiB + 240 MiB per rank; dockergen: "
           "1 GiB + 1 GiB per extra TP rank")
# vLLM 0.33.0 wheel: vllm/v1/executor/multiproc_executor.py rpc_broadcast_mq =
# MessageQueue(..., max_chunk_bytes=VLLM_MQ_MAX_CHUNK_BYTES_MB (16, vllm/envs.py) MiB) and
# one worker_response_mq = MessageQueue(1, 1) per rank; vllm/distributed/
# device_communicators/shm_broadcast.py MessageQueue defaults max_chunk_bytes 24 MiB,
# max_chunks 10; each ring buffer is max_chunks x max_chunk_bytes of shared memory.
VLLM_SHM_QUEUES_MIB = (16 * 10, 24 * 10)  # (broadcast queue, per-rank response queue)

# NCCL-friendly ulimits (NGC banner: --ulimit memlock=-1 --ulimit stack=67108864). memlock
# matters only for RDMA/InfiniBand transports, and raising it fails on engines that may not
# raise RLIMIT_MEMLOCK (rootless Docker; measured here: "error setting rlimit type 8:
# operation not permitted" with dockerd's hard limit at 8 MiB), so it is an opt-in.
ULIMITS = {"memlock": -1, "stack": 67108864}
ULIMITS_SRC = "NGC banner quoted in awslabs/benchmark-ai#17 (NVIDIA DGX user guide)"

# GPU Feature Discovery node labels (src: NVIDIA/gpu-feature-discovery README "Generated
# Labels"; cuda.driver.major is the driver's major version, e.g. 580).
GFD_COMPUTE_MAJOR = "nvidia.com/gpu.compute.major"
GFD_COMPUTE_MINOR = "nvidia.com/gpu.compute.minor"
GFD_DRIVER_MAJOR = "nvidia.com/cuda.driver.major"

# Opt-ins: settings that share host namespaces; each prints a warning when used.
OPT_INS: dict[str, str] = {
    "ipc-host": "shares the host's IPC namespace (CIS Docker 5.17; Pod Security baseline "
                "forbids hostIPC); use only where /dev/shm sizing is not enough",
    "memlock-unlimited": "ulimit memlock=-1 for RDMA/InfiniBand NCCL transports; the engine "
                         "must be allowed to raise RLIMIT_MEMLOCK (fails on rootless Docker)",
    "host-network": "shares the host's network namespace (CIS Docker 5.10; Pod Security "
                    "baseline forbids hostNetwork); e.g. for multi-node NCCL over the host NIC",
}


def shm_gib(tensor_parallel: int) -> int:
    """/dev/shm size in GiB for a tensor-parallel degree."""
    return SHM_BASE_GIB + SHM_PER_EXTRA_RANK_GIB * (tensor_parallel - 1)
