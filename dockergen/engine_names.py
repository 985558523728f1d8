"""The one list of serving engines: each ``engine.name`` and its folder.

An engine is a folder under ``dockergen/components/serving/`` (its class, facts, flag list,
metric names, run facts and capacity rule) and one line here. The profile model takes its
``engine.name`` choices from this list, and the engine registry
(:mod:`dockergen.components.serving`) imports each folder named here; the model is imported
before any engine (the engines build on it), which is why the list is a leaf of its own.
May import: nothing of dockergen (a leaf).
"""

from __future__ import annotations

# engine.name -> its folder (a package of dockergen/components/serving/)
FOLDERS: dict[str, str] = {
    "vllm": "vllm",
    "tensorrt-llm": "tensorrt_llm",
    "sglang": "sglang",
}
