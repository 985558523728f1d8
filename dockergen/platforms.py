"""Image platforms: ``OS/ARCH`` as the engine and OCI image indexes name them, and the CPU
each architecture is (its machine name in wheel tags and ``uname -m``, its ELF
``e_machine``).

One table, :data:`ARCHES`: the build (``--platform``), the Python lock (uv's
``--python-platform`` is ``<machine>-manylinux_2_NN``), the whole-image audit (the ELF
machine every shared object must have) and the deploy outputs (``kubernetes.io/arch``) read
it. src: OCI image-index spec ``platform.architecture`` (Go's GOARCH names); the System V
gABI e_machine registry (/usr/include/elf.h: EM_X86_64 62, EM_AARCH64 183); PEP 600
manylinux tags (``manylinux_2_28_aarch64``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Arch:
    """One CPU architecture an image can be built for."""

    goarch: str  # "arm64": OCI platform.architecture, kubernetes.io/arch
    machine: str  # "aarch64": wheel tags, uname -m, uv --python-platform prefix
    elf_machine: int  # ELF e_machine of its code


ARCHES = {a.goarch: a for a in (Arch("amd64", "x86_64", 62), Arch("arm64", "aarch64", 183))}
BY_MACHINE = {a.machine: a for a in ARCHES.values()}
# OS/ARCH[/VARIANT] as containerd's platforms package parses it (lowercase names)
PLATFORM = re.compile(r"[a-z0-9]{1,32}/[a-z0-9_]{1,32}(?:/[a-z0-9]{1,32})?")


class PlatformError(ValueError):
    """A ``--platform`` value dockergen cannot build; the message says what to write."""


def parse_list(text: str) -> tuple[str, ...]:
    """``linux/amd64,linux/arm64`` -> the platforms, in the order given, each once.

    A single platform may be any OS/ARCH[/VARIANT] the engine parses; a list (one image
    index) only platforms whose CPU dockergen knows (:data:`ARCHES`): each needs its own
    Python closure and audit.
    """
    items = [p.strip() for p in text.split(",")]
    for item in items:
        if not PLATFORM.fullmatch(item):
            raise PlatformError(f"{item!r} is not a platform; write OS/ARCH[/VARIANT] in "
                                "lowercase, e.g. linux/amd64 or linux/arm64, and a list "
                                "with commas: linux/amd64,linux/arm64")
    if len(set(items)) != len(items):
        raise PlatformError("a platform is named twice; name each once")
    if len(items) > 1:
        for item in items:
            if arch_of(item) is None:
                raise PlatformError(f"{item!r}: an image index is built only for "
                                    f"{', '.join('linux/' + a for a in ARCHES)}")
    return tuple(items)


def canonical(platform: str) -> str:
    """``linux/arm64/v8`` is ``linux/arm64``: its only variant, as containerd normalizes it."""
    return platform.removesuffix("/v8") if platform.startswith("linux/arm64/") else platform


def arch_of(platform: str) -> Arch | None:
    """The CPU of a ``linux/ARCH[/VARIANT]`` platform, or None if dockergen does not know it."""
    os_name, _, rest = platform.partition("/")
    return ARCHES.get(rest.split("/")[0]) if os_name == "linux" else None


def suffix(platform: str) -> str:
    """The tag suffix of one platform's image in a multi-platform build (``arm64``)."""
    return platform.split("/", 1)[1].replace("/", "")


def for_platform(uv_platform: str, platform: str) -> str:
    """uv's ``--python-platform`` for ``platform``: the same glibc, that platform's CPU
    (``x86_64-manylinux_2_36`` for linux/arm64 -> ``aarch64-manylinux_2_36``)."""
    arch = arch_of(platform)
    if arch is None:
        raise PlatformError(f"{platform!r}: no Python platform is known for it; build "
                            f"for {', '.join('linux/' + a for a in ARCHES)}")
    _machine, sep, rest = uv_platform.partition("-")
    return f"{arch.machine}{sep}{rest}" if sep else arch.machine


def platform_of(uv_platform: str) -> str:
    """The OCI platform a uv ``--python-platform`` resolves wheels for (``linux/arm64``)."""
    arch = BY_MACHINE.get(uv_platform.split("-", 1)[0])
    return f"linux/{arch.goarch}" if arch else "linux/amd64"
