"""BuildKit progress: decode the Engine API's status messages and show them to people.

On ``POST /build?version=2`` the engine streams JSON lines; progress arrives as
``{"id": "moby.buildkit.trace", "aux": "<base64>"}`` where the base64 is a protobuf
``moby.buildkit.v1.StatusResponse``. This module decodes that message with a small
wire-format reader (no protobuf dependency), keeps the state of every step (vertex), and
renders it as plain lines, a live terminal view, or JSON events. Pure: no docker import.

Field numbers (moby/buildkit api/services/control/control.proto):
StatusResponse{vertexes=1, statuses=2, logs=3, warnings=4};
Vertex{digest=1, inputs=2, name=3, cached=4, started=5, completed=6, error=7};
VertexLog{vertex=1, timestamp=2, stream=3, msg=4}; Timestamp{seconds=1, nanos=2}.
"""

from __future__ import annotations

import base64
import json
import re
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import IO, Any

from dockergen.errors import redact
from dockergen.input.buildrecord import StepCounts

# --- protobuf wire format ------------------------------------------------------------


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(data):
            raise ValueError("truncated varint")
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, i
        shift += 7


def fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs of one protobuf message; unknown wire types raise."""
    out: list[tuple[int, int | bytes]] = []
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            out.append((number, value))
        elif wire == 2:
            length, i = _varint(data, i)
            out.append((number, data[i:i + length]))
            i += length
        elif wire == 1:
            out.append((number, int.from_bytes(data[i:i + 8], "little")))
            i += 8
        elif wire == 5:
            out.append((number, int.from_bytes(data[i:i + 4], "little")))
            i += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return out


def _timestamp(data: bytes) -> float:
    seconds = nanos = 0
    for number, value in fields(data):
        if number == 1:
            seconds = int(value)
        elif number == 2:
            nanos = int(value)
    return seconds + nanos / 1e9


@dataclass
class VertexUpdate:
    """One ``Vertex`` message: a build step and its state."""

    digest: str
    name: str = ""
    cached: bool = False
    started: float | None = None
    completed: float | None = None
    error: str = ""


@dataclass
class LogLine:
    """One ``VertexLog`` message: output of a step."""

    vertex: str
    stream: int
    msg: bytes


@dataclass
class StatusUpdate:
    """A decoded ``StatusResponse``."""

    vertexes: list[VertexUpdate] = field(default_factory=list)
    logs: list[LogLine] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def decode_status(payload: str | bytes) -> StatusUpdate:
    """Decode the base64 ``aux`` of a ``moby.buildkit.trace`` message."""
    data = base64.b64decode(payload) if isinstance(payload, str) else payload
    update = StatusUpdate()
    for number, value in fields(data):
        if not isinstance(value, bytes):
            continue
        if number == 1:
            v = VertexUpdate("")
            for n, x in fields(value):
                if n == 1 and isinstance(x, bytes):
                    v.digest = x.decode()
                elif n == 3 and isinstance(x, bytes):
                    v.name = x.decode(errors="replace")
                elif n == 4:
                    v.cached = bool(x)
                elif n == 5 and isinstance(x, bytes):
                    v.started = _timestamp(x)
                elif n == 6 and isinstance(x, bytes):
                    v.completed = _timestamp(x)
                elif n == 7 and isinstance(x, bytes):
                    v.error = x.decode(errors="replace")
            update.vertexes.append(v)
        elif number == 3:
            log = LogLine("", 1, b"")
            for n, x in fields(value):
                if n == 1 and isinstance(x, bytes):
                    log.vertex = x.decode()
                elif n == 3 and isinstance(x, int):
                    log.stream = x
                elif n == 4 and isinstance(x, bytes):
                    log.msg = x
            update.logs.append(log)
        elif number == 4:
            for n, x in fields(value):
                if n == 3 and isinstance(x, bytes):
                    update.warnings.append(x.decode(errors="replace"))
    return update


# --- build state ---------------------------------------------------------------------

_STAGE = re.compile(r"^\[([a-z0-9][a-z0-9_.-]*)\s+\d+/\d+\]")


@dataclass
class Step:
    """The accumulated state of one build step."""

    number: int
    digest: str
    name: str
    cached: bool = False
    started: float | None = None
    completed: float | None = None
    error: str = ""
    logs: list[str] = field(default_factory=list)

    @property
    def stage(self) -> str | None:
        m = _STAGE.match(self.name)
        return m.group(1) if m else None

    @property
    def duration(self) -> float | None:
        if self.started is None or self.completed is None:
            return None
        return max(0.0, self.completed - self.started)

    @property
    def state(self) -> str:
        if self.error:
            return "error"
        if self.cached:
            return "cached"
        if self.completed is not None:
            return "done"
        if self.started is not None:
            return "running"
        return "waiting"


class BuildTracker:
    """Folds status updates into steps; knows the failing step and per-stage times."""

    def __init__(self) -> None:
        self.steps: dict[str, Step] = {}
        self.log_tail: deque[str] = deque(maxlen=200)
        self.warnings: list[str] = []
        # BuildKit cuts a step's output into chunks wherever its buffer fills, so a chunk
        # may end mid-line ("+ einops==0." / "8.2") or mid-character; the unfinished rest
        # waits here, per step, for its newline. Whole lines also make redaction reliable:
        # a token split over two chunks would match neither.
        self._partial: dict[str, bytes] = {}

    def apply(self, update: StatusUpdate) -> list[tuple[str, Step, str | None]]:
        """Apply an update; return the events it caused: (kind, step, log line)."""
        events: list[tuple[str, Step, str | None]] = []
        finished: list[Step] = []
        for v in update.vertexes:
            step = self.steps.get(v.digest)
            if step is None:
                step = Step(len(self.steps) + 1, v.digest, v.name)
                self.steps[v.digest] = step
            before = step.state
            step.name = v.name or step.name
            step.cached = step.cached or v.cached
            step.started = v.started if v.started is not None else step.started
            step.completed = v.completed if v.completed is not None else step.completed
            step.error = v.error or step.error
            if step.state != before:
                if step.state in ("running", "waiting"):
                    events.append((step.state, step, None))
                else:  # after this update's output, and after the step's last partial line
                    finished.append(step)
        for log in update.logs:
            step = self.steps.get(log.vertex)
            if step is None:
                continue
            data = self._partial.pop(log.vertex, b"") + log.msg
            *lines, rest = data.split(b"\n")
            if rest:
                self._partial[log.vertex] = rest
            events.extend(self._lines(step, lines))
        for step in finished:
            events.extend(self._flush_step(step))
            events.append((step.state, step, None))
        self.warnings.extend(update.warnings)
        return events

    def flush(self) -> list[tuple[str, Step, str | None]]:
        """Log events for output still waiting for a newline (at the end of the stream)."""
        events: list[tuple[str, Step, str | None]] = []
        for step in list(self.steps.values()):
            events.extend(self._flush_step(step))
        return events

    def _flush_step(self, step: Step) -> list[tuple[str, Step, str | None]]:
        rest = self._partial.pop(step.digest, b"")
        return self._lines(step, [rest]) if rest else []

    def _lines(self, step: Step, lines: list[bytes]) -> list[tuple[str, Step, str | None]]:
        events: list[tuple[str, Step, str | None]] = []
        for raw in lines:
            # "\r" progress bars inside a line still become lines of their own
            for text in raw.decode("utf-8", errors="replace").splitlines() or [""]:
                line = redact(text)
                step.logs.append(line)
                self.log_tail.append(line)
                events.append(("log", step, line))
        return events

    @property
    def failed(self) -> Step | None:
        """The first step that reported an error (the cause, not its cancelled peers)."""
        errors = [s for s in self.steps.values() if s.error and "canceled" not in s.error]
        errors = errors or [s for s in self.steps.values() if s.error]
        return min(errors, key=lambda s: s.number) if errors else None

    def summary(self) -> StepCounts:
        """Counts and per-stage durations for the build record."""
        stages: dict[str, float] = {}
        for step in self.steps.values():
            if step.stage and step.duration is not None and not step.cached:
                stages[step.stage] = round(stages.get(step.stage, 0.0) + step.duration, 3)
        counted = [s for s in self.steps.values() if s.stage]
        names = sorted({s.stage for s in counted if s.stage})
        return StepCounts(
            steps=len(counted),
            cached_steps=sum(1 for s in counted if s.cached),
            executed_steps=sum(1 for s in counted if not s.cached and s.completed),
            stage_seconds=dict(sorted(stages.items())),
            cached_by_stage={stage: sum(1 for s in counted if s.stage == stage and s.cached)
                             for stage in names},
            steps_by_stage={stage: sum(1 for s in counted if s.stage == stage)
                            for stage in names})


# --- renderers -----------------------------------------------------------------------


class PlainRenderer:
    """One line per event, like ``docker build --progress=plain``."""

    def __init__(self, out: IO[str] | None = None) -> None:
        self.out = out or sys.stderr

    def event(self, kind: str, step: Step, line: str | None) -> None:
        if kind == "running":
            self.out.write(f"#{step.number} {step.name}\n")
        elif kind == "log":
            self.out.write(f"#{step.number} {line}\n")
        elif kind == "cached":
            self.out.write(f"#{step.number} {step.name}\n#{step.number} CACHED\n")
        elif kind == "done":
            d = step.duration
            self.out.write(f"#{step.number} DONE {d:.1f}s\n" if d is not None else
                           f"#{step.number} DONE\n")
        elif kind == "error":
            self.out.write(f"#{step.number} ERROR: {redact(step.error)}\n")
        self.out.flush()

    def message(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def close(self) -> None:
        """Nothing to tidy for line output."""


class JsonRenderer(PlainRenderer):
    """One JSON object per event (for CI systems and tools)."""

    def event(self, kind: str, step: Step, line: str | None) -> None:
        record: dict[str, Any] = {"event": kind, "step": step.number, "name": step.name}
        if step.stage:
            record["stage"] = step.stage
        if line is not None:
            record["log"] = line
        if kind in ("done", "error") and step.duration is not None:
            record["seconds"] = round(step.duration, 3)
        if kind == "error":
            record["error"] = redact(step.error)
        self.out.write(json.dumps(record, sort_keys=True) + "\n")
        self.out.flush()

    def message(self, text: str) -> None:
        self.out.write(json.dumps({"event": "message", "text": text}) + "\n")
        self.out.flush()


class TtyRenderer(PlainRenderer):
    """A live view: one line per step (state, duration) and the tail of the log."""

    TAIL = 6

    def __init__(self, out: IO[str] | None = None) -> None:
        super().__init__(out)
        self.steps: dict[int, Step] = {}
        self.tail: deque[str] = deque(maxlen=self.TAIL)
        self.drawn = 0
        self.last = 0.0

    def event(self, kind: str, step: Step, line: str | None) -> None:
        self.steps[step.number] = step
        if line is not None:
            self.tail.append(line)
        now = time.monotonic()
        if kind != "log" or now - self.last > 0.1:
            self._draw()
            self.last = now

    def _draw(self) -> None:
        marks = {"cached": "\x1b[36mCACHED\x1b[0m", "done": "\x1b[32mDONE\x1b[0m",
                 "running": "\x1b[33m....\x1b[0m", "error": "\x1b[31mERROR\x1b[0m",
                 "waiting": "      "}
        lines = []
        for step in list(self.steps.values())[-12:]:
            d = step.duration
            when = f"{d:6.1f}s" if d is not None else (
                f"{time.time() - step.started:6.1f}s" if step.started else "       ")
            lines.append(f" {marks[step.state]} {when} #{step.number} {step.name[:90]}")
        lines += [f"   \x1b[2m{t[:110]}\x1b[0m" for t in self.tail]
        up = f"\x1b[{self.drawn}F" if self.drawn else ""
        self.out.write(up + "".join(f"\x1b[2K{line}\n" for line in lines))
        self.out.flush()
        self.drawn = len(lines)

    def message(self, text: str) -> None:
        self.drawn = 0
        super().message(text)

    def close(self) -> None:
        self._draw()


# The kinds of `build --progress` (besides auto), in the order its help lists them.
RENDERERS: dict[str, type[PlainRenderer]] = {
    "tty": TtyRenderer, "plain": PlainRenderer, "json": JsonRenderer}


def make_renderer(kind: str, out: IO[str] | None = None) -> PlainRenderer:
    """``auto`` picks the live view on a terminal and plain lines otherwise."""
    stream = out or sys.stderr
    if kind == "auto":
        kind = "tty" if stream.isatty() else "plain"
    return RENDERERS[kind](stream)
