"""A remote file read through HTTP range requests, as a seekable file object.

What pip's "lazy wheel" does: ``zipfile`` reads a wheel's central directory at the end and
then only the members asked for, so a 400 MB wheel costs a few MiB. The caller supplies the
request (``fetch(start, end)`` returns bytes ``[start, end)``): the maintainer's PyPI reader
and the product's index reader (credentials, limits) each send their own.
May import: nothing of dockergen (a leaf).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

BLOCK = 1 << 20  # range-request granularity: 1 MiB


class RangeReader(io.RawIOBase):
    """A read-only, seekable view of a remote file of ``size`` bytes."""

    def __init__(self, size: int, fetch: Callable[[int, int], bytes]) -> None:
        super().__init__()
        self.size, self.pos, self._fetch = size, 0, fetch
        self.blocks: dict[int, bytes] = {}
        self.fetched = 0  # bytes actually downloaded (for the report)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def prefetch(self, start: int, end: int) -> None:
        """Fetch ``[start, end)`` in one request (e.g. every member of a folder)."""
        first, last = start // BLOCK, (min(end, self.size) - 1) // BLOCK
        missing = [b for b in range(first, last + 1) if b not in self.blocks]
        if not missing:
            return
        lo, hi = missing[0] * BLOCK, min((missing[-1] + 1) * BLOCK, self.size)
        data = self._fetch(lo, hi)
        self.fetched += len(data)
        for b in range(missing[0], missing[-1] + 1):
            self.blocks[b] = data[(b - missing[0]) * BLOCK:(b - missing[0] + 1) * BLOCK]

    def readinto(self, buf: Any) -> int:
        n = min(len(buf), self.size - self.pos)
        if n <= 0:
            return 0
        self.prefetch(self.pos, self.pos + n)
        out = bytearray()
        pos = self.pos
        while len(out) < n:
            b, off = divmod(pos, BLOCK)
            chunk = self.blocks[b][off:off + n - len(out)]
            out += chunk
            pos += len(chunk)
        buf[:n] = out
        self.pos += n
        return n
