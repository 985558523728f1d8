"""The one place where the fleet features read dockergen's loader.

Everything the fleet modules (bake, matrix, locks) need from it goes through this
adapter, so that only this file follows a change of the loader. A profile is read once
(:class:`RawProfile`); a matrix variant is that document with one point's values set,
validated by the loader's own :func:`load_raw` like any profile, then resolved by the one
pipeline (:func:`dockergen.pipeline.resolution_of`); the fleet takes each
:class:`~dockergen.pipeline.Resolution` as it is.
"""

from __future__ import annotations

import copy

from dockergen.input.loader import (
    Overrides,
    RawProfile,
    apply_overrides,
    check_abstract,
    expects_mapping,
    is_field,
    load_raw,
    read_raw,
)
from dockergen.parts.image import tag_values

# what the fleet modules take from the loader and the image part's tag placeholders (they
# import nothing of them themselves)
__all__ = ["RawProfile", "check_abstract", "expects_mapping", "is_field", "is_matrix",
           "load_raw", "read_raw", "tag_values"]


def is_matrix(raw: RawProfile, overrides: Overrides) -> bool:
    """Whether the profile, after ``--set`` overrides, declares a matrix."""
    data = apply_overrides(copy.deepcopy(raw.data), raw.positions.copy(), overrides)
    return bool(data.get("matrix"))
