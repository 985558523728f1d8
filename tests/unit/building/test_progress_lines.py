"""`--progress plain` prints whole lines although BuildKit sends output in arbitrary chunks."""

from __future__ import annotations

import io
import uuid

import pytest

from dockergen.build.daemon import connect, context_tar
from dockergen.build.progress import BuildTracker, PlainRenderer, decode_status
from tests.conftest import _engine_or_skip
from tests.unit.building.test_progress import _aux, _field, _log, _vertex


def _plain(tracker: BuildTracker, *updates: str) -> str:
    out = io.StringIO()
    renderer = PlainRenderer(out)
    for aux in updates:
        for kind, step, line in tracker.apply(decode_status(aux)):
            renderer.event(kind, step, line)
    for kind, step, line in tracker.flush():
        renderer.event(kind, step, line)
    return out.getvalue()


def test_a_line_cut_between_chunks_is_printed_whole() -> None:
    """Before the fix: `+ einops==0.` / `8.2` was printed as two lines."""
    tracker = BuildTracker()
    text = _plain(tracker,
                  _aux(_vertex("sha256:a", "[flash-attn 1/3] RUN uv pip install", started=1)),
                  _aux(_log("sha256:a", " + einops==0.")),
                  _aux(_log("sha256:a", "8.2\n + ninja==1.13.2\n + pack")),
                  _aux(_log("sha256:a", "aging==25.0\n")),
                  _aux(_vertex("sha256:a", "[flash-attn 1/3] RUN uv pip install", started=1,
                               completed=3)))
    assert text.splitlines() == [
        "#1 [flash-attn 1/3] RUN uv pip install",
        "#1  + einops==0.8.2", "#1  + ninja==1.13.2", "#1  + packaging==25.0",
        "#1 DONE 2.5s"]


def test_a_character_cut_between_chunks_is_decoded_whole() -> None:
    tracker = BuildTracker()
    word = "größe\n".encode()
    first, second = word[:3], word[3:]  # splits the two bytes of "ö"

    def chunk(data: bytes) -> str:  # a VertexLog with raw bytes (_log takes text)
        return _aux(_field(3, _field(1, b"sha256:a") + _field(3, 1) + _field(4, data)))

    text = _plain(tracker, _aux(_vertex("sha256:a", "[x 1/1] RUN echo", started=1)),
                  chunk(first), chunk(second))
    assert "#1 größe" in text.splitlines()


def test_output_without_a_final_newline_is_printed_when_the_step_ends() -> None:
    tracker = BuildTracker()
    text = _plain(tracker, _aux(_vertex("sha256:a", "[x 1/1] RUN printf", started=1)),
                  _aux(_log("sha256:a", "no newline at the end")),
                  _aux(_vertex("sha256:a", "[x 1/1] RUN printf", started=1, completed=2)))
    assert text.splitlines()[1:] == ["#1 no newline at the end", "#1 DONE 1.5s"]


def test_a_token_cut_between_chunks_is_still_redacted() -> None:
    tracker = BuildTracker()
    text = _plain(tracker, _aux(_vertex("sha256:a", "[x 1/1] RUN env", started=1)),
                  _aux(_log("sha256:a", "HF=hf_abcd")), _aux(_log("sha256:a", "efgh12345\n")))
    assert "#1 HF=<redacted>" in text.splitlines()
    assert "efgh12345" not in text


@pytest.mark.daemon
def test_real_buildkit_chunks_are_joined() -> None:
    """A real RUN step that prints half a line, waits, then the rest."""
    _engine_or_skip()
    marker = uuid.uuid4().hex[:8]
    dockerfile = (f"FROM local/debian:bookworm\n"
                  f"RUN printf 'first-half-{marker}'; sleep 2; printf 'second-half\\n'\n")
    engine = connect()
    tracker = BuildTracker()
    out = io.StringIO()
    renderer = PlainRenderer(out)
    chunks = 0
    for message in engine.build(context_tar({"Dockerfile": dockerfile.encode()}), buildkit=True,
                                tag=None, buildargs={}, target=None, nocache=True,
                                platform=None):
        if message.get("id") == "moby.buildkit.trace":
            update = decode_status(message["aux"])
            chunks += sum(1 for log in update.logs if b"half" in log.msg)
            for kind, step, line in tracker.apply(update):
                renderer.event(kind, step, line)
    assert chunks >= 2, "BuildKit sent the line in one piece; the test proves nothing"
    lines = out.getvalue().splitlines()
    assert any(line.endswith(f"first-half-{marker}second-half") for line in lines), lines
