"""The serving engines, one folder each; this registry is the only list of them.

Adding an engine: a folder here (its :class:`~dockergen.components.serving.base.ServingEngine`
subclass in ``__init__.py``, ``facts.yaml``, ``metrics.yaml``, its flag list and parser
script), one line in :data:`ENGINES`, and its name in ``dockergen.profile.Engine.name``.
May import: the engine modules of this package.
"""

from __future__ import annotations

from dockergen.components.serving import sglang, tensorrt_llm, vllm
from dockergen.components.serving.base import ServingEngine

ENGINES: dict[str, ServingEngine] = {
    e.name: e for e in (vllm.ENGINE, tensorrt_llm.ENGINE, sglang.ENGINE)}


def engine_for(name: str) -> ServingEngine:
    """The serving engine of ``engine.name``."""
    return ENGINES[name]
