"""Writing a build context is interrupt-safe: the old or the new folder always survives."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from dockergen.atomic import MANIFEST
from dockergen.errors import OutputError
from dockergen.render import LOCK_FILE, write_context
from tests.conftest import Run, run_cli

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
def _render(out: Path) -> Run:
    return run_cli("render", "-q", "h100-fp8", "-o", str(out))


def test_a_rerender_never_deletes_what_the_user_added(tmp_path: Path) -> None:
    out = tmp_path / "ctx"
    assert _render(out).rc == 0
    (out / "my-notes.txt").write_text("mine\n")
    (out / "models").mkdir()
    (out / "models" / "weights.bin").write_bytes(b"\0")
    again = _render(out)
    assert again.rc == 4, again.err
    assert "holds files dockergen did not write (models/weights.bin, my-notes.txt)" \
        in again.err
    assert (out / "my-notes.txt").read_text() == "mine\n"
    (out / "my-notes.txt").unlink()
    (out / "models" / "weights.bin").unlink()
    (out / "models").rmdir()  # an empty folder of the user's is kept safe too
    assert _render(out).rc == 0


@pytest.mark.parametrize("marker", ["", "{}", "not json", '{"dockergen": "0.1.0"}'])
def test_a_file_named_like_the_lock_does_not_make_a_folder_ours(marker: str,
                                                                tmp_path: Path) -> None:
    out = tmp_path / "fk"
    out.mkdir()
    (out / "dockergen.lock.json").write_text(marker)
    (out / "important.txt").write_text("precious\n")
    result = _render(out)
    assert result.rc == 4, result.err
    assert "was not written by dockergen" in result.err
    assert (out / "important.txt").read_text() == "precious\n"


def test_a_folder_written_before_the_manifest_is_still_ours(tmp_path: Path) -> None:
    """Contexts of dockergen 0.1.0 have a lock file and no manifest (examples/ had)."""
    out = tmp_path / "ctx"
    assert _render(out).rc == 0
    (out / ".dockergen-files").unlink()
    assert _render(out).rc == 0
    assert (out / ".dockergen-files").is_file()


def test_the_manifest_lists_what_build_writes_later(tmp_path: Path) -> None:
    from dockergen.render import write_context

    write_context(tmp_path / "b", {"Dockerfile": b"FROM x\n"}, later=("build.log",))
    (tmp_path / "b" / "build.log").write_text("log\n")
    write_context(tmp_path / "b", {"Dockerfile": b"FROM y\n"}, later=("build.log",))
    listed = (tmp_path / "b" / MANIFEST).read_text().splitlines()[1:]
    assert listed == [MANIFEST, "Dockerfile", "build.log"]


# --- a matrix / --all: every variant and the bake file change together --------------------
def _matrix(out: Path, *sets: str) -> Run:
    return run_cli("render", "-q", "fleet", "-o", str(out), *[a for s in sets
                                                                for a in ("--set", s)])


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_a_matrix_rerender_that_fails_part_way_changes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It printed `wrote` for three variants, then failed on the fourth: mixed old and new."""
    from dockergen.fleet.project import collect
    from dockergen.render import write_contexts

    out = tmp_path / "m"
    assert _matrix(out).rc == 0
    before = _snapshot(out)
    fleet = collect([Path("fleet")], ("serving.max_model_len=6144",), "buildkit", None)
    contexts = {t.name: t.files for t in fleet.targets}
    assert all(b'"6144"' in f["Dockerfile"] for f in contexts.values())  # all would change
    real, calls = os.replace, [0]

    def fail_on_the_fourth_swap(src: str, dst: str) -> None:
        calls[0] += 1
        if calls[0] == 7:  # each swap is two renames: old aside, new in
            raise OSError(30, "Read-only file system")
        real(src, dst)

    monkeypatch.setattr(os, "replace", fail_on_the_fourth_swap)
    with pytest.raises(OutputError, match="Read-only file system; nothing was changed"):
        write_contexts(out, contexts, {"docker-bake.hcl": b"# Generated by dockergen\n"})
    monkeypatch.setattr(os, "replace", real)
    assert _snapshot(out) == before
    assert sorted(p.name for p in out.iterdir()) == sorted(
        p.name for p in out.iterdir() if not p.name.startswith("."))  # no leftovers


def test_a_real_sigint_during_a_matrix_render_leaves_old_or_new(tmp_path: Path) -> None:
    """The swaps run with SIGINT held: the folder is all old or all new, never half."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    out = tmp_path / "m"
    assert _matrix(out).rc == 0
    old = _snapshot(out)
    for delay in (0.3, 0.5, 0.7, 0.9):
        proc = subprocess.Popen([sys.executable, "-m", "dockergen", "render", "-q", "fleet",
                                 "-o", str(out), "--set", "serving.max_model_len=6144"],
                                cwd=ROOT, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
        now = _snapshot(out)
        variants = sorted({k.split("/")[0] for k in now if "/" in k})
        new = [b'"6144"' in now[f"{v}/Dockerfile"] for v in variants]
        assert now == old or all(new), (delay, new)  # all old, or every variant new
        assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]
        assert not [p for p in out.iterdir() if p.name.startswith(".") and ".old-" in p.name]


def test_variants_a_rerender_no_longer_writes_go_with_it(tmp_path: Path) -> None:
    out = tmp_path / "m"
    assert _matrix(out).rc == 0
    (out / "fleet-l40s-bf16" / "notes.txt").write_text("mine\n")  # not provably ours now
    result = _matrix(out, "matrix.exclude=[{gpu.targets: a100}, {gpu.targets: l40s}]")
    assert result.rc == 0, result.err
    # dockergen's variants the bake file no longer lists are gone; the one holding the
    # user's notes is not provably dockergen's and stays
    assert sorted(p.name for p in out.iterdir()) == [
        "docker-bake.hcl", "fleet-h100-bf16", "fleet-h100-fp8", "fleet-l40s-bf16"]
    assert (out / "fleet-l40s-bf16" / "notes.txt").read_text() == "mine\n"
    assert 'context = "fleet-l40s-bf16"' not in (out / "docker-bake.hcl").read_text()
