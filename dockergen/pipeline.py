"""A profile loaded once and resolved once: the one value every output takes.

:func:`resolution` is the entrance from a profile file: it loads the profile with its
``--set`` overrides and user knowledge, and resolves it with the base-image lock beside it
(typed pins, :mod:`dockergen.input.pins`) and the CA certificates the command was given
(typed too: never an override of the profile). Every output is a function of the
:class:`Resolution` it returns (the build context and its content tag here; the bake file,
deploy, observe, the capacity plan, the Python lock's inputs, explain and build in their
own modules), and none opens the profile again, so all of them name the same images and
tags. The positions of the profile's values travel with it (:meth:`Resolution.at`): a
check run late still reports ``FILE:LINE:COL``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from dockergen.errors import Location
from dockergen.input.loader import LoadedProfile, Overrides
from dockergen.resolve.model import GivenCertificate, Mode, Resolved


@dataclass(frozen=True)
class Resolution:
    """One profile (or one matrix variant) as loaded and as resolved."""

    loaded: LoadedProfile
    resolved: Resolved
    # the rendered build context, once per syntax asked for (rendering is not free: a
    # command that never needs the context never renders it)
    _contexts: dict[str | None, dict[str, bytes]] = field(
        default_factory=dict, compare=False, repr=False)

    @property
    def name(self) -> str:
        """The profile's (or the variant's) name: its image, build folder and bake target."""
        return self.resolved.profile.name

    @property
    def path(self) -> Path:
        """The profile file it was loaded from."""
        return self.loaded.path

    def at(self, *field_path: str | int) -> Location:
        """Where the profile writes a field (or its nearest written parent)."""
        return self.loaded.at(*field_path)

    def files(self, syntax: str | None = None) -> dict[str, bytes]:
        """Every file of the build context (:func:`dockergen.outputs.dockerfile.build_context`)."""
        if syntax not in self._contexts:
            from dockergen.outputs.dockerfile import build_context

            self._contexts[syntax] = build_context(self.resolved, syntax)
        return self._contexts[syntax]

    @functools.cached_property
    def content_tag(self) -> str:
        """The ``dg-<hash>`` tag ``dockergen build`` gives this context with default options
        (no build args, the final stage, the profile's platform;
        :mod:`dockergen.resolve.buildid`)."""
        from dockergen.resolve.buildid import content_tag, engine_platform

        platform = engine_platform(None, self.resolved.profile.build.platform)
        return content_tag(self.files(), mode=self.resolved.mode, platform=platform)


def resolution_of(loaded: LoadedProfile, mode: Mode = "buildkit", *,
                  python_lock: bool = True, pin: bool = True,
                  certificates: tuple[GivenCertificate, ...] = ()) -> Resolution:
    """Resolve a loaded profile with its engine's parts (:func:`dockergen.resolve.fold.resolve`,
    :func:`dockergen.parts.lineup.for_engine`); ``pin=False`` leaves the
    base-image lock out (what ``dockergen lock`` pins), ``python_lock=False`` the Python
    lock (what ``dockergen lock --python`` refreshes); ``certificates``: the CA
    certificates the command was given (``build --ca-cert``)."""
    from dockergen.parts.assemble import assemble
    from dockergen.parts.lineup import for_engine
    from dockergen.resolve.fold import resolve

    parts = for_engine(loaded.profile.engine.name, python_lock)
    return Resolution(loaded, resolve(loaded, parts, assemble, mode,
                                      pin=pin, certificates=certificates))


def resolution(path: Path, overrides: Overrides = (), mode: Mode = "buildkit", *,
               python_lock: bool = True, pin: bool = True,
               certificates: tuple[GivenCertificate, ...] = ()) -> Resolution:
    """Load a profile file once and resolve it once; raises :class:`ProfileError` with
    every problem found."""
    from dockergen.input.loader import load_profile

    return resolution_of(load_profile(path, overrides), mode, python_lock=python_lock,
                         pin=pin, certificates=certificates)
