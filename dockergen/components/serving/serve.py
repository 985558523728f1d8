"""What every engine's server command shares: the quantization flags.

Each engine's ``serve()`` builds its own command (its positional model, its own flag names);
the weight and KV-cache quantization flags come the same way for each, from the facts'
``quantization`` and ``kv_cache`` rows (a ``flag`` or a ``dtype`` per method).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dockergen.components.base import Context
from dockergen.model import Derivation

if TYPE_CHECKING:
    from dockergen.components.serving.base import ServingEngine

Flag = Callable[[str, object, str], None]  # flag(name, value, where it comes from)


def quantization_flags(engine: ServingEngine, c: Context, d: list[Derivation], flag: Flag,
                       reader: str) -> None:
    """``--quantization``/``--dtype`` for quantization.weights and ``--kv-cache-dtype`` for
    quantization.kv_cache, through ``flag``; a method the checkpoint declares sets no flag,
    and its derivation says ``reader`` (the engine, in words) reads it from the checkpoint.
    Per-release sources name the release as ``<release>``."""
    q = c.p.quantization
    weights = engine.quant(c.facts, "quantization", q.weights) or {}
    if weights.get("flag"):
        flag("--quantization", weights["flag"], f"quantization.weights={q.weights}")
    elif weights.get("dtype"):
        flag("--dtype", weights["dtype"], f"quantization.weights={q.weights}")
    elif q.weights != "auto":
        d.append(Derivation("serve --quantization", "(from the checkpoint)",
                            f"quantization.weights={q.weights}: {reader} reads "
                            "quantization_config from the checkpoint",
                            weights.get("src", "").replace("<release>", c.p.engine.version)))
    kv = engine.quant(c.facts, "kv_cache", q.kv_cache) or {}
    if kv.get("flag"):
        flag("--kv-cache-dtype", kv["flag"], f"quantization.kv_cache={q.kv_cache}")
