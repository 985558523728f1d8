"""What a serving engine needs at run time, as the run configurations write it: the shape
of an engine's run facts (:class:`EngineRun`, each engine's own in its folder), the
writable folders every engine shares (/tmp, the XDG cache and config roots, Triton's
cache), each with its source, and the shape of the model-length rule every engine applies
at start-up (:class:`ModelContext` in, :class:`ContextLimit` out; each engine's own rule in
its folder).
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


# OpenShift's restricted-v2 SCC runs a container as an arbitrary UID from the namespace's
# range, with GID 0 and no /etc/passwd entry. So HOME, under which the engine makes every
# cache folder below, belongs to group 0 with the owner's rights (chgrp -R 0, chmod -R g=u),
# and nothing may depend on the UID having a user name. The image does not make the cache
# folders themselves: runc gives a tmpfs mounted over an existing folder that folder's mode
# and root's ownership (measured: a 0775 folder became a root-owned 0775 tmpfs despite
# mode=1777), which would lock the image's own user out of its Compose mounts.
# src: OpenShift Container Platform 4 docs, "Creating images", "Support arbitrary user ids"
# (chgrp -R 0, chmod -R g=u); restricted-v2 SCC (MustRunAsRange UID, GID 0); vLLM's
# docker/Dockerfile nonroot target (UID 2000, GID 0).
ARBITRARY_UID_GID = 0

# torch names its inductor cache after getpass.getuser(), which raises for a UID without a
# passwd entry (no USER/LOGNAME in the environment either): the first torch.compile of an
# arbitrary UID would fail. A fixed folder under /tmp (mode 1777, a tmpfs/emptyDir in the
# run configurations) does not ask for a name.
INDUCTOR_CACHE = "/tmp/torchinductor"
IMAGE_ENV = (
    ("TORCHINDUCTOR_CACHE_DIR", INDUCTOR_CACHE,
     "torch/_inductor/runtime/cache_dir_utils.py cache_dir(): TORCHINDUCTOR_CACHE_DIR, else "
     "tempfile.gettempdir()/torchinductor_ + getpass.getuser() (raises for a UID without a "
     "passwd entry, e.g. OpenShift's arbitrary UIDs)"),
)

# Every engine: /tmp and the XDG cache / config roots under HOME.
TMP = CacheDir(
    "tmp", "/tmp",
    f"torch inductor writes {INDUCTOR_CACHE} (TORCHINDUCTOR_CACHE_DIR, set by the image); "
    "Python tempfiles; vLLM IPC sockets",
    "torch/_inductor/runtime/cache_dir_utils.py cache_dir (TORCHINDUCTOR_CACHE_DIR; torch "
    "wheel not unpacked here); vllm 0.33.0 wheel "
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
    (``override_env`` set as the engine parses it: ``overridden``). ``beyond``: what the
    engine does with a longer one; ``lowers``: it starts with ``tokens`` instead of
    refusing (TensorRT-LLM), so the profile's length is not the one served."""

    tokens: int
    rule: str
    override_env: str
    overridden: bool
    beyond: str = "refuses it at start-up"
    lowers: bool = False
