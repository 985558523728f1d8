"""Loading the knowledge data: facts with sources, one YAML file per component.

Each component keeps its slice of the compatibility knowledge in a YAML file beside its
module (``parts/cuda.yaml``, ``parts/engines/vllm/facts.yaml``, ...); this module only
loads them and offers the version helpers every component uses. Decisions built on the
facts live in the components.

Every fact carries ``src:``, where it was read. Source tags follow
``shared/reference/engines-compat.md``:

- ``FA@<tag>:<path>``: Dao-AILab/flash-attention source at that tag
- ``VLLM-WHEEL <ver>``: the released vLLM wheel, unpacked and read (METADATA, envs.py, ...)
- ``SGLANG-WHEEL <ver>``: the released SGLang wheel, unpacked and read
- ``VLLM@<commit>:<path>``: vllm-project/vllm source at that commit
- ``TORCH-MATRIX``: pytorch/pytorch RELEASE.md "Release Compatibility Matrix"
- ``CUDA-RN``: CUDA Toolkit 13.2U2 release notes (driver table, dropped archs)
- ``TRTLLM:<path>@<sha>``: NVIDIA/TensorRT-LLM file at that commit
- ``doc:<url>``: documentation page
- ``PTXAS <ver>``: ``ptxas --help`` of the nvidia-cuda-nvcc-cu12 <ver> wheel on PyPI (the
  SASS archs that CUDA release can compile for)

``unverified: true`` marks a fact stated from general knowledge; rules built on it only
warn.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, NoReturn

import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

COMPONENTS_DIR = Path(__file__).resolve().parent.parent / "parts"


def facts_path(name: str) -> Path:
    """The facts file of a component: ``parts/<name>.yaml`` beside its module, or
    ``parts/<name>/facts.yaml`` for a component that is a folder (a serving engine)."""
    rel = _folder_of(name)
    folder = COMPONENTS_DIR / rel / "facts.yaml"
    return folder if folder.is_file() else COMPONENTS_DIR / f"{rel}.yaml"


# a serving engine's facts keep the name users write in knowledge files ("serving/vllm");
# its folder is parts/engines/vllm
_ENGINES = ("serving/", "engines/")


def _folder_of(name: str) -> str:
    return _ENGINES[1] + name[len(_ENGINES[0]):] if name.startswith(_ENGINES[0]) else name


def _name_of(folder: str) -> str:
    return _ENGINES[0] + folder[len(_ENGINES[1]):] if folder.startswith(_ENGINES[1]) else folder


@functools.cache
def builtin_facts(name: str) -> dict[str, Any]:
    """The shipped facts of one component (:func:`facts_path`; cached; immutable)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    path = facts_path(name)
    with path.open(encoding="utf-8") as fh:
        data = yaml.load(fh, Loader=loader)  # noqa: S506 - safe loader
    assert isinstance(data, dict), name
    for table, value in list(data.items()):
        if isinstance(value, dict) and set(value) == {"from_file"}:
            data[table] = _flag_rows(path.with_name(str(value["from_file"])))
    return data


def _flag_rows(path: Path) -> dict[str, Any]:
    """The rows of a table kept in a file of its own: a tool's JSON output, hundreds of
    option strings per release, too long to read in the YAML. Its ``releases``
    (``{release: [options]}``) and ``src`` (``{release: where}``; else its ``about``) become
    ``{release: {"flags": [options], "src": where}}``, rows like any other table's."""
    data = json.loads(path.read_text(encoding="utf-8"))
    where = data.get("src", {})
    return {version: {"flags": list(flags), "src": where.get(version, data["about"])}
            for version, flags in data["releases"].items()}


def is_unverified(row: dict[str, Any], field_name: str) -> bool:
    """Whether a fact of a knowledge row is marked unverified (rules on it only warn).

    ``unverified: true`` marks the whole row; ``unverified: [field, ...]`` only those fields.
    """
    mark = row.get("unverified", False)
    return mark is True or (isinstance(mark, list) and field_name in mark)


def fact_names() -> list[str]:
    """Every component facts name, e.g. ``cuda``, ``serving/vllm``."""
    return sorted(_name_of(p.parent.relative_to(COMPONENTS_DIR).as_posix())
                  if p.name == "facts.yaml"
                  else _name_of(p.relative_to(COMPONENTS_DIR).with_suffix("").as_posix())
                  for p in COMPONENTS_DIR.rglob("*.yaml")
                  if p.name == "facts.yaml" or not (p.parent / "facts.yaml").is_file())


def has_facts(name: str) -> bool:
    """Whether ``name`` is a component facts file (``serving/vllm``, ``flash_attn``, ...)."""
    return "." not in name and facts_path(name).is_file()


# The tables a user knowledge file may add rows to: rows of facts keyed by a release (of the
# component, or of the engine for vLLM's FlashInfer pins, or of the kernel package for the
# engines' `kernels`: their wheel members come from the shipped rows, their codes have a shape
# of their own; the engines' `serve_flags`, option strings that only check a command and
# never reach it) or by a quantization method. Every other table stays closed because its
# values reach the Dockerfile or the build without a shape of their own to check them
# against: apt package names (tensorrt_llm.runtime_apt), pinned tool and build-dependency
# versions (python.tools, flash_attn.build_deps), URLs and environment names
# (python.uv_python_downloads), paths and globs (*.arch_scoped_libraries), server flags
# that rewrite a command (vllm.removed_flags, sglang.flag_aliases), GPU
# names and compute capabilities that become arch lists (cuda.gpus, cuda.cuda_archs,
# flash_attn.arch_*), and single values that are not tables at all. Each facts file lists
# its own (``user_tables:``, e.g. a serving engine's in its folder); the loader checks
# against them and builds its fixes from them (docs/knowledge.md).
USER_TABLES = "user_tables"


@functools.cache
def addable() -> Mapping[str, tuple[str, ...]]:
    """Every component's tables a user knowledge file may add rows to: facts name ->
    tables (each facts file's ``user_tables``)."""
    return MappingProxyType({name: tuple(builtin_facts(name).get(USER_TABLES) or ())
                             for name in fact_names() if builtin_facts(name).get(USER_TABLES)})

# A user knowledge overlay: ``{facts name: {table: {key: row}}}``, the rows a profile's
# ``knowledge:`` files add (dockergen.input.loader.read_user_knowledge checks them).
Overlay = Mapping[str, Mapping[str, Mapping[Any, Any]]]
Rows = Mapping[str, Any]
_SERVING = "serving/"


def _refuse(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError("knowledge facts are read-only: copy them (dict(...)) to change them")


class FrozenDict(dict[Any, Any]):
    """A read-only mapping of facts that is still a ``dict`` (JSON, ``isinstance`` and its
    repr are those of the loaded YAML); a deep copy is a plain, writable ``dict``."""

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse
    __ior__ = _refuse

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return {k: copy.deepcopy(v, memo) for k, v in self.items()}

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)


class FrozenList(list[Any]):
    """A read-only list of facts (see :class:`FrozenDict`)."""

    __setitem__ = __delitem__ = append = extend = insert = pop = remove = _refuse
    clear = sort = reverse = __iadd__ = __imul__ = _refuse

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(v, memo) for v in self]

    def __copy__(self) -> list[Any]:
        return list(self)


def _frozen(value: Any) -> Any:
    """``value`` with every mapping and list in it read-only."""
    if isinstance(value, dict):
        return FrozenDict({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return FrozenList(_frozen(v) for v in value)
    return value


@dataclass(frozen=True)
class Facts:
    """Every component's facts for one resolution: the shipped files with a profile's user
    knowledge applied once (:func:`facts`). Rows are read-only; one value is handed to every
    rule and derivation (``Context.facts``) and to every other reader (outdated, upgrade,
    smoke, maint), so that all of them judge a release on the same view."""

    cuda: Rows
    python: Rows
    torch: Rows
    flash_attn: Rows
    engines: Mapping[str, Rows]  # by the engine's folder: vllm, sglang, tensorrt_llm
    overlay: Overlay  # the user's rows, as given (read-only)

    def of(self, name: str) -> Rows:
        """The facts of one facts name (``cuda``, ``serving/vllm``, ...)."""
        if name.startswith(_SERVING):
            return self.engines[name.removeprefix(_SERVING)]
        rows: Rows = getattr(self, name)
        return rows

    def engine(self, name: str) -> Rows:
        """The facts of a serving engine by its ``engine.name`` (``tensorrt-llm``, ...)."""
        return self.engines[name.replace("-", "_")]


@functools.cache
def _shipped(name: str) -> Rows:
    """The shipped facts of one component, read-only (cached)."""
    frozen: Rows = _frozen(builtin_facts(name))
    return frozen


def _with_overlay(name: str, added: Mapping[str, Mapping[Any, Any]]) -> Rows:
    """The shipped facts of ``name`` with the user's rows ``added`` (``{table: {key: row}}``,
    only :func:`addable` tables): a new key adds its row; a key the shipped table has only
    adds releases to its ``min_cc`` map (what the loader lets through)."""
    base = builtin_facts(name)
    merged = dict(_shipped(name))
    for table, rows in added.items():
        table_rows = dict(base[table])
        for key, row in rows.items():
            shipped = table_rows.get(key)
            table_rows[key] = row if shipped is None else {
                **shipped, "min_cc": {**shipped["min_cc"], **row["min_cc"]},
                "src": f"{shipped['src']}; {row['src']}"}
        merged[table] = _frozen(table_rows)
    return FrozenDict(merged)


def facts(overlay: Overlay | None = None) -> Facts:
    """The facts of one resolution: the shipped ones with ``overlay`` (a profile's
    ``LoadedProfile.user_facts``) applied; the one constructor every reader uses."""
    if not overlay:
        return _shipped_facts()
    rows = {name: _with_overlay(name, overlay[name]) if overlay.get(name) else _shipped(name)
            for name in fact_names()}
    return _make(rows, _frozen({k: dict(v) for k, v in overlay.items()}))


@functools.cache
def _shipped_facts() -> Facts:
    return _make({name: _shipped(name) for name in fact_names()}, FrozenDict())


def _make(rows: Mapping[str, Rows], overlay: Overlay) -> Facts:
    engines = {n.removeprefix(_SERVING): r for n, r in rows.items() if n.startswith(_SERVING)}
    return Facts(rows["cuda"], rows["python"], rows["torch"], rows["flash_attn"],
                 MappingProxyType(engines), overlay)


def newest(versions: list[str]) -> str:
    """The highest version of a list."""
    return max(versions, key=Version)


def in_range(version: str, spec: str) -> bool:
    """Whether ``version`` satisfies the PEP 440 specifier ``spec``."""
    return Version(version) in SpecifierSet(spec)
