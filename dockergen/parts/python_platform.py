"""The wheels the image's OS can install: its glibc, as a manylinux platform tag.

The Python lock is resolved for that platform, and the engine's wheels must exist for it;
the glibc of each base OS is written here with its source.
"""

from __future__ import annotations

DEFAULT_GLIBC = "2_28"  # an image whose OS dockergen cannot see: manylinux_2_28, the safe minimum
# glibc of the base OS -> the manylinux wheels it can install (uv --python-platform
# MACHINE-manylinux_X_Y). src: Ubuntu focal 2.31, jammy 2.35, noble 2.39; Debian bookworm
# 2.36 (libc6 packages). SGLang 0.5.23 publishes manylinux_2_34 wheels only, so 2_28 would
# find none.
OS_GLIBC = {"ubuntu20.04": "2_31", "ubuntu22.04": "2_35", "ubuntu24.04": "2_39",
            "debian12": "2_36"}


def wheel_platform(os_name: str, devel_image: str | None, machine: str = "x86_64") -> str:
    """The wheels the image's OS can install on ``machine`` (an explicit devel image: the
    safe minimum glibc).

    The Python lock is resolved for it, and a lock made for another one is stale: wheels for
    a newer glibc would install and fail at import (review of the lock check)."""
    glibc = DEFAULT_GLIBC if devel_image else OS_GLIBC.get(os_name, DEFAULT_GLIBC)
    return f"{machine}-manylinux_{glibc}"


def os_glibc(os_name: str, devel_image: str | None) -> tuple[int, int] | None:
    """The glibc of the base image's OS as (major, minor); None where dockergen cannot see
    the OS (an explicit devel image)."""
    if devel_image or os_name not in OS_GLIBC:
        return None
    major, minor = OS_GLIBC[os_name].split("_")
    return int(major), int(minor)
