"""The programmatic interface: profile path in, resolved profile out; the shipped profiles.

A profile's Dockerfile and build context come from its
:class:`~dockergen.pipeline.Resolution` (:func:`dockergen.pipeline.resolution`, then
``.files()``): the commands resolve once themselves and hand it to every output.

The CLI and the tests use these functions; they raise :class:`DockergenError` subclasses
for user mistakes and never print.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dockergen.input.yamlsource import read_yaml_file
from dockergen.resources import shipped_profiles

# The profile model (pydantic), the components and the templates are imported by the
# functions that need them: `dockergen profiles`, `--help` and shell completion start
# without them (benchmarks/startup_bench.py).
if TYPE_CHECKING:
    from dockergen.input.loader import Overrides
    from dockergen.resolve.model import Mode, Resolved


def resolve_profile(path: Path, overrides: Overrides = (),
                    mode: Mode = "buildkit") -> Resolved:
    """Load, check and resolve a profile file (:func:`dockergen.pipeline.resolution`)."""
    from dockergen.pipeline import resolution

    return resolution(path, overrides, mode).resolved


def _is_abstract(path: Path) -> bool:
    data, _ = read_yaml_file(path, path.name)
    return isinstance(data, dict) and data.get("abstract") is True


def shipped_renderable() -> list[Path]:
    """Shipped profiles that render on their own (not the abstract bases)."""
    return [p for p in shipped_profiles() if not _is_abstract(p)]


def shipped_single_images() -> list[Path]:
    """Shipped profiles that are one image each: renderable and without a matrix.

    Commands that take one image per profile (deploy, the render benchmark) use these; a
    matrix profile's variants come from ``render --all`` (dockergen/outputs/fleet/matrix.py).
    """
    from dockergen.outputs.fleet.matrix import has_matrix

    return [p for p in shipped_renderable() if not has_matrix(p)]


def describe_shipped() -> list[tuple[str, str]]:
    """(name, description) of every shipped profile."""
    out = []
    for path in shipped_profiles():
        data, _ = read_yaml_file(path, path.name)
        data = data if isinstance(data, dict) else {}
        if data.get("abstract") is True:
            out.append((path.stem, "(abstract: defaults the others extend)"))
        else:
            out.append((path.stem, str(data.get("description", ""))))
    return out

