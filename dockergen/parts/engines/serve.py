"""A serving engine's server command: what every engine's ``serve()`` shares.

Each engine's :meth:`EngineServe.serve` builds its own command (its positional model, its
own flag names); the weight and KV-cache quantization flags (:func:`quantization_flags`)
and the profile's ``serving.extra_args`` come the same way for each, and so do the extra
environment and smoke imports an engine may add and its server-parser script.
"""

from __future__ import annotations

from collections.abc import Callable

from dockergen.knowledge.facts import Facts
from dockergen.parts.engines.identity import EngineIdentity
from dockergen.parts.engines.rules import EngineRules
from dockergen.resolve.context import Context
from dockergen.resolve.model import (
    Derivation,
    ServeCommand,
    SmokeImport,
)

# The reason of every derivation of a serving.extra_args item (an engine's own checks of the
# flags it derives leave these out).
EXTRA_ARGS_REASON = "from serving.extra_args"
Flag = Callable[[str, object, str], None]  # flag(name, value, where it comes from)


def quantization_flags(engine: EngineIdentity, c: Context, d: list[Derivation], flag: Flag,
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


class EngineServe(EngineRules):
    """The server command and what the runtime adds for it."""

    def extra_args(self, c: Context, d: list[Derivation], src: str) -> tuple[str, ...]:
        """serving.extra_args, appended to the server command as given, one derivation per
        flag (with its value: ``--a=1`` or ``--a 1``) or plain argument, so that `explain`
        shows every argument the server gets."""
        args = c.p.serving.extra_args
        skip = False
        for i, arg in enumerate(args):
            if skip:
                skip = False
                continue
            if arg.startswith("-") and not arg[1:2].isdigit():
                name, sep, value = arg.partition("=")
                if not sep and i + 1 < len(args) and (not args[i + 1].startswith("-")
                                                      or args[i + 1][1:2].isdigit()):
                    value, skip = args[i + 1], True
                d.append(Derivation(f"serve {name}", value, EXTRA_ARGS_REASON
                                    + (f" (given as {arg})" if sep else ""), src))
            else:
                d.append(Derivation("serve ARG", arg, f"{EXTRA_ARGS_REASON} (a plain "
                                    "argument)", src))
        return args

    def serve(self, c: Context, d: list[Derivation]) -> ServeCommand:
        """The server command of a checked profile (entrypoint, arguments, option files)."""
        raise NotImplementedError

    def extra_env(self, c: Context) -> dict[str, str]:
        """Engine-specific environment of the runtime image."""
        return {}

    def extra_smoke_imports(self, c: Context) -> tuple[SmokeImport, ...]:
        """Imports the built image must pass for what requirements() adds beside the engine."""
        return self.flashinfer_smoke_imports(c)

    def _serve_parser(self, f: Facts) -> str:
        """The text of the engine's server-parser script (facts ``serve_parser``, a file of
        its folder); empty when it has none."""
        name = self.facts(f).get("serve_parser")
        return (self.folder() / str(name)).read_text(encoding="utf-8") if name else ""
