"""Which GPUs compiled CUDA code can run on, from a library's fatbin entries.

A library's ``.nv_fatbin`` section lists the code it carries: SASS for an arch
(``sass_90``, arch-specific ``sass_90a``) and PTX (``ptx_80``). A GPU runs SASS of its
own major and an equal or lower minor, ``a`` SASS of exactly its arch, and PTX of an equal
or lower arch (JIT-compiled); with none of them it stops with "no kernel image is
available". The reader and that rule are the whole-image audit's own
(``templates/context/image_audit.py``, which runs inside images with the standard library
only): loaded from there, so the check before the build (the engine release's kernels,
read from its wheel) and the audit after it read code the same way.

Codes are kept as text (``sass_90a``) in the knowledge files.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from collections.abc import Iterable
from types import ModuleType

from dockergen.resources import templates_dir

CODE = re.compile(r"(sass|ptx)_([0-9]+)(a?)")

# The knowledge table of each machine's compiled code (an engine's facts file): the
# aarch64 wheels are builds of their own, with other arch lists (vLLM 0.33.0's aarch64
# build has no sm_75, sglang-kernel 0.4.10's starts at sm_90), read from those wheels by
# tools/kernel_archs.py --machine aarch64.
TABLE_OF_MACHINE = {"x86_64": "kernels", "aarch64": "kernels_aarch64"}


@functools.cache
def _audit() -> ModuleType:
    path = templates_dir() / "context" / "image_audit.py"
    spec = importlib.util.spec_from_file_location("dockergen_image_audit", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class KernelCodeError(ValueError):
    """A file that starts as an ELF file whose headers or fatbin cannot be read: sizes that
    run past its end, or that would not move the reader forward."""


def code_of(elf: bytes) -> tuple[str, ...]:
    """The code a shared object carries, sorted (``("ptx_80", "sass_75", "sass_90a")``);
    empty for a file that is no 64-bit ELF or has no fatbin; :class:`KernelCodeError` for
    one whose headers lie (a wheel's member is bytes from the network)."""
    audit = _audit()
    try:
        found = audit.fatbin_code(elf, audit.elf_sections(elf))
    except audit.ElfError as exc:
        raise KernelCodeError(str(exc)) from None
    return tuple(f"{kind}_{arch}{suffix}" for kind, arch, suffix in sorted(found))


def _parsed(codes: Iterable[str]) -> set[tuple[str, int, str]]:
    out = set()
    for code in codes:
        m = CODE.fullmatch(code)
        if m is None:
            raise ValueError(f"{code!r} is no kernel code (sass_NN[a] or ptx_NN[a])")
        out.add((m.group(1), int(m.group(2)), m.group(3)))
    return out


def runs_on(codes: Iterable[str], cc: str) -> bool:
    """Whether a GPU of compute capability ``cc`` (``"9.0"``) can run any of ``codes``."""
    major, _, minor = cc.partition(".")
    return bool(_audit().runs_on(_parsed(codes), (int(major), int(minor or 0))))


def span(codes: Iterable[str]) -> str:
    """``sass_75, ..., sass_120, ptx_80`` for messages: SASS in arch order, then PTX."""
    parsed = sorted(_parsed(codes), key=lambda c: (c[0] != "sass", c[1], c[2]))
    return ", ".join(f"{kind}_{arch}{suffix}" for kind, arch, suffix in parsed)
