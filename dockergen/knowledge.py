"""The compatibility knowledge base: facts with sources, loaded from ``data/compat.yaml``.

Only lookups live here; the decisions built on them are in :mod:`dockergen.rules` and
:mod:`dockergen.resolve`. Versions are compared with :mod:`packaging`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

DATA_FILE = Path(__file__).with_name("data") / "compat.yaml"

_CC = re.compile(r"(\d{1,2})\.(\d)")


@dataclass(frozen=True)
class Fact:
    """A value and the source it was read from."""

    value: Any
    src: str
    unverified: bool = False


@dataclass(frozen=True)
class GpuTarget:
    """One entry of ``gpu.targets`` after lookup."""

    given: str
    cc: str  # "9.0"
    name: str | None  # known GPU name, None when given as a compute capability
    family: str
    src: str

    @property
    def cc_tuple(self) -> tuple[int, int]:
        return cc_tuple(self.cc)


def cc_tuple(cc: str) -> tuple[int, int]:
    """``"8.9"`` -> ``(8, 9)``."""
    major, minor = cc.split(".")
    return int(major), int(minor)


_FAMILY_BY_MAJOR = {7: "volta/turing", 8: "ampere/ada", 9: "hopper", 10: "blackwell",
                    11: "thor", 12: "blackwell"}


class Knowledge:
    """Typed access to ``compat.yaml``."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    # --- GPUs and CUDA ---------------------------------------------------------------
    def gpu_names(self) -> list[str]:
        return sorted(self.data["gpus"])

    def gpu(self, given: str) -> GpuTarget | None:
        """Resolve a GPU name (case-insensitive) or a compute capability string."""
        key = given.strip().lower()
        entry = self.data["gpus"].get(key)
        if entry is not None:
            return GpuTarget(given, entry["cc"], key, entry["family"], entry["src"])
        m = _CC.fullmatch(key)
        if m:
            major = int(m.group(1))
            return GpuTarget(given, key, None, _FAMILY_BY_MAJOR.get(major, "unknown"),
                             "given as a compute capability")
        return None

    def gpu_mem_gib(self, name: str) -> int | None:
        entry = self.data["gpus"].get(name)
        return int(entry["mem_gib"]) if entry else None

    def cc_arch(self, cc: str) -> dict[str, Any] | None:
        entry = self.data["cuda_archs"].get(cc)
        return dict(entry) if entry is not None else None

    def cuda_versions(self) -> list[str]:
        return sorted(self.data["cuda"], key=Version)

    def cuda(self, version: str) -> dict[str, Any] | None:
        entry = self.data["cuda"].get(version)
        return dict(entry) if entry is not None else None

    def os_python(self, os_name: str) -> str | None:
        value = self.data["os_python"].get(os_name)
        return str(value) if value is not None else None

    # --- torch -----------------------------------------------------------------------
    def torch_minor(self, torch_version: str) -> dict[str, Any] | None:
        v = Version(torch_version)
        entry = self.data["torch"].get(f"{v.major}.{v.minor}")
        return dict(entry) if entry is not None else None

    # --- engines ---------------------------------------------------------------------
    def engine(self, name: str) -> dict[str, Any]:
        return dict(self.data["engines"][name])

    def engine_release(self, name: str, version: str) -> dict[str, Any] | None:
        releases = self.data["engines"][name]["releases"]
        entry = releases.get(version)
        return dict(entry) if entry is not None else None

    def engine_versions(self, name: str) -> list[str]:
        return sorted(self.data["engines"][name]["releases"], key=Version)

    def quant(self, engine: str, kind: str, value: str) -> dict[str, Any] | None:
        """``kind`` is ``"quantization"`` (weights) or ``"kv_cache"``."""
        entry = self.data["engines"][engine][kind].get(value)
        return dict(entry) if entry is not None else None

    # --- flash-attn ------------------------------------------------------------------
    @property
    def fa(self) -> dict[str, Any]:
        return dict(self.data["flash_attn"])

    @property
    def tools(self) -> dict[str, Any]:
        return dict(self.data["tools"])


def is_unverified(row: dict[str, Any], field_name: str) -> bool:
    """Whether a fact of a knowledge row is marked unverified (rules on it only warn).

    ``unverified: true`` marks the whole row; ``unverified: [field, ...]`` only those fields.
    """
    mark = row.get("unverified", False)
    return mark is True or (isinstance(mark, list) and field_name in mark)


def newest(versions: list[str]) -> str:
    """The highest version of a list."""
    return max(versions, key=Version)


def in_range(version: str, spec: str) -> bool:
    """Whether ``version`` satisfies the PEP 440 specifier ``spec``."""
    return Version(version) in SpecifierSet(spec)


@functools.lru_cache(maxsize=1)
def load_knowledge() -> Knowledge:
    """Load the shipped knowledge base (cached; it is immutable)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with DATA_FILE.open(encoding="utf-8") as fh:
        return Knowledge(yaml.load(fh, Loader=loader))  # noqa: S506 - safe loader
