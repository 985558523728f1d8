"""Profile matrices: ``matrix.axes`` expanded into named, validated variants.

A point of the matrix is one value per axis (cartesian product, in the order written).
Each point becomes a variant profile named ``<name>-<label>-<label>...`` whose axis fields
take the point's values (mappings merge into the section, as ``extends`` does; lists and
scalars replace). Every variant is validated and resolved exactly like a profile file;
a point that fails is *dropped* with the very problems ``validate`` reports, and
``--strict`` turns a dropped point into an error.
"""

from __future__ import annotations

import copy
import difflib
import itertools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from dockergen.errors import Location, Problem, ProfileError, Severity
from dockergen.input.loader import (
    Overrides,
    apply_overrides,
    problems_from_validation,
)
from dockergen.input.profile import Matrix
from dockergen.outputs.fleet import adapter
from dockergen.pipeline import Resolution, resolution_of
from dockergen.resolve.model import Mode

# Fields an axis may not vary: the variant name is derived, the rest is file structure.
_FIXED = {"name", "extends", "abstract", "matrix"}
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


@dataclass(frozen=True)
class AxisValue:
    """One value of one axis, with the label used in variant names."""

    axis: str
    label: str
    value: Any
    source: tuple[str | int, ...]  # where it is written, for problem positions


@dataclass(frozen=True)
class Point:
    """One combination of axis values and the variant name it gets."""

    name: str
    values: tuple[AxisValue, ...]

    def describe(self) -> str:
        return ", ".join(f"{v.axis}={v.label}" for v in self.values)


@dataclass
class Variant:
    """A valid point: loaded and resolved like any profile."""

    point: Point
    resolution: Resolution


@dataclass
class Dropped:
    """An invalid point and the problems that invalidate it."""

    point: Point
    problems: list[Problem]

    def lines(self, warnings: bool = True) -> list[str]:
        return [f"matrix point {self.point.name} ({self.point.describe()}) dropped:"] + [
            f"  {p}" for p in self.problems if warnings or p.severity is not Severity.WARNING]


@dataclass
class Expansion:
    """Every point of a profile's matrix, sorted into variants, dropped and excluded."""

    name: str  # the matrix profile's own name: the bake group
    variants: list[Variant] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    excluded: list[Point] = field(default_factory=list)


class MatrixError(ProfileError):
    """``--strict``: at least one matrix point is invalid."""

    def __init__(self, dropped: list[Dropped], others: list[Problem] | None = None) -> None:
        self.dropped = dropped
        self.others = sorted(others or [], key=Problem.sort_key)
        super().__init__(self.others + [p for d in dropped for p in d.problems])

    def lines(self, warnings: bool = True) -> list[str]:
        return [str(p) for p in self.others
                if warnings or p.severity is not Severity.WARNING] + [
            line for d in self.dropped for line in d.lines(warnings)]


class _MatrixOnly(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    matrix: Matrix


def slug(value: Any) -> str:
    """The name part of an axis value: lowercase letters and digits joined by '-'."""
    if isinstance(value, dict):
        parts = [slug(v) for v in value.values()]
    elif isinstance(value, (list, tuple)):
        parts = [slug(v) for v in value]
    elif isinstance(value, bool):
        parts = ["true" if value else "false"]
    else:
        parts = [re.sub(r"[^a-z0-9]+", "-", str(value).lower()).strip("-")]
    return "-".join(p for p in parts if p)


def _axes(raw: adapter.RawProfile, matrix: dict[str, Any]) -> tuple[
        list[list[AxisValue]], list[Problem]]:
    problems: list[Problem] = []
    axes: list[list[AxisValue]] = []
    for axis, values in matrix["axes"].items():
        where = ("matrix", "axes", axis)
        parts = tuple(axis.split("."))
        if axis in _FIXED or not adapter.is_field(parts):
            known = ["gpu.targets", "quantization.weights", "quantization.kv_cache",
                     "engine", "engine.version", "cuda.version", "python", "serving.model"]
            guess = difflib.get_close_matches(axis, known, n=1, cutoff=0.6)
            problems.append(Problem(
                raw.key_at(*where), f"matrix.axes.{axis}",
                "the variant name is derived from the axes" if axis in _FIXED else
                f"no profile field {axis!r}" + (f" (did you mean {guess[0]!r}?)" if guess
                                                 else ""),
                "use a dotted profile field such as quantization.weights"))
            continue
        if not values:
            problems.append(Problem(raw.at(*where), f"matrix.axes.{axis}",
                                    "an axis needs at least one value",
                                    "list the values, e.g. [bf16, fp8]"))
            continue
        items = (list(values.items()) if isinstance(values, dict)
                 else [(slug(v), v) for v in values])
        keys = list(values) if isinstance(values, dict) else list(range(len(values)))
        seen: dict[str, int] = {}
        row = []
        for key, (label, value) in zip(keys, items, strict=True):
            loc = raw.at(*where, key)
            if not label:
                problems.append(Problem(loc, f"matrix.axes.{axis}",
                                        f"{value!r} gives no name for the variant",
                                        "name the values: write the axis as a mapping "
                                        "NAME: VALUE"))
            elif label in seen:
                problems.append(Problem(loc, f"matrix.axes.{axis}",
                                        f"two values are both named {label!r}",
                                        "write the axis as a mapping NAME: VALUE with "
                                        "distinct names"))
            seen[label] = 1
            row.append(AxisValue(axis, label, value, (*where, key)))
        axes.append(row)
    return axes, problems


def _matches(point: Point, entry: dict[str, Any]) -> bool:
    by_axis = {v.axis: v for v in point.values}
    return all(k in by_axis and (by_axis[k].value == want or by_axis[k].label == want)
               for k, want in entry.items())


def _set(data: dict[str, Any], parts: tuple[str, ...], value: Any, merge: bool) -> None:
    node = data
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    old = node.get(parts[-1])
    if merge and isinstance(old, dict) and isinstance(value, dict):
        node[parts[-1]] = {**old, **copy.deepcopy(value)}
    else:
        node[parts[-1]] = copy.deepcopy(value)


def has_matrix(path: Path) -> bool:
    """Whether a profile file (or a parent) declares ``matrix:``."""
    return "matrix" in adapter.read_raw(path).data


# The most points a matrix may have before exclusions: far above any real fleet (the
# shipped one has 6), low enough that a typo in an axis cannot run for minutes.
MAX_POINTS = 1024


def expand(path: Path | adapter.RawProfile, overrides: Overrides = (),
           mode: Mode = "buildkit", pin: bool = True) -> Expansion:
    """Expand the matrix of ``path`` (or of a profile already read) into validated
    variants (``--set`` applies to all).

    ``pin=False`` resolves the variants without the base-image lock (see dockergen/input/pins.py).
    """
    raw = path if isinstance(path, adapter.RawProfile) else adapter.read_raw(path)
    data, pos = copy.deepcopy(raw.data), raw.positions.copy()
    data = apply_overrides(data, pos, overrides)
    try:
        matrix = _MatrixOnly.model_validate({"matrix": data.get("matrix")}).matrix
    except ValidationError as exc:
        raise ProfileError(problems_from_validation(exc, pos)) from None
    axes, problems = _axes(raw, matrix.model_dump())
    name = data.get("name")
    base_name = name if isinstance(name, str) else ""
    problems += _exclude_problems(raw, axes, matrix.exclude)
    _check_point_count(raw, axes)
    points, bad_names = _named_points(raw, axes, base_name)
    problems += bad_names
    if problems:
        raise ProfileError(problems)
    out = Expansion(base_name)
    for point in points:
        if any(_matches(point, e) for e in matrix.exclude):
            out.excluded.append(point)
            continue
        p_data, p_pos = copy.deepcopy(data), pos.copy()
        for v in point.values:
            parts = tuple(v.axis.split("."))
            p_pos.drop(parts)
            p_pos.move(v.source, parts)
            _set(p_data, parts, v.value, adapter.expects_mapping(parts))
        p_data.pop("matrix", None)
        p_pos.drop(("matrix",))
        p_data["name"] = point.name
        try:
            loaded = adapter.load_raw(raw.with_data(p_data, p_pos))
            res = resolution_of(loaded, mode, pin=pin)
        except ProfileError as exc:
            out.dropped.append(Dropped(point, exc.problems))
            continue
        out.variants.append(Variant(point, res))
    if not out.variants:
        first = out.dropped[0].problems if out.dropped else []
        raise ProfileError(first + [Problem(
            Location(raw.display), "matrix", "every point of the matrix is invalid or "
            "excluded", "fix the problems above or widen the axes")])
    return out


def _exclude_problems(raw: adapter.RawProfile, axes: list[list[AxisValue]],
                      exclude: tuple[dict[str, Any], ...]) -> list[Problem]:
    """Each ``matrix.exclude`` key that names no axis, or a value no axis has."""
    problems: list[Problem] = []
    for i, entry in enumerate(exclude):
        for key, want in entry.items():
            row = next((r for r in axes if r and r[0].axis == key), None)
            if row is None or not any(v.value == want or v.label == want for v in row):
                problems.append(Problem(
                    raw.at("matrix", "exclude", i, key), f"matrix.exclude[{i}].{key}",
                    f"matches no value of the axis {key!r}" if row else
                    f"{key!r} is not an axis of this matrix",
                    "use an axis name and one of its values or value names"))
    return problems


def _check_point_count(raw: adapter.RawProfile, axes: list[list[AxisValue]]) -> None:
    """Raise when the axes multiply to more than :data:`MAX_POINTS` points."""
    count = math.prod(len(row) for row in axes)
    if count > MAX_POINTS:  # each point is validated and rendered: ~5 ms, minutes at 10^5
        raise ProfileError([Problem(raw.at("matrix", "axes"), "matrix.axes",
                                    f"{count} points (the product of the axes); at most "
                                    f"{MAX_POINTS}", "split the fleet into several matrix "
                                    "profiles, or give the axes fewer values")])


def _named_points(raw: adapter.RawProfile, axes: list[list[AxisValue]], base_name: str
                  ) -> tuple[list[Point], list[Problem]]:
    """Every point of the axes with its variant name, and a problem for each name that is
    not a valid profile name."""
    problems: list[Problem] = []
    points = []
    for combo in itertools.product(*axes):
        name = "-".join([base_name, *(v.label for v in combo)])
        point = Point(name, tuple(combo))
        if not _NAME.fullmatch(name):
            problems.append(Problem(raw.at("matrix", "axes"), "matrix",
                                    f"variant name {name!r} is not a valid profile name "
                                    "(lowercase letters, digits, '-', at most 63)",
                                    "name the axis values with a mapping NAME: VALUE"))
        points.append(point)
    return points, problems
