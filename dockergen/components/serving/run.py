"""What a serving engine needs at run time, as the run configurations write it: the shape
of an engine's run facts (:class:`EngineRun`, each engine's own in its folder), the
writable folders every engine shares (/tmp, the XDG cache and config roots, Triton's
cache), each with its source, and the shape of the model-length rule every engine applies
at start-up (:class:`ModelContext` in, :class:`ContextLimit` out; each engine's own rule in
its folder).
May import: nothing of dockergen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


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


# Pin the XDG roots to the mounted folders (the engine writes below them at run time).
PIN_CACHE_ROOT = ("XDG_CACHE_HOME", "{home}/.cache", "pin the cache root to the mounted folder")
PIN_CONFIG_ROOT = ("XDG_CONFIG_HOME", "{home}/.config",
                   "pin the config root to the mounted folder")


@dataclass(frozen=True)
class EngineRun:
    """Where the engine's health endpoint is documented and which directories it writes
    (the path itself is the engine's, :meth:`ServingEngine.probe_path`, which the image's
    HEALTHCHECK probes too)."""

    health_src: str
    caches: tuple[CacheDir, ...]
    env: tuple[tuple[str, str, str], ...]  # (name, value, why + src) set at run time


# Every engine: /tmp and the XDG cache / config roots under HOME.
TMP = CacheDir(
    "tmp", "/tmp",
    "torch inductor writes /tmp/torchinductor_<user>; Python tempfiles; vLLM IPC sockets",
    "torch/_inductor/runtime/cache_dir_utils.py default_cache_dir (tempfile.gettempdir() + "
    "'torchinductor_' + user; torch wheel not unpacked here); vllm 0.33.0 wheel "
    "vllm/envs.py VLLM_RPC_BASE_PATH = tempfile.gettempdir()", loads_code=True)
CACHE = CacheDir(
    "cache", "{home}/.cache",
    "XDG cache root: HF_HOME (huggingface), vLLM (VLLM_CACHE_ROOT ~/.cache/vllm: "
    "torch.compile artifacts), FlashInfer JIT (~/.cache/flashinfer)",
    "huggingface_hub 2.4.0 wheel constants.py HF_HOME = $XDG_CACHE_HOME/huggingface; "
    "vllm 0.33.0 wheel vllm/envs.py get_default_cache_root / VLLM_CACHE_ROOT; "
    "flashinfer-python 0.7.2.post1 wheel flashinfer/jit/env.py FLASHINFER_CACHE_DIR = "
    "$FLASHINFER_WORKSPACE_BASE(~)/.cache/flashinfer", loads_code=True)
TRITON = CacheDir(
    "triton", "{home}/.triton",
    "Triton kernel cache (TRITON_HOME defaults to ~, cache in ~/.triton/cache)",
    "triton 3.7.1 wheel triton/knobs.py cache_knobs.home_dir / get_triton_dir", loads_code=True)
CONFIG = CacheDir(
    "config", "{home}/.config",
    "XDG config root: vLLM writes VLLM_CONFIG_ROOT ~/.config/vllm (usage-stats marker)",
    "vllm 0.33.0 wheel vllm/envs.py get_default_config_root / VLLM_CONFIG_ROOT")


class Rope(NamedTuple):
    """One set of a model's RoPE parameters as the engines see them after transformers
    reads config.json (``rope_scaling`` becomes ``rope_parameters``; a legacy ``type`` is
    the ``rope_type``)."""

    rope_type: str
    factor: float | None  # None: the set has no factor
    # original_max_position_embeddings is in the set (written in config.json, or added by
    # transformers for llama3/yarn/longrope)
    has_original: bool


@dataclass(frozen=True)
class ModelContext:
    """What the engines read from a model's config.json to derive its longest context."""

    model_type: str
    lengths: tuple[tuple[str, int], ...]  # every length key the config sets, with its value
    rope: tuple[Rope, ...]  # one per set; several when nested by layer type
    rope_nested: bool


@dataclass(frozen=True)
class ContextLimit:
    """The longest max_model_len an engine starts with for a model (``tokens``), how it
    was derived (``rule``, with the engine source it mirrors), and whether the profile's
    environment turns the engine's refusal of a longer one into a warning
    (``override_env`` set as the engine parses it: ``overridden``)."""

    tokens: int
    rule: str
    override_env: str
    overridden: bool
