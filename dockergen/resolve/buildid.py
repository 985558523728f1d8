"""The immutable ``dg-<hash>`` tag: a hash of exactly what a build consumes.

The bytes of every build-context file, the build args, the target stage, the platform,
the build mode and the dockergen version. The tag used to hash the profile only,
so a BuildKit and a classic rendering, another base image through ``--build-arg``, an
intermediate ``--target`` stage and a ``--no-cache`` rebuild all got the same
"immutable" tag. Two builds with this tag consumed identical inputs; a registry that
already holds it under another digest is never overwritten (see :mod:`dockergen.build.orchestrate`).
"""

from __future__ import annotations

import hashlib
import json

from dockergen import __version__

PREFIX = "dg-"
# The engine's own platform on the hosts dockergen builds on: no --platform is sent for it,
# so a profile for it keeps the tags it had before profiles named a platform.
HOST_PLATFORM = "linux/amd64"


def engine_platform(given: str | None, profile_platform: str) -> str | None:
    """The platform a build asks the engine for: ``--platform`` when given, else the
    profile's ``build.platform`` (None for the host's own, which the engine defaults to)."""
    if given is not None:
        return given
    return None if profile_platform == HOST_PLATFORM else profile_platform


def content_tag(files: dict[str, bytes], *, mode: str, build_args: dict[str, str] | None = None,
                stage: str | None = None, platform: str | None = None) -> str:
    """``dg-`` + the first 12 hex digits of the sha256 of the build's inputs.

    ``stage`` None means the final stage. Deterministic: sorted names and keys.
    """
    inputs = {
        "dockergen": __version__,
        "mode": mode,
        "target": stage or "",  # the key the tags of earlier releases were hashed with
        "platform": platform or "",
        "build_args": dict(sorted((build_args or {}).items())),
        "files": {name: hashlib.sha256(files[name]).hexdigest() for name in sorted(files)},
    }
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
    return PREFIX + digest[:12]
