"""BuildKit status decoding, step tracking and failure mapping (no daemon needed).

The protobuf messages here are encoded by hand from the field numbers in
moby/buildkit's control.proto; the daemon tests decode the real stream.
"""

from __future__ import annotations

import base64
import io
import json
import re
import tarfile

from dockergen.build.daemon import context_tar, registry_of, split_reference
from dockergen.build.progress import BuildTracker, JsonRenderer, PlainRenderer, decode_status
from dockergen.build.run import dockerfile_line


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, value: bytes | int) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _ts(seconds: int, nanos: int = 0) -> bytes:
    return _field(1, seconds) + _field(2, nanos)


def _vertex(digest: str, name: str, *, cached: bool = False, started: int | None = None,
            completed: int | None = None, error: str = "") -> bytes:
    body = _field(1, digest.encode()) + _field(3, name.encode())
    if cached:
        body += _field(4, 1)
    if started is not None:
        body += _field(5, _ts(started))
    if completed is not None:
        body += _field(6, _ts(completed, 500_000_000))
    if error:
        body += _field(7, error.encode())
    return _field(1, body)


def _log(digest: str, msg: str) -> bytes:
    return _field(3, _field(1, digest.encode()) + _field(3, 1) + _field(4, msg.encode()))


def _aux(*parts: bytes) -> str:
    return base64.b64encode(b"".join(parts)).decode()


def test_decode_vertices_logs_and_times() -> None:
    update = decode_status(_aux(_vertex("sha256:a", "[engine 1/2] RUN x", started=10,
                                        completed=12), _log("sha256:a", "hello\nworld\n")))
    (v,) = update.vertexes
    assert (v.digest, v.name, v.cached, v.started, v.completed) == (
        "sha256:a", "[engine 1/2] RUN x", False, 10.0, 12.5)
    assert update.logs[0].msg == b"hello\nworld\n"


def test_tracker_events_summary_and_failure() -> None:
    tracker = BuildTracker()
    out = io.StringIO()
    plain = PlainRenderer(out)
    for aux in (
        _aux(_vertex("d1", "[build-base 1/2] FROM img", cached=True)),
        _aux(_vertex("d2", "[flash-attn 1/3] RUN make", started=1)),
        _aux(_log("d2", "compiling hf_abcdefghijklmnop\n")),
        _aux(_vertex("d2", "[flash-attn 1/3] RUN make", started=1, completed=4)),
        _aux(_vertex("d3", "[engine 1/2] RUN pip", started=5, completed=6, error="exit code: 1")),
    ):
        for kind, step, line in tracker.apply(decode_status(aux)):
            plain.event(kind, step, line)
    assert out.getvalue().splitlines() == [
        "#1 [build-base 1/2] FROM img", "#1 CACHED", "#2 [flash-attn 1/3] RUN make",
        "#2 compiling <redacted>", "#2 DONE 3.5s", "#3 ERROR: exit code: 1"]
    assert tracker.failed is not None and tracker.failed.number == 3
    summary = tracker.summary()
    assert summary.cached_steps == 1 and summary.steps == 3
    assert summary.stage_seconds == {"engine": 1.5, "flash-attn": 3.5}
    assert summary.cached_by_stage == {"build-base": 1, "engine": 0, "flash-attn": 0}


def test_json_renderer_emits_one_object_per_event() -> None:
    tracker, out = BuildTracker(), io.StringIO()
    renderer = JsonRenderer(out)
    for kind, step, line in tracker.apply(decode_status(_aux(
            _vertex("d", "[runtime 2/3] RUN x", started=1, completed=2)))):
        renderer.event(kind, step, line)
    assert json.loads(out.getvalue()) == {"event": "done", "name": "[runtime 2/3] RUN x",
                                          "seconds": 1.5, "stage": "runtime", "step": 1}


DOCKERFILE = """\
ARG BUILD_IMAGE=reg.example.com/cuda:13.0.2-devel
ARG RUNTIME_IMAGE=reg.example.com/cuda:13.0.2-runtime
FROM ${BUILD_IMAGE} AS build-base
RUN --mount=type=cache,target=/root/.cache/uv uv pip install \\
      torch==2.14.0
FROM build-base AS engine
RUN echo engine
FROM ${RUNTIME_IMAGE} AS runtime
RUN echo engine
"""


def test_failing_step_maps_to_its_dockerfile_line() -> None:
    assert dockerfile_line(DOCKERFILE, "[build-base 2/2] RUN --mount=type=cache,target=/root/"
                                       ".cache/uv uv pip install       torch==2.14.0") == 4
    assert dockerfile_line(DOCKERFILE, "[engine 2/2] RUN echo engine") == 7
    assert dockerfile_line(DOCKERFILE, "[runtime 2/2] RUN echo engine") == 9
    assert dockerfile_line(DOCKERFILE, "[internal] load metadata") is None


def test_references_and_registries() -> None:
    assert split_reference("localhost:5000/a/b:tag") == ("localhost:5000/a/b", "tag")
    assert split_reference("localhost:5000/a/b") == ("localhost:5000/a/b", "latest")
    assert registry_of("localhost:5001/x/y:1") == "localhost:5001"
    assert registry_of("nvidia/cuda:13.0.2-devel-ubuntu22.04") == "docker.io"
    assert registry_of("nvcr.io/nvidia/pytorch:25.10-py3") == "nvcr.io"


def test_context_tar_is_reproducible() -> None:
    files = {"Dockerfile": b"FROM scratch\n", "certs/extra-0.crt": b"x"}
    first, second = context_tar(files), context_tar(dict(reversed(list(files.items()))))
    assert first == second
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        assert tar.getnames() == ["certs", "Dockerfile", "certs/extra-0.crt"]
        assert all(m.mtime == 0 and m.uid == 0 for m in tar.getmembers())


def test_tty_renderer_redraws_one_line_per_step() -> None:
    from dockergen.build.progress import TtyRenderer

    tracker, out = BuildTracker(), io.StringIO()
    tty = TtyRenderer(out)
    for aux in (_aux(_vertex("a", "[build-base 1/2] FROM img", cached=True)),
                _aux(_vertex("b", "[engine 1/1] RUN pip", started=1)),
                _aux(_log("b", "Collecting vllm\n")),
                _aux(_vertex("b", "[engine 1/1] RUN pip", started=1, completed=3))):
        for kind, step, line in tracker.apply(decode_status(aux)):
            tty.event(kind, step, line)
    tty.close()
    frames = out.getvalue().split("\x1b[2K")
    assert re.search(r"\x1b\[\d+F", out.getvalue())  # cursor moved up to redraw in place
    last = [f for f in frames if "#2" in f][-1]
    assert "DONE" in last and "2.5s" in last
    assert any("Collecting vllm" in f for f in frames)
