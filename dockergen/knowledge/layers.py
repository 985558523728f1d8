"""Layer compression: what each choice asks of BuildKit, of the build engine and of the nodes.

The one source of these facts for the build (Engine API ``outputs``), the bake file
(``output``), ``explain`` and the deploy outputs' headers.

Why zstd is the default for a GPU fleet: the vLLM venv (9.9 GB of site-packages as one tar,
2 cores, measured 2026-12-05, shared/reference/platform-notes.md) decompressed in 8.4 s as
zstd -3 against 52.6 s as gzip -6, and was 4.00 GB against 4.40 GB: every node pulling the
image pays the decompression. The nodes need an engine that pulls zstd layers: containerd
>= 1.5 (src: containerd v1.5.0 release notes, "zstd compressed layers") or Docker Engine >= 23
(src: moby v23.0.0 release notes, moby/moby#41759, pulling zstd layers); a node with Docker
20.10's own image store cannot pull them, so ``image.compression: gzip`` is the choice there.

Writing zstd needs BuildKit's image exporter with the containerd image store: the classic
(overlay2) store's exporter writes gzip whatever it is asked (verified with Engine 28.5.2,
2026-12-06), and the classic builder has no exporter options at all. zstd layers use the OCI
media types (``application/vnd.oci.image.layer.v1.tar+zstd``): Docker's schema 2 has no zstd
layer type (src: OCI image-spec v1.1 layer.md; BuildKit docs, "image exporter":
compression, force-compression, oci-mediatypes). ``force-compression`` recompresses layers
that BuildKit's cache or a base image holds in the other format: without it a build mixes
both (seen: a gzip build reusing a cached zstd layer).
"""

from __future__ import annotations

from dockergen.errors import Edit, ExitCode, Location, Problem, ProfileError

# BuildKit image-exporter attributes (moby's /build ``outputs`` and bake's ``output``)
EXPORTER_ATTRS: dict[str, dict[str, str]] = {
    "zstd": {"compression": "zstd", "force-compression": "true", "oci-mediatypes": "true"},
    "gzip": {"compression": "gzip", "force-compression": "true"},
}

# what a node needs to pull the image's layers
NODE_REQUIREMENT = {
    "zstd": "containerd >= 1.5 or Docker Engine >= 23 (Docker 20.10's image store cannot "
            "pull zstd layers)",
    "gzip": "any container engine",
}

# the registry manifest's layer media types each choice writes
LAYER_MEDIA_TYPES = {
    "zstd": ("application/vnd.oci.image.layer.v1.tar+zstd",),
    "gzip": ("application/vnd.docker.image.rootfs.diff.tar.gzip",
             "application/vnd.oci.image.layer.v1.tar+gzip"),
}

# why each choice, for `dockergen explain` (numbers: the module docstring)
WHY = {
    "zstd": "nodes decompress zstd about 6x faster than gzip (vLLM's venv: 8.4 s vs 52.6 s) "
            "and pull 9% fewer bytes",
    "gzip": "every engine pulls gzip layers; they decompress about 6x slower than zstd",
}

BUILD_ENGINE_REQUIREMENT = ("BuildKit with the containerd image store (Docker Engine >= 24 with "
                            "\"features\": {\"containerd-snapshotter\": true} in daemon.json)")
# what each choice asks of the engine that builds it
BUILD_REQUIREMENT = {"zstd": BUILD_ENGINE_REQUIREMENT,
                     "gzip": "any engine (the classic builder too)"}


def exporter_attrs(compression: str) -> str:
    """``key=value,...`` for a bake ``output`` or ``--output type=image,...``."""
    return ",".join(f"{k}={v}" for k, v in EXPORTER_ATTRS[compression].items())


def summary(compression: str) -> str:
    """One line for people: the choice and what pulling it needs."""
    return f"{compression} layers; nodes need {NODE_REQUIREMENT[compression]}"


class EngineCannotWrite(ProfileError, code=ExitCode.MISSING_TOOL):
    """The profile asks for layers the build engine cannot write (nothing was built)."""


def engine_problem(compression: str, builder: str, image_store: str,
                   where: Location) -> Problem | None:
    """Why this engine and builder cannot write ``compression`` layers, or None.

    ``image_store`` is the engine's: ``containerd`` or ``classic``. Checked before the build:
    the classic store would write gzip and say nothing.
    """
    if compression != "zstd":
        return None
    if builder == "classic":
        why = "the classic builder (no BuildKit) writes gzip layers only"
    elif image_store != "containerd":
        why = ("this Docker engine keeps images in its classic store (e.g. overlay2), whose "
               "image exporter writes gzip whatever it is asked")
    else:
        return None
    return Problem(where, "image.compression", f"zstd layers cannot be built here: {why}",
                   f"build with {BUILD_ENGINE_REQUIREMENT}, or set "
                   "image.compression: gzip (nodes then need no zstd support)",
                   edits=(Edit("write gzip layers", (("image.compression", "gzip"),)),))
