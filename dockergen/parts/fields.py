"""Profile fields that take effect only with other settings: one table of them, and the
rule that warns when the profile sets one that the rest of it leaves without effect.

Each entry names the field, when it counts (a predicate on the check context, from the
same fields and facts the component that reads it goes by) and what would make it count,
with the place that reads it. Only a value the profile's own file or a ``--set`` writes is
warned about: a parent profile's values are defaults it provides for the profiles that use
them (base.yaml's flash_attn.version serves the profiles that build FlashAttention-2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dockergen.resolve.context import UNUSED as UNUSED  # how its warning begins
from dockergen.resolve.context import Context


@dataclass(frozen=True)
class Conditional:
    """A field that counts only when ``counts`` holds for the profile."""

    path: tuple[str, ...]
    counts: Callable[[Context], bool]
    needs: str  # the change that makes it count (the field and value), as the fix says it
    reader: str  # what reads the field, when it counts (the effect it would have)


def _fa2_source(c: Context) -> bool:
    return c.p.flash_attn.build == "source"


def _aot_built(c: Context) -> bool:
    return c.flashinfer_aot is not None and c.p.build.flashinfer_aot


def _jit_seeded(c: Context) -> bool:
    """The engine's start-up JIT kernels are compiled in the build (parts/engine_jit.py)."""
    return c.startup_jit is not None and c.p.serving.hf_config is not None


_FA2 = ("set flash_attn.build: source", "the flash-attn stage (parts/flash_attn.py), built "
        "only with flash_attn.build: source")
CONDITIONAL: tuple[Conditional, ...] = (
    *(Conditional(("flash_attn", name), _fa2_source, *_FA2)
      for name in ("version", "source", "max_jobs", "nvcc_threads", "purpose")),
    Conditional(("build", "torch_index_url"),
                lambda c: c.p.build.torch_from == "pytorch-index",
                "set build.torch_from: pytorch-index",
                "torch's install (parts/torch.py derive): with torch_from: main-index "
                "torch comes from the main index"),
    Conditional(("cuda", "runtime_flavor"), lambda c: c.p.cuda.runtime_image is None,
                "remove cuda.runtime_image",
                "the runtime image's nvidia/cuda tag (parts/cuda.py base_images); "
                "cuda.runtime_image replaces that tag"),
    Conditional(("build", "flashinfer_aot"), lambda c: c.flashinfer_aot is not None,
                "use an engine release whose FlashInfer start-up kernels are known (the "
                "engine facts' flashinfer_aot table, e.g. vllm 0.33.0)",
                "the flashinfer-aot stage (parts/flashinfer.py derive)"),
    Conditional(("build", "memory_gib"),
                lambda c: _fa2_source(c) or _aot_built(c) or _jit_seeded(c),
                "set flash_attn.build: source, or build kernels ahead of time (an engine "
                "release whose FlashInfer start-up kernels are known, with "
                "build.flashinfer_aot: true, or whose own start-up JIT kernels are known, with "
                "serving.hf_config naming the model)",
                "the compile jobs of the flash-attn and flashinfer-aot stages and of the "
                "engine's seeded JIT cache"),
)


def described() -> str:
    """The table in words, for the checks reference (docs/reference/checks.md)."""
    return ("a field the profile's own file or a `--set` writes that the rest of it leaves "
            "without effect (an inherited default is not one): "
            + "; ".join(f"`{'.'.join(e.path)}` ({e.needs.split(' (')[0]} for it to count)"
                        for e in CONDITIONAL))


def _empty(c: Context, path: tuple[str, ...]) -> bool:
    """An empty text or list written for the field says "none" (``--set
    flash_attn.purpose=``): nothing is asked of it."""
    value: object = c.p
    for part in path:
        value = getattr(value, part)
    return value is None or (isinstance(value, (str, tuple, dict)) and not value)


def check_unused(c: Context) -> None:
    """field-unused: a field the profile sets that has no effect with the rest of it is a
    warning naming what would make it count."""
    if c.release is None:  # the release decides some of it; its own error comes first
        return
    for entry in CONDITIONAL:
        if c.loaded.sets(*entry.path) and not _empty(c, entry.path) and not entry.counts(c):
            name = ".".join(entry.path)
            c.warn(entry.path, f"{UNUSED}: it is read by "
                   f"{entry.reader}, which this profile does not run",
                   f"{entry.needs} for it to count, or remove {name}")
