"""The moment of a change: staged outputs swapped onto their destinations, all or none,
with SIGINT/SIGTERM held until every rename is done.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

from dockergen.errors import OutputError


def remove(path: Path) -> None:
    """Remove a staging file or folder, or an old version moved aside (gone already: fine)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _aside(path: Path) -> Path:
    # a random name: a leftover of a crashed run (same pid in a container) never blocks
    return path.with_name(f".{path.name}.old-{uuid.uuid4().hex[:12]}")


def swap_all(parent: Path, staged: list[tuple[Path, Path]], gone: list[Path]) -> None:
    """Move each staging path onto its destination and ``gone`` out of the way; on any
    failure or interrupt undo every move made, then re-raise. Old versions are deleted
    only once everything is in place."""
    done: list[tuple[Path, Path | None]] = []  # (destination, its old version moved aside)
    try:
        for staging, dest in staged:
            old = None
            if dest.exists() or dest.is_symlink():
                old = _aside(dest)
                os.replace(dest, old)
                done.append((dest, old))  # recorded at once: a failure below puts it back
            os.replace(staging, dest)
            if old is None:
                done.append((dest, None))
        for path in gone:
            aside = _aside(path)
            os.replace(path, aside)
            done.append((path, aside))
    except BaseException as exc:
        stuck: list[str] = []
        for dest, old in reversed(done):
            try:
                if dest.exists() or dest.is_symlink():  # what this change put there goes
                    remove(dest)
                if old is not None:  # and what was there comes back
                    os.replace(old, dest)
            except OSError:
                stuck.append(f"{old} (was {dest})" if old is not None else str(dest))
        if stuck:
            reason = exc.strerror if isinstance(exc, OSError) else type(exc).__name__
            raise OutputError(f"{parent}: the change failed ({reason}) and could not be fully "
                              f"undone; move these back by hand: {', '.join(stuck)}") from None
        if isinstance(exc, OSError):
            raise OutputError(f"{parent}: cannot write: {exc.strerror}; nothing was changed"
                              ) from None
        raise
    for _, old in done:
        if old is not None:
            remove(old)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM during the swaps and deliver them right after them.

    A Ctrl-C between two renames used to delete both the old and the new folder. Signal
    handlers can only be set in the main thread; elsewhere :func:`swap_all`'s own
    rollback is the guard.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _frame: caught.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for number in dict.fromkeys(caught):
            signal.raise_signal(number)  # now handled as it would have been
