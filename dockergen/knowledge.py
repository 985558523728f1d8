"""Loading the knowledge data: facts with sources, one YAML file per component.

Each component keeps its slice of the compatibility knowledge in a YAML file beside its
module (``components/cuda.yaml``, ``components/serving/vllm.yaml``, ...); this module only
loads them and offers the version helpers every component uses. Decisions built on the
facts live in the components.

Every fact carries ``src:``, where it was read. Source tags follow
``shared/reference/engines-compat.md``:

- ``FA@<tag>:<path>``: Dao-AILab/flash-attention source at that tag
- ``VLLM-WHEEL <ver>``: the released vLLM wheel, unpacked and read (METADATA, envs.py, ...)
- ``VLLM@<commit>:<path>``: vllm-project/vllm source at that commit
- ``TORCH-MATRIX``: pytorch/pytorch RELEASE.md "Release Compatibility Matrix"
- ``CUDA-RN``: CUDA Toolkit 13.2U2 release notes (driver table, dropped archs)
- ``TRTLLM:<path>@<sha>``: NVIDIA/TensorRT-LLM file at that commit
- ``doc:<url>``: documentation page

``unverified: true`` marks a fact stated from general knowledge; rules built on it only
warn. May import: nothing of dockergen.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

COMPONENTS_DIR = Path(__file__).with_name("components")


@functools.cache
def builtin_facts(name: str) -> dict[str, Any]:
    """The shipped facts of one component: ``components/<name>.yaml`` (cached; immutable)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with (COMPONENTS_DIR / f"{name}.yaml").open(encoding="utf-8") as fh:
        data = yaml.load(fh, Loader=loader)  # noqa: S506 - safe loader
    assert isinstance(data, dict), name
    return data


def is_unverified(row: dict[str, Any], field_name: str) -> bool:
    """Whether a fact of a knowledge row is marked unverified (rules on it only warn).

    ``unverified: true`` marks the whole row; ``unverified: [field, ...]`` only those fields.
    """
    mark = row.get("unverified", False)
    return mark is True or (isinstance(mark, list) and field_name in mark)


def fact_names() -> list[str]:
    """Every component facts name, e.g. ``cuda``, ``serving/vllm``."""
    return sorted(p.relative_to(COMPONENTS_DIR).with_suffix("").as_posix()
                  for p in COMPONENTS_DIR.rglob("*.yaml"))


def has_facts(name: str) -> bool:
    """Whether ``name`` is a component facts file (``serving/vllm``, ``flash_attn``, ...)."""
    return "." not in name and (COMPONENTS_DIR / f"{name}.yaml").is_file()


# A profile's user knowledge files (``knowledge:``) add rows to the shipped tables for the
# duration of one resolve; see dockergen.loader.read_user_knowledge.
_USER: contextvars.ContextVar[Mapping[str, Mapping[str, Mapping[str, Any]]]] = (
    contextvars.ContextVar("dockergen_user_facts", default=MappingProxyType({})))


@contextlib.contextmanager
def user_facts(overlay: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> Iterator[None]:
    """Make ``{component: {table: {key: row}}}`` part of :func:`load_facts` in this block."""
    token = _USER.set(overlay)
    try:
        yield
    finally:
        _USER.reset(token)


def load_facts(name: str) -> dict[str, Any]:
    """The facts of one component, with the user's additions of the current resolve."""
    base = builtin_facts(name)
    added = _USER.get().get(name)
    if not added:
        return base
    merged = dict(base)
    for table, rows in added.items():
        current = base[table]
        merged[table] = ([*current, *rows] if isinstance(current, list)
                         else {**current, **rows})
    return merged


def newest(versions: list[str]) -> str:
    """The highest version of a list."""
    return max(versions, key=Version)


def in_range(version: str, spec: str) -> bool:
    """Whether ``version`` satisfies the PEP 440 specifier ``spec``."""
    return Version(version) in SpecifierSet(spec)
