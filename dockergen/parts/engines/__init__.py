"""The serving engines, one folder each, registered from the one list of them.

Adding an engine: a folder here (its :class:`~dockergen.parts.engines.base.ServingEngine`
subclass in ``__init__.py`` as ``ENGINE``, ``facts.yaml``, ``metrics.yaml``, its flag list and
parser script) and one line in :data:`dockergen.engine_names.FOLDERS`, which also gives the
profile's ``engine.name`` its choices.
"""

from __future__ import annotations

import importlib

from dockergen.engine_names import FOLDERS
from dockergen.parts.engines.base import ServingEngine


def _registered() -> dict[str, ServingEngine]:
    engines: dict[str, ServingEngine] = {}
    for name, folder in FOLDERS.items():
        engine = importlib.import_module(f"{__name__}.{folder}").ENGINE
        if not isinstance(engine, ServingEngine) or engine.name != name:
            raise TypeError(f"{__name__}.{folder}.ENGINE is not the ServingEngine {name!r}")
        engines[name] = engine
    return engines


# engine.name -> its engine, in the list's order
ENGINES: dict[str, ServingEngine] = _registered()


def engine_for(name: str) -> ServingEngine:
    """The serving engine of ``engine.name``."""
    return ENGINES[name]
