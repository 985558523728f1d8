"""One build through the Engine API: pull the bases, build, follow the progress, tag.

A build counts as done only when the engine reported the image id. A failed step is named
with its Dockerfile line and the tail of its log; interruptions and timeouts cancel the
build and remove the tags this run created. Every daemon call goes through the
:class:`~dockergen.build.daemon.ContainerDaemon` protocol (docker-py behind it).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from dockergen.build.progress import (
    BuildTracker,
    PlainRenderer,
    StatusUpdate,
    decode_status,
    make_renderer,
)
from dockergen.errors import DockergenError, ExitCode, redact
from dockergen.input.buildrecord import StepCounts
from dockergen.knowledge import layers, reproducible

if TYPE_CHECKING:
    from dockergen.build.daemon import ContainerDaemon
    from dockergen.build.options import BuildOptions

LOG_TAIL = 30


class BuildFailed(DockergenError, code=ExitCode.BUILD_FAILED):
    """The build failed; the message names the step, its line and the log tail."""


class BuildTimeout(DockergenError, code=ExitCode.TIMEOUT):
    """The build ran past ``--timeout`` and was cancelled."""


class BuildInterrupted(DockergenError, code=ExitCode.INTERRUPTED):
    """Ctrl-C: the build was cancelled."""


@dataclass
class BuildPlan:
    """What a build will do (``--dry-run`` prints this)."""

    name: str
    builder: str
    context_files: list[str]
    pulls: list[str]
    tags: list[str]
    build_args: dict[str, str]
    compression: str = "gzip"  # image.compression: the layers BuildKit writes

    def lines(self) -> list[str]:
        out = [f"profile: {self.name}", f"builder: {self.builder}",
               f"layers: {layers.summary(self.compression)}", "context:"]
        out += [f"  {f}" for f in self.context_files]
        out += ["base images to pull (with your docker credentials):"]
        out += [f"  {p}" for p in self.pulls] or ["  (none)"]
        out += ["tags:"] + [f"  {t}" for t in self.tags]
        if self.build_args:
            out += ["build args:"] + [f"  {k}={v}" for k, v in sorted(self.build_args.items())]
        return out


def dockerfile_line(dockerfile: str, step_name: str) -> int | None:
    """The 1-based Dockerfile line of a BuildKit step like ``[engine 2/3] RUN ...``."""
    m = re.match(r"\[([^\] ]+)\s+\d+/\d+\]\s+(.*)$", step_name, re.DOTALL)
    if not m:
        return None
    stage, instruction = m.group(1), " ".join(m.group(2).split())
    lines = dockerfile.splitlines()
    in_stage = False
    i = 0
    while i < len(lines):
        start = i
        text = lines[i]
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1] + " " + lines[i]
        i += 1
        norm = " ".join(text.split())
        if norm.upper().startswith("FROM "):
            in_stage = norm.split()[-1] == stage or norm.split()[1] == stage
            continue
        if in_stage and norm and not norm.startswith("#") and (
                _without_mounts(norm) == _without_mounts(instruction)):
            return start + 1
    return None


def _without_mounts(instruction: str) -> str:
    """An instruction without its ``--mount=`` flags (step names may omit them)."""
    return " ".join(p for p in instruction.split() if not p.startswith("--mount="))


@dataclass(frozen=True)
class BuildResult:
    """The outcome of one build, written into the build record."""

    image_id: str
    counts: StepCounts
    seconds: float


def run_build(daemon: ContainerDaemon, files: dict[str, bytes], plan: BuildPlan,
              options: BuildOptions, log: IO[str], out: IO[str] | None = None) -> BuildResult:
    """Pull bases, build, tag; stream progress; raise a clear error on any failure."""
    from dockergen.build.daemon import context_tar

    renderer = make_renderer(options.progress, out)
    for ref in plan.pulls:
        if options.pull or daemon.image_id(ref) is None:
            renderer.message(f"pulling {ref}")
            daemon.pull(ref)
    dockerfile = files["Dockerfile"].decode()
    tracker = BuildTracker()
    started = time.monotonic()
    timed_out = threading.Event()
    timer = _deadline(daemon, options.timeout, timed_out)
    buildkit = plan.builder == "buildkit"
    # BuildKit: the epoch and the timestamp rewrite make the digest reproducible
    exporter = (reproducible.exporter(layers.EXPORTER_ATTRS[plan.compression],
                                      daemon.image_store()) if buildkit else None)
    try:
        stream = daemon.build(context_tar(files), buildkit=buildkit, tag=plan.tags[0],
                              buildargs=reproducible.build_args(plan.build_args)
                              if buildkit else plan.build_args,
                              target=options.stage, nocache=options.no_cache,
                              platform=options.platform, network=options.network,
                              exporter=exporter)
        image_id = _follow(stream, buildkit, dockerfile, tracker, renderer, log)
    except KeyboardInterrupt:
        daemon.cancel()
        raise BuildInterrupted("interrupted: the build was cancelled; no image was tagged"
                               ) from None
    except DockergenError:
        raise
    except Exception as exc:  # the connection dropped: our timeout, or the daemon died
        if timed_out.is_set():
            raise BuildTimeout(f"the build ran past --timeout {options.timeout:g}s and was "
                               "cancelled") from None
        raise BuildFailed(f"the build stream broke off: {redact(str(exc))}") from None
    finally:
        if timer:
            timer.cancel()
        renderer.close()
    if timed_out.is_set():
        raise BuildTimeout(f"the build ran past --timeout {options.timeout:g}s and was "
                           "cancelled")
    if image_id is None:
        raise BuildFailed("the Docker engine finished without reporting an image id; see "
                          f"{getattr(log, 'name', 'the build log')} for its last messages")
    _tag(daemon, image_id, plan.tags)
    return BuildResult(image_id, tracker.summary(), round(time.monotonic() - started, 3))


def _deadline(daemon: ContainerDaemon, timeout: float | None, timed_out: threading.Event
              ) -> threading.Timer | None:
    """Cancel the build when ``timeout`` seconds pass (setting ``timed_out``); None: no limit."""
    if not timeout:
        return None

    def expire() -> None:
        timed_out.set()
        daemon.cancel()
    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    return timer


def _follow(stream: Iterable[dict[str, Any]], buildkit: bool, dockerfile: str,
            tracker: BuildTracker, renderer: PlainRenderer, log: IO[str]) -> str | None:
    """Log and show the engine's build messages; the image id it reports, if any. A failed
    step raises :class:`BuildFailed` with its Dockerfile line and last output."""
    classic_step = ""
    classic_tail: list[str] = []
    image_id = None
    for message in stream:
        if message.get("id") == "moby.buildkit.trace":
            update = decode_status(message["aux"])
            events = tracker.apply(update)
            log.write(_log_line(message, update, events))
            for kind, step, line in events:
                renderer.event(kind, step, line)
            continue
        log.write(_log_line(message))
        if message.get("id") == "moby.image.id" or (
                isinstance(message.get("aux"), dict) and "ID" in message["aux"]):
            image_id = message["aux"]["ID"]
        elif "stream" in message:
            text = redact(message["stream"])
            for line in text.splitlines():
                if line.startswith("Step "):
                    classic_step = line
                classic_tail.append(line)
            if not buildkit and text.strip():
                renderer.message(text.rstrip("\n"))  # the classic builder's own lines
        elif "error" in message or "errorDetail" in message:
            tracker.flush()  # the failing step's last output, even without a newline
            raise _failure(message, tracker, dockerfile, classic_step, classic_tail)
    for kind, step, line in tracker.flush():  # output that never got its newline
        renderer.event(kind, step, line)
    return image_id


def _tag(daemon: ContainerDaemon, image_id: str, tags: list[str]) -> None:
    """Give the built image its other tags; on any failure remove every tag this build
    created (the first came with the build), so none of ours is left half-made."""
    created: list[str] = []
    try:
        created.append(tags[0])
        for tag in tags[1:]:
            daemon.tag(image_id, tag)
            created.append(tag)
    except KeyboardInterrupt:
        for tag in created:
            daemon.remove_image(tag)
        raise BuildInterrupted("interrupted: removed the tags this build created") from None
    except DockergenError as exc:  # a tag the daemon refused: leave none of ours behind
        for tag in created:
            daemon.remove_image(tag)
        raise BuildFailed(f"the image was built ({image_id}) but could not be tagged: {exc}; "
                          "removed the tags this build created") from None


def _log_line(message: dict[str, Any], update: StatusUpdate | None = None,
              events: list[tuple[str, Any, str | None]] | None = None) -> str:
    """One build.log line, redacted like every other output.

    BuildKit's trace messages carry their step output base64-encoded in protobuf, where a
    plain redaction would not see a token; they are logged as the tracker's whole output
    lines (a token cut between two chunks is whole, and redacted, there).
    """
    if update is not None:
        message = {"id": message["id"], "aux": {
            "vertexes": [{"digest": v.digest, "name": v.name, "cached": v.cached,
                          "started": v.started, "completed": v.completed, "error": v.error}
                         for v in update.vertexes],
            "lines": [{"vertex": step.digest, "line": line} for kind, step, line in events or []
                      if kind == "log"],
            "warnings": update.warnings}}
    return redact(json.dumps(message, sort_keys=True, ensure_ascii=False)) + "\n"


def _failure(message: dict[str, Any], tracker: BuildTracker, dockerfile: str,
             classic_step: str, classic_tail: list[str]) -> BuildFailed:
    detail = redact(str(message.get("error") or message.get("errorDetail", {}).get("message")))
    step = tracker.failed
    if step is not None:
        line = dockerfile_line(dockerfile, step.name)
        where = f"Dockerfile:{line}: " if line else ""
        tail = step.logs[-LOG_TAIL:] or list(tracker.log_tail)[-LOG_TAIL:]
        name = " ".join(step.name.split())
        name = name if len(name) <= 240 else name[:237] + "..."
        text = f"{where}step #{step.number} {name} failed: {_short(step.error or detail)}"
    else:
        tail = classic_tail[-LOG_TAIL:]
        text = f"{classic_step or 'build'} failed: {detail}"
    if tail:
        text += f"\n--- last {len(tail)} log lines ---\n" + "\n".join(tail)
    return BuildFailed(text)


def _short(error: str) -> str:
    """BuildKit repeats the whole command in its error; keep what matters."""
    m = re.search(r"(exit code: \d+)\s*$", error)
    if m and ("executor failed running" in error or "did not complete successfully" in error):
        return m.group(1)
    return redact(error)
