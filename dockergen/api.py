"""The programmatic interface: profile path in, resolved profile / Dockerfile / context out.

Each function loads and resolves a profile once (:mod:`dockergen.pipeline`); the commands
resolve once themselves and hand the :class:`~dockergen.pipeline.Resolution` to every
output.

The CLI and the tests use these functions; they raise :class:`DockergenError` subclasses
for user mistakes and never print.
May import: anything of dockergen except :mod:`dockergen.cli`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dockergen.resources import shipped_profiles
from dockergen.yamlsource import read_yaml_file

# The profile model (pydantic), the components and the templates are imported by the
# functions that need them: `dockergen profiles`, `--help` and shell completion start
# without them (benchmarks/startup_bench.py).
if TYPE_CHECKING:
    from dockergen.errors import Problem
    from dockergen.loader import Overrides
    from dockergen.model import Mode, Resolved
    from dockergen.pipeline import Resolution


@dataclass(frozen=True)
class RenderedContext:
    """A build context ready to be written or sent to an engine."""

    name: str
    resolved: Resolved
    files: dict[str, bytes]

    @property
    def warnings(self) -> list[Problem]:
        return list(self.resolved.warnings)


def resolve_profile(path: Path, overrides: Overrides = (),
                    mode: Mode = "buildkit") -> Resolved:
    """Load, check and resolve a profile file (:func:`dockergen.pipeline.resolution`)."""
    from dockergen.pipeline import resolution

    return resolution(path, overrides, mode).resolved


def render_profile(path: Path, overrides: Overrides = (), mode: Mode = "buildkit",
                   syntax: str | None = None) -> tuple[Resolved, str]:
    """Resolve a profile and render its Dockerfile text."""
    from dockergen.render import render_dockerfile

    resolved = resolve_profile(path, overrides, mode)
    return resolved, render_dockerfile(resolved, syntax)


def render_context(path: Path, overrides: Overrides = (), mode: Mode = "buildkit",
                   syntax: str | None = None) -> RenderedContext:
    """Resolve a profile and assemble its whole build context in memory."""
    from dockergen.pipeline import resolution

    return context_of(resolution(path, overrides, mode), syntax)


def context_of(res: Resolution, syntax: str | None = None) -> RenderedContext:
    """The build context of a resolution."""
    return RenderedContext(res.resolved.profile.name, res.resolved, res.files(syntax))


def _is_abstract(path: Path) -> bool:
    data, _ = read_yaml_file(path, path.name)
    return isinstance(data, dict) and data.get("abstract") is True


def shipped_renderable() -> list[Path]:
    """Shipped profiles that render on their own (not the abstract bases)."""
    return [p for p in shipped_profiles() if not _is_abstract(p)]


def shipped_single_images() -> list[Path]:
    """Shipped profiles that are one image each: renderable and without a matrix.

    Commands that take one image per profile (deploy, the render benchmark) use these; a
    matrix profile's variants come from ``render --all`` (dockergen/fleet/matrix.py).
    """
    from dockergen.fleet.matrix import has_matrix

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

