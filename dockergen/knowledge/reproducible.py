"""Reproducible images: the same profile and lock built twice give the same image digest.

These would otherwise change the digest at every build:

- **Dates.** BuildKit writes the image config's ``created`` and every history entry's date
  from the wall clock, and every file a ``RUN`` step writes gets the build's time as its
  mtime, so every layer digest changes. ``SOURCE_DATE_EPOCH`` (a build arg BuildKit reads,
  >= 0.11) sets the config and history dates; the image exporter's ``rewrite-timestamp=true``
  (BuildKit >= 0.13) clamps the mtime of every file newer than the epoch in the layers this
  build made (base image layers are left as they are).
- **Build noise.** apt, dpkg, ldconfig and debconf leave logs, caches and backups that hold
  times or inode numbers (:data:`BUILD_NOISE`, removed in the step that makes them), and
  ``useradd`` writes the day of the build into ``/etc/shadow``: Debian 12's shadow (4.13)
  takes it from ``SOURCE_DATE_EPOCH``, and at 0 leaves "last change" empty (aging off, no
  forced change; verified 2026-12-06), so the runtime stage declares that ARG.
- **Bytecode.** Timestamp-based ``.pyc`` files hold the source's mtime; the engine stage
  compiles hash-based ones (``python.yaml`` ``bytecode``) with ``PYTHONHASHSEED=0``
  (:data:`dockergen.parts.python.BYTECODE_ENV`, why beside it).
- **Compiled and installed files.** The source-built FlashAttention wheel is stripped of
  the local symbols that name nvcc's temporary files (parts/flash_attn.py), and uv's
  record of a local wheel's ctime is removed (:data:`UV_LOCAL_INSTALL_RECORDS`).

The epoch is fixed: :data:`EPOCH` (1970-01-01T00:00:00Z), as ko and Bazel's rules_docker write
by default. An image's date from the wall clock, a lock or a commit would make the digest
depend on something beside the profile, the lock and the base digests (which the immutable
``dg-`` tag already names); when the image was built is in its build record. A user who
wants another date passes ``--build-arg SOURCE_DATE_EPOCH=N``, which the tag then covers.

Where it holds (verified with Docker Engine 28.5.2 from Debian sid, whose vendored BuildKit
reports no version, 2026-12-06): BuildKit >= 0.13 through the Engine API with the
containerd image store. The engine's own ``moby`` exporter
forces ``unpack``, which BuildKit refuses beside ``rewrite-timestamp`` ("exporter option
"rewrite-timestamp" conflicts with "unpack""); BuildKit's plain ``image`` exporter stores
into the same containerd store and the engine unpacks the image when a container first
needs it. The classic (overlay2) store ignores ``rewrite-timestamp`` and the classic builder
knows neither: there the config dates are fixed but the layers are not reproducible.
"""

from __future__ import annotations

EPOCH = 0  # seconds since 1970-01-01T00:00:00Z; see the module docstring for why

# BuildKit image-exporter attributes that clamp the layers' file times to the epoch
EXPORTER_ATTRS: dict[str, str] = {"rewrite-timestamp": "true"}

# Written by apt, dpkg, ldconfig, debconf and shadow while packages are installed and the
# user is made: logs and caches that hold times or inode numbers, and backup copies. Shell
# globs, removed at the end of the runtime stage's package step.
BUILD_NOISE: tuple[str, ...] = (
    "/var/log/apt/*", "/var/log/dpkg.log", "/var/log/alternatives.log",
    "/var/cache/apt/*.bin", "/var/cache/ldconfig/aux-cache", "/var/cache/debconf/*-old",
    "/var/lib/dpkg/*-old", "/etc/passwd-", "/etc/group-", "/etc/shadow-", "/etc/gshadow-",
)

# What uv writes into a distribution it installs from a local file (the source-built
# FlashAttention wheel): its cache record holds the file's ctime, which the kernel sets and
# no ``touch`` can (uv-cache-info: Timestamp::from_metadata; seen differing between two
# builds, 2026-12-06). Nothing in the image reinstalls, so it is removed with its RECORD line.
UV_LOCAL_INSTALL_RECORDS: tuple[str, ...] = ("uv_cache.json",)


def build_args(given: dict[str, str]) -> dict[str, str]:
    """The build args of a BuildKit build: the user's, with the epoch unless they set one."""
    return {"SOURCE_DATE_EPOCH": str(EPOCH), **given}


def exporter(compression_attrs: dict[str, str], image_store: str) -> dict[str, str]:
    """The image exporter's attributes: the layer compression's, plus the timestamp
    rewrite where the engine honours it (the containerd image store)."""
    if image_store != "containerd":
        return dict(compression_attrs)
    return {**compression_attrs, **EXPORTER_ATTRS}
