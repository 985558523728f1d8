"""The one place where the fleet features read dockergen's loader and resolved model.

Everything the fleet modules (bake, matrix, locks) need from them goes through this
adapter, so that only this file follows a change of the loader or of the model. A profile
is read once (:class:`RawProfile`); a matrix variant is that document with one point's
values set, validated by the loader's own :func:`load_raw` like any profile, then resolved
by the one pipeline (:func:`dockergen.pipeline.resolution_of`); the fleet reads each
resolution through :func:`view`.

May import: errors, loader, model, pipeline, profile, yamlsource, components.image (tag
placeholders).
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field

from dockergen.errors import Location, Problem
from dockergen.loader import (
    Overrides,
    RawProfile,
    apply_overrides,
    check_abstract,
    expects_mapping,
    is_field,
    load_raw,
    read_raw,
)
from dockergen.pipeline import Resolution
from dockergen.profile import Observe

# what the fleet modules take from the loader (they import nothing of it themselves)
__all__ = ["RawProfile", "VariantView", "check_abstract", "expects_mapping", "is_field",
           "is_matrix", "load_raw", "read_raw", "view"]


def is_matrix(raw: RawProfile, overrides: Overrides) -> bool:
    """Whether the profile, after ``--set`` overrides, declares a matrix."""
    data = apply_overrides(copy.deepcopy(raw.data), raw.positions.copy(), overrides)
    return bool(data.get("matrix"))


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
    compression: str  # image.compression: the layers the image output writes
    platform: str  # build.platform: the machine the image runs on
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
        compression=p.image.compression, platform=p.build.platform,
        devel_image=resolved.base.cuda.image, runtime_image=resolved.runtime.image,
        tag_values=tag_values(p), warnings=tuple(resolved.warnings),
        hf_config=bool(getattr(p.serving, "hf_config", None)), observe=p.observe,
        resolution=res)
