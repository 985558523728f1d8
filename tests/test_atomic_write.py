"""Writing a build context is interrupt-safe: the old or the new folder always survives."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from dockergen.errors import OutputError
from dockergen.render import LOCK_FILE, MANIFEST, write_context

OLD = {"Dockerfile": b"FROM old\n", LOCK_FILE: b"{}\n"}
NEW = {"Dockerfile": b"FROM new\n", LOCK_FILE: b"{}\n", "extra.txt": b"new\n"}


def _contents(folder: Path) -> dict[str, bytes]:
    """The files written, without the manifest of them (its own tests are below)."""
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.name != MANIFEST}


def _replace_hook(monkeypatch: pytest.MonkeyPatch,
                  on_call: Callable[[int, Callable[[str, str], None], str, str], None]) -> None:
    real = os.replace
    calls = [0]

    def fake(src: str, dst: str) -> None:
        calls[0] += 1
        on_call(calls[0], real, src, dst)

    monkeypatch.setattr(os, "replace", fake)


def test_interrupt_between_the_renames_keeps_the_old_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C after `out -> .out.old` and before `staging -> out` (issue 7: both were lost)."""
    out = tmp_path / "out"
    write_context(out, OLD)

    def on_call(n: int, real: Callable[[str, str], None], src: str, dst: str) -> None:
        if n == 2:  # the old folder is already moved aside
            raise KeyboardInterrupt
        real(src, dst)

    _replace_hook(monkeypatch, on_call)
    with pytest.raises(KeyboardInterrupt):
        write_context(out, NEW)
    monkeypatch.undo()
    assert _contents(out) == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging or .old left


def test_real_sigint_between_the_renames_is_delivered_after_the_swap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real SIGINT arriving mid-swap waits until the new folder is in place."""
    out = tmp_path / "out"
    write_context(out, OLD)

    def on_call(n: int, real: Callable[[str, str], None], src: str, dst: str) -> None:
        real(src, dst)
        if n == 1:
            signal.raise_signal(signal.SIGINT)

    _replace_hook(monkeypatch, on_call)
    with pytest.raises(KeyboardInterrupt):
        write_context(out, NEW)
    monkeypatch.undo()
    assert _contents(out) == NEW
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_failed_second_rename_restores_the_old_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    write_context(out, OLD)

    def on_call(n: int, real: Callable[[str, str], None], src: str, dst: str) -> None:
        if n == 2:
            raise OSError(28, "No space left on device")
        real(src, dst)

    _replace_hook(monkeypatch, on_call)
    with pytest.raises(OutputError, match="No space left on device; nothing was changed"):
        write_context(out, NEW)
    monkeypatch.undo()
    assert _contents(out) == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


# --- one generated file (schema, bake files): dockergen.atomic.write_file ------------------
@pytest.mark.parametrize("command", [
    ("schema", "-o", "{out}"),
    ("render", "h100-fp8", "-o", "{out}"),  # a folder under a file
])
def test_an_output_path_under_a_file_is_exit_4_without_a_traceback(
        command: tuple[str, ...], tmp_path: Path) -> None:
    from tests.conftest import run_cli

    blocker = tmp_path / "afile"
    blocker.write_text("mine\n")
    args = [a.replace("{out}", str(blocker / "sub" / "x.json")) for a in command]
    result = run_cli(*args)
    assert result.rc == 4, result.err
    assert "Traceback" not in result.err
    assert result.out == ""
    assert blocker.read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_write_file_replaces_whole_files_and_leaves_no_temporary(tmp_path: Path) -> None:
    from dockergen.atomic import write_file

    target = tmp_path / "a" / "b.json"
    write_file(target, "one\n")
    write_file(target, "two\n")
    assert target.read_text() == "two\n"
    assert oct(target.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in target.parent.iterdir()] == ["b.json"]
    with pytest.raises(OutputError, match="is a folder"):
        write_file(tmp_path / "a", "x")


def test_write_file_keeps_the_old_file_when_the_rename_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dockergen.atomic import write_file

    target = tmp_path / "b.json"
    target.write_text("old\n")

    def refuse(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OutputError, match="No space left on device; nothing was changed"):
        write_file(target, "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["b.json"]


# --- a folder is replaced only while it holds nothing but what dockergen wrote -----------
def _render(out: Path) -> object:
    from tests.conftest import run_cli

    return run_cli("render", "-q", "h100-fp8", "-o", str(out))


def test_a_rerender_never_deletes_what_the_user_added(tmp_path: Path) -> None:
    out = tmp_path / "ctx"
    assert _render(out).rc == 0  # type: ignore[attr-defined]
    (out / "my-notes.txt").write_text("mine\n")
    (out / "models").mkdir()
    (out / "models" / "weights.bin").write_bytes(b"\0")
    again = _render(out)
    assert again.rc == 4, again.err  # type: ignore[attr-defined]
    assert "holds files dockergen did not write (models/weights.bin, my-notes.txt)" \
        in again.err  # type: ignore[attr-defined]
    assert (out / "my-notes.txt").read_text() == "mine\n"
    (out / "my-notes.txt").unlink()
    (out / "models" / "weights.bin").unlink()
    (out / "models").rmdir()  # an empty folder of the user's is kept safe too
    assert _render(out).rc == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("marker", ["", "{}", "not json", '{"dockergen": "0.1.0"}'])
def test_a_file_named_like_the_lock_does_not_make_a_folder_ours(marker: str,
                                                                tmp_path: Path) -> None:
    out = tmp_path / "fk"
    out.mkdir()
    (out / "dockergen.lock.json").write_text(marker)
    (out / "important.txt").write_text("precious\n")
    result = _render(out)
    assert result.rc == 4, result.err  # type: ignore[attr-defined]
    assert "was not written by dockergen" in result.err  # type: ignore[attr-defined]
    assert (out / "important.txt").read_text() == "precious\n"


def test_a_folder_written_before_the_manifest_is_still_ours(tmp_path: Path) -> None:
    """Contexts of dockergen 0.1.0 have a lock file and no manifest (examples/ had)."""
    out = tmp_path / "ctx"
    assert _render(out).rc == 0  # type: ignore[attr-defined]
    (out / ".dockergen-files").unlink()
    assert _render(out).rc == 0  # type: ignore[attr-defined]
    assert (out / ".dockergen-files").is_file()


def test_the_manifest_lists_what_build_writes_later(tmp_path: Path) -> None:
    from dockergen.render import MANIFEST, write_context

    write_context(tmp_path / "b", {"Dockerfile": b"FROM x\n"}, later=("build.log",))
    (tmp_path / "b" / "build.log").write_text("log\n")
    write_context(tmp_path / "b", {"Dockerfile": b"FROM y\n"}, later=("build.log",))
    listed = (tmp_path / "b" / MANIFEST).read_text().splitlines()[1:]
    assert listed == [MANIFEST, "Dockerfile", "build.log"]
