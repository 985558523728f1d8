"""Atomic writes of generated run configurations (all or nothing).

May import: :mod:`dockergen.errors`.
"""

from __future__ import annotations

import os
from pathlib import Path

from dockergen.errors import OutputError


def write_text(target: Path, text: str) -> None:
    """Write ``text`` to ``target`` through a temporary file and a rename."""
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"{target}: cannot write: {exc.strerror}; choose a writable "
                          "path") from None
