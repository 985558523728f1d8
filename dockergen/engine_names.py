"""The one list of serving engines: each ``engine.name`` and its folder.

An engine is a folder under ``dockergen/parts/engines/`` (its class, facts, flag list,
metric names, run facts and capacity rule) and one line here. The profile model takes its
``engine.name`` choices from this list, and the engine registry
(:mod:`dockergen.parts.engines`) imports each folder named here; the model is imported
before any engine (the engines build on it), which is why the list is a leaf of its own.
"""

from __future__ import annotations

# engine.name -> its folder (a package of dockergen/parts/engines/)
FOLDERS: dict[str, str] = {
    "vllm": "vllm",
    "tensorrt-llm": "tensorrt_llm",
    "sglang": "sglang",
}
