"""A serving engine's identity and facts: its names, its folder, its knowledge rows.

:class:`EngineIdentity` holds the class attributes each engine sets and the readers of its
facts file (releases, quantization methods, server flag lists, kernel code per release).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from packaging.version import Version

from dockergen.knowledge import kernels
from dockergen.knowledge.facts import Facts, is_unverified
from dockergen.parts.engines.run import ContextLimit, EngineRun, ModelContext

OPTIONS_DIR = "/etc/dockergen"  # where engine option files from the context are copied


class EngineIdentity:
    """An engine's names and class attributes, and the readers of its facts."""


    name: ClassVar[str]  # engine.name in profiles
    facts_file: ClassVar[str]  # "serving/<module>"
    module: ClassVar[str]  # the Python module the smoke test imports
    imports_need_gpu: ClassVar[bool] = False  # import loads libcuda (no GPU: check install)
    health_path: ClassVar[str] = "/health"
    # how the server is probed and which folders it writes at run time (deploy)
    run: ClassVar[EngineRun]
    # Why the engine does (or does not) want a FlashAttention-2 build; shown beside a
    # valid flash-attn build as a warning, None when there is nothing to say.
    flash_attn_note: ClassVar[str | None] = None
    # Packages a release row pins in lockstep with the engine (row field -> package), read
    # from a new release's METADATA by `dockergen upgrade`
    lockstep_pins: ClassVar[dict[str, str]] = {}
    # Why the engine serves without a FlashAttention-2 build (None: it may need one)
    flash_attn_unneeded: ClassVar[str | None] = None

    def folder(self) -> Path:
        """The engine's folder: its code, facts, flag list, metric names and scripts."""
        return Path(inspect.getfile(type(self))).parent

    def facts(self, f: Facts) -> Mapping[str, Any]:
        """This engine's facts in the knowledge ``f`` of one resolution."""
        return f.of(self.facts_file)

    def probe_path(self, f: Facts) -> str:
        """The server's health endpoint: the image's HEALTHCHECK and the run
        configurations' probes ask it (facts ``health_path``, else the class's)."""
        return str(self.facts(f).get("health_path", self.health_path))

    def release(self, f: Facts, version: str) -> dict[str, Any] | None:
        entry = self.facts(f)["releases"].get(version)
        return dict(entry) if entry is not None else None

    def versions(self, f: Facts) -> list[str]:
        return sorted(self.facts(f)["releases"], key=Version)

    def quant(self, f: Facts, kind: str, value: str) -> dict[str, Any] | None:
        """``kind`` is ``"quantization"`` (weights) or ``"kv_cache"``."""
        entry = self.facts(f)[kind].get(value)
        return dict(entry) if entry is not None else None

    def flag_list(self, f: Facts, version: str) -> frozenset[str] | None:
        """Every option string the release's server accepts: its ``serve_flags`` row
        (extracted from its wheel: ``vllm/flags.json``, ``sglang/flags.json``; or a user
        knowledge file's, e.g. written by ``dockergen upgrade``); None: not read, or an
        engine that keeps no flag lists (TensorRT-LLM)."""
        row = self.facts(f).get("serve_flags", {}).get(version)
        return frozenset(row["flags"]) if row is not None else None

    def flag_source(self, f: Facts, version: str) -> str:
        """Where the release's flag list was read (its row's ``src``)."""
        return str(self.facts(f)["serve_flags"][version]["src"])

    # the wheel members :meth:`read_serve_flags` reads (none: the engine's are not read)
    flag_members: ClassVar[tuple[str, ...]] = ()

    def read_serve_flags(self, members: Mapping[str, bytes], shown: str) -> list[str]:
        """Every option string of a release's server, read from its wheel's ``members``
        (those of :attr:`flag_members` it holds; ``shown`` names the wheel in errors), for a
        release dockergen does not know. Raises ValueError when they cannot be read."""
        raise ValueError(f"dockergen does not read {self.name}'s from its wheel")

    # the wheel members :meth:`read_floors` reads (none: the engine's are not read)
    floor_members: ClassVar[tuple[str, ...]] = ()

    def read_floors(self, members: Mapping[str, bytes], shown: str) -> dict[str, str]:
        """Each quantization method's minimum compute capability in a release, read from its
        wheel's ``members`` (those of :attr:`floor_members` it holds), like
        :meth:`read_serve_flags`. Raises ValueError when they cannot be read."""
        raise ValueError(f"dockergen does not read {self.name}'s from its wheel")

    def floor_of(self, f: Facts, method: str, release: str) -> str | None:
        """The minimum compute capability of a weight quantization method on a release
        (None: none was read for that release)."""
        return min_cc(self.facts(f)["quantization"][method], release)[0]

    # server flags the profile derives -> the field that owns them (each engine's serve())
    derived_flags: ClassVar[dict[str, str]] = {}

    def flag_name(self, arg: str) -> str | None:
        """The flag an ``extra_args`` item sets (``--a-b=1`` -> ``--a-b``), or None."""
        return arg.split("=", 1)[0] if arg.startswith("-") and not arg[1:2].isdigit() else None

    def kernel_version(self, f: Facts, release: str, row: Mapping[str, Any] | None = None
                       ) -> str | None:
        """The version of the package holding the release's compiled kernels: the engine's
        own, or the one its release row (``row``, else the facts') pins (``kernel:
        NAME==VERSION``)."""
        facts = self.facts(f)
        if facts["kernel_libraries"]["package"] == facts["package"]:
            return release
        pin = (row if row is not None else facts["releases"].get(release) or {}).get("kernel")
        return str(pin).split("==", 1)[1] if pin else None

    def kernel_code(self, f: Facts, release: str, cc: str, machine: str = "x86_64"
                    ) -> dict[str, list[str]] | None:
        """The libraries a GPU of compute capability ``cc`` loads on ``release`` and the code
        each carries in the wheel for ``machine`` (its ``kernels`` table: x86_64's
        ``kernels``, aarch64's ``kernels_aarch64``), or None when nothing was read for it."""
        facts = self.facts(f)
        version = self.kernel_version(f, release)
        table = facts.get(kernels.TABLE_OF_MACHINE[machine], {})
        row = table.get(version) if version else None
        if row is None:
            return None
        select = facts["kernel_libraries"]["select"]
        members = select.get(cc, select["*"])
        return {m: list(row["code"][m]) for m in members if m in row["code"]}

    def kv_budget(self, mem: int, weights: int, overhead: int, utilization: float | None
                  ) -> tuple[int, float, str]:
        """How much of one GPU (``mem`` bytes, holding ``weights`` bytes of weights and an
        estimated ``overhead`` besides) the engine gives its KV cache, with
        ``serving.gpu_memory_utilization`` (None: the engine's default): (bytes, the
        fraction used, the rule in words)."""
        raise NotImplementedError(f"{self.name}: no KV-cache budget rule")

    def context_limit(self, model: ModelContext, env: Mapping[str, str]
                      ) -> ContextLimit | None:
        """The longest max_model_len the engine starts with for ``model`` (with the
        profile's ``serving.env``), as its start-up check derives it; None where
        dockergen has not read the engine's rule (plan then bounds lengths by
        max_position_embeddings and refuses none)."""
        return None


def min_cc(row: Mapping[str, Any], release: str) -> tuple[str | None, bool]:
    """(minimum compute capability of a quantization row for an engine release, unverified).

    ``min_cc`` is one value, or a map of inclusive release ranges (``"0.9.1..0.12.0"``, or
    one release) to the value read from those releases: the floor moved between releases
    (vLLM's fp8 needed 8.0 up to 0.12.0 and 7.5 from 0.14.1). A release outside every range
    has no floor (None): nothing was read from it, and guessing the neighbour's would hide
    exactly the change this shape exists for.
    """
    value = row["min_cc"]
    unverified = is_unverified(dict(row), "min_cc")
    if isinstance(value, str):
        return value, unverified
    version = Version(release)
    for span, cc in value.items():
        first, _, last = span.partition("..")
        if Version(first) <= version <= Version(last or first):
            return str(cc), unverified
    return None, unverified
