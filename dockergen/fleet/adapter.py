"""The one place where the fleet features read dockergen's loader and resolved model.

Everything the fleet modules (bake, matrix, locks) need from them goes through this
adapter, so that only this file follows a change of the loader or of the model. A matrix
variant is loaded from the profile's data with one point's values set, which is why the
loader's internals are read here; each variant is then resolved by the one pipeline
(:func:`dockergen.pipeline.resolution_of`), and the fleet reads it through :func:`view`.

May import: errors, loader (its internals, on purpose), model, pipeline, profile,
yamlsource, components.image (tag placeholders).
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from dockergen.errors import Location, Problem, ProfileError
from dockergen.loader import (
    LoadedProfile,
    Overrides,
    _field_annotation,
    _load_raw,
    _strip,
    _validate,
    apply_overrides,
    profile_file,
    read_user_knowledge,
)
from dockergen.pipeline import Resolution
from dockergen.profile import Observe
from dockergen.yamlsource import FieldPath, Positions


@dataclass(frozen=True)
class RawProfile:
    """A profile file merged with its ``extends`` chain, not yet validated."""

    path: Path
    data: dict[str, Any]
    positions: Positions
    chain: tuple[str, ...]

    @property
    def display(self) -> str:
        return self.chain[0]

    def at(self, *path: str | int) -> Location:
        return self.positions.of(path)

    def key_at(self, *path: str | int) -> Location:
        return self.positions.key_of(path)


def read_raw(path: Path) -> RawProfile:
    """Read a profile and its parents (mappings merged), keeping every value's position.

    ``path`` may also name a shipped profile (``h100-fp8``), as everywhere else.
    """
    resolved = profile_file(Path(path))
    data, pos, chain = _load_raw(resolved, (resolved,))
    return RawProfile(resolved, data, pos, chain)


def check_abstract(raw: RawProfile, overrides: Overrides) -> bool:
    """Check an abstract profile as far as it goes; False if the profile is not abstract.

    Its fields are checked for shape, type, unknown keys and secrets; the compatibility
    rules need a whole profile and run on the profiles that extend it.
    """
    if raw.data.get("abstract") is not True:
        return False
    data, pos = copy.deepcopy(raw.data), copy_positions(raw.positions)
    data.pop("abstract", None)
    _validate(apply_overrides(data, pos, overrides), pos, partial=True)
    return True


def is_matrix(raw: RawProfile, overrides: Overrides) -> bool:
    """Whether the profile, after ``--set`` overrides, declares a matrix."""
    data = apply_overrides(copy.deepcopy(raw.data), copy_positions(raw.positions), overrides)
    return bool(data.get("matrix"))


def is_field(path: FieldPath) -> bool:
    """Whether a dotted profile field exists in the model."""
    return _field_annotation(path) is not None


def expects_mapping(path: FieldPath) -> bool:
    """Whether a profile field holds a section (a mapping merged like ``extends`` does)."""
    annotation = _strip(_field_annotation(path))
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def copy_positions(pos: Positions) -> Positions:
    return copy.deepcopy(pos)


def move_positions(pos: Positions, source: FieldPath, target: FieldPath) -> None:
    """Point the positions of ``target``'s subtree at where ``source``'s subtree was written.

    A matrix value written under ``matrix.axes.X[i]`` becomes field ``X`` of a variant;
    problems about it must name the line of that value.
    """
    n = len(source)
    for table in (pos._values, pos._keys):  # noqa: SLF001 - see module doc
        for k in [k for k in list(table) if k[:n] == source]:
            table[target + k[n:]] = table[k]
    for k in [k for k in list(pos._raw) if k[:n] == source]:  # noqa: SLF001
        pos._raw[target + k[n:]] = pos._raw[k]  # noqa: SLF001


def load_data(raw: RawProfile, data: dict[str, Any], pos: Positions,
              overrides: Overrides) -> LoadedProfile:
    """Validate profile data (``--set`` overrides applied first) like ``load_profile``."""
    if data.get("abstract") is True:  # the same refusal as loader.load_profile
        raise ProfileError([Problem(pos.of(("abstract",)), "abstract",
                                    "this profile only provides defaults for others",
                                    f"render a profile that says `extends: {raw.path.stem}`")])
    data.pop("abstract", None)
    data = apply_overrides(data, pos, overrides)
    # the loader's own validation: the secret scan first (a type error never hides it),
    # then the model; and the profile's user knowledge files
    profile = _validate(data, pos)
    assert profile is not None
    facts = read_user_knowledge(profile.knowledge, raw.path.parent, pos)
    return LoadedProfile(profile, pos, raw.path, raw.display, raw.chain, overrides, facts, data)


@dataclass(frozen=True)
class VariantView:
    """What a bake target and a base-image lock need to know about one resolved profile."""

    name: str
    image_name: str
    release_tags: tuple[str, ...]  # full references of the profile's tag templates
    profile_hash: str
    engine: str
    engine_version: str
    description: str
    user_labels: dict[str, str]
    cache_ref_template: str | None
    cache_ref_at: Location
    attest: tuple[str, ...]
    devel_image: str
    runtime_image: str
    tag_values: dict[str, str]
    warnings: tuple[Problem, ...]
    hf_config: bool = False  # serving.hf_config names a model: `validate` checks capacity
    observe: Observe | None = None  # the observe: section: `validate` runs observe's checks
    # what the content-hash tag is computed from (rendering it is not free: only a bake
    # file asks for `tags`, `validate` does not)
    resolution: Resolution | None = field(default=None, compare=False, repr=False)

    @functools.cached_property
    def tags(self) -> tuple[str, ...]:
        """The release tags, then the content-hash ``dg-`` tag `dockergen build` gives the
        same context (dockergen/buildid.py)."""
        assert self.resolution is not None
        return (*self.release_tags, f"{self.image_name}:{self.resolution.content_tag}")


def view(res: Resolution) -> VariantView:
    """The fleet view of a resolved profile (the only reader of the resolved model)."""
    from dockergen.components.image import tag_values

    resolved = res.resolved
    p = resolved.profile
    return VariantView(
        name=p.name, image_name=p.image.name,
        release_tags=tuple(f"{p.image.name}:{t}" for t in resolved.tags),
        profile_hash=resolved.profile_hash, engine=resolved.engine.requirement,
        engine_version=p.engine.version, description=p.description,
        user_labels=dict(p.image.labels), cache_ref_template=p.image.cache_ref,
        cache_ref_at=res.at("image", "cache_ref"), attest=tuple(p.image.attest),
        devel_image=resolved.base.cuda.image, runtime_image=resolved.runtime.image,
        tag_values=tag_values(p), warnings=tuple(resolved.warnings),
        hf_config=bool(getattr(p.serving, "hf_config", None)), observe=p.observe,
        resolution=res)
