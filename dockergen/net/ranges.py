"""A remote file read through HTTP range requests, as a seekable file object.

What pip's "lazy wheel" does: ``zipfile`` reads a wheel's central directory at the end and
then only the members asked for, so a 400 MB wheel costs a few MiB. The caller supplies the
request (``fetch(start, end)`` returns bytes ``[start, end)``): the maintainer's PyPI reader
and the product's index reader (credentials, limits) each send their own.

Hand-written (no maintained library reads a zip through range requests with a budget), so
each bound is explicit: every answer must be exactly as long as what was asked (a short 206
is a :class:`RangeError`, never a loop that waits for bytes that do not come), every read
is checked against what the file has left, and the bytes fetched in all are bounded
(``budget``), checked before a buffer is allocated or a request sent, so a zip whose
directory claims gigabytes is refused up front.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from dockergen.errors import DockergenError, ExitCode

BLOCK = 1 << 20  # range-request granularity: 1 MiB
BUDGET = 1 << 30  # bytes one reader fetches at most (vLLM's largest library: 287 MiB)


class RangeError(DockergenError, code=ExitCode.MISSING_TOOL):
    """A range read that cannot be right: a short answer, a read past the budget."""


class RangeReader(io.RawIOBase):
    """A read-only, seekable view of a remote file of ``size`` bytes."""

    def __init__(self, size: int, fetch: Callable[[int, int], bytes],
                 budget: int = BUDGET) -> None:
        super().__init__()
        if size < 0:
            raise RangeError(f"a remote file of {size} bytes")
        self.size, self.pos, self._fetch, self.budget = size, 0, fetch, budget
        self.blocks: dict[int, bytes] = {}
        self.fetched = 0  # bytes actually downloaded (for the report)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence not in (0, 1, 2):
            raise ValueError(f"whence {whence}")
        base = {0: 0, 1: self.pos, 2: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def read(self, size: int | None = -1) -> bytes:
        """Up to ``size`` bytes (all that is left when negative), refused before any buffer
        is made when more than the budget could still fetch."""
        left = max(self.size - self.pos, 0)
        n = left if size is None or size < 0 else min(size, left)
        if n > self.budget - self.fetched + BLOCK:
            raise RangeError(f"a read of {n} bytes, more than the {self.budget} bytes "
                             "dockergen fetches of one remote file")
        buf = bytearray(n)
        got = self.readinto(buf)
        return bytes(buf[:got])

    def prefetch(self, start: int, end: int) -> None:
        """Fetch ``[start, end)`` in one request (e.g. every member of a folder)."""
        end = min(end, self.size)
        if start >= end:
            return
        first, last = start // BLOCK, (end - 1) // BLOCK
        missing = [b for b in range(first, last + 1) if b not in self.blocks]
        if not missing:
            return
        lo, hi = missing[0] * BLOCK, min((missing[-1] + 1) * BLOCK, self.size)
        if self.fetched + (hi - lo) > self.budget:
            raise RangeError(f"fetching {hi - lo} more bytes would pass the {self.budget} "
                             "bytes dockergen fetches of one remote file")
        data = self._fetch(lo, hi)
        if len(data) != hi - lo:  # a short 206: the blocks below would be short too
            raise RangeError(f"asked bytes {lo}-{hi - 1} ({hi - lo}), the server sent "
                             f"{len(data)}")
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
        while len(out) < n:  # each turn takes >= 1 byte: every block below size is whole
            b, off = divmod(pos, BLOCK)
            chunk = self.blocks[b][off:off + n - len(out)]
            if not chunk:
                raise RangeError(f"no bytes at {pos} of a {self.size}-byte file")
            out += chunk
            pos += len(chunk)
        buf[:n] = out
        self.pos += n
        return n
