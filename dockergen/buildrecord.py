"""The build record's status: what ``dockergen build`` writes and ``deploy --record`` reads.

``build-record.json`` is written by :mod:`dockergen.build` at each step (``started``, then
``built`` or ``failed``, ``smoke-failed``, ``push-failed`` or ``pushed``); ``deploy`` pins the
image from it only when the build got past its smoke tests. One enum, so the two never
disagree on a spelling.
May import: nothing of dockergen (a leaf).
"""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """How far a build got (the record's ``status``; the value is what the JSON holds)."""

    STARTED = "started"
    FAILED = "failed"
    BUILT = "built"
    SMOKE_FAILED = "smoke-failed"
    PUSH_FAILED = "push-failed"
    PUSHED = "pushed"

    @property
    def deployable(self) -> bool:
        """Built and not failed its smoke tests: an image ``deploy`` may name."""
        return self in (Status.BUILT, Status.PUSH_FAILED, Status.PUSHED)

    def __str__(self) -> str:
        return self.value
