"""Hostile files: every command that reads or writes a file, against what is not a file.

Each case puts one hostile node (a device made with mknod, a FIFO, links to them, a link
loop, a dangling link, a folder, a 10 GiB sparse file, an unreadable file) where a command
reads or writes, runs the real CLI (``dockergen.cli.main``) in a forked process under a
2 GiB address-space limit and a timeout, and asserts: the documented exit code, no
traceback, the node and every other file under the case's folder as they were, and nothing
new there. A regression that reads ``/dev/zero`` dies at the limit, one that opens a FIFO
for reading blocks until the timeout: both fail the case instead of eating the machine.
Nothing here touches the machine's ``/dev``: the device nodes are made under ``tmp_path``.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import ROOT, Run
from tests.support.bad_profile_cases import VALID

LIMIT_AS = 2 << 30  # bytes of address space a case may use
TIMEOUT_S = 60


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_AS, LIMIT_AS))


def run_limited(args: list[str], cwd: Path, prepare: Callable[[], None] | None = None
                ) -> Run:
    """``dockergen ARGS`` in a forked child of this process (dockergen is imported once,
    so a case costs milliseconds, not an interpreter start), under the limits above.
    ``prepare`` runs in the child first (a fault to inject)."""
    import dockergen.cli
    import dockergen.files.atomic

    out, err = cwd.parent / f".{cwd.name}.out", cwd.parent / f".{cwd.name}.err"
    pid = os.fork()
    if pid == 0:  # the child: becomes `dockergen ARGS`, never returns into pytest
        code = 1
        try:
            _limit()
            os.chdir(cwd)
            sys.stdout = open(out, "w", encoding="utf-8")  # noqa: SIM115 - the child's own
            sys.stderr = open(err, "w", encoding="utf-8")  # noqa: SIM115
            sys.argv = ["dockergen", *args]
            dockergen.files.atomic._COMMITTED.clear()  # a fresh process: nothing written yet
            if prepare is not None:
                prepare()
            dockergen.cli.main(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - a bug: its traceback is the evidence
            import traceback

            traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):  # the exit below must happen
                    stream.flush()
            os._exit(code)
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"dockergen {' '.join(args)} still ran after {TIMEOUT_S} s (blocked "
                        "on a FIFO, or reading without end)")
        time.sleep(0.02)
    rc = os.waitstatus_to_exitcode(status)
    result = Run(rc, out.read_text(errors="replace"), err.read_text(errors="replace"))
    out.unlink()
    err.unlink()
    return result


@pytest.fixture(scope="module", autouse=True)
def _warm(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Import and prime in this process what every case needs: each forked case then
    costs its own work, not the imports (the machine is small and shared)."""
    import dockergen.outputs.deploy
    import dockergen.outputs.observe.generate
    import dockergen.outputs.plan
    import dockergen.outputs.schema  # noqa: F401
    from dockergen.pipeline import resolution

    profile = tmp_path_factory.mktemp("warm") / "p.yaml"
    profile.write_text(VALID)
    resolution(profile).files()


# --- the hostile nodes --------------------------------------------------------------------
def _chardev(path: Path, minor: int) -> None:
    """A character device like /dev/zero (1,5), /dev/null (1,3), /dev/full (1,7)."""
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))


def _target(path: Path) -> Path:
    return path.with_name(f".target-of-{path.name}")


MAKERS: dict[str, Callable[[Path], None]] = {
    "zero-device": lambda p: _chardev(p, 5),
    "null-device": lambda p: _chardev(p, 3),
    "full-device": lambda p: _chardev(p, 7),
    "fifo": lambda p: os.mkfifo(p),
    "link-to-zero": lambda p: (_chardev(_target(p), 5), os.symlink(_target(p).name, p)),
    "link-to-fifo": lambda p: (os.mkfifo(_target(p)), os.symlink(_target(p).name, p)),
    "link-loop": lambda p: os.symlink(p.name, p),
    "dangling-link": lambda p: os.symlink("nothing-here", p),
    "folder": lambda p: (p.mkdir(), (p / "mine.txt").write_text("mine\n")),
    "huge-sparse": lambda p: os.truncate(_touch(p), 10 << 30),
    "unreadable": lambda p: (_touch(p).write_text("precious: [\n"), p.chmod(0)),
}
READ_NODES = ["zero-device", "fifo", "link-to-zero", "link-to-fifo", "link-loop",
              "dangling-link", "folder", "huge-sparse", "unreadable"]
WRITE_NODES = ["null-device", "full-device", "fifo", "link-to-zero", "link-loop",
               "dangling-link", "folder", "huge-sparse", "unreadable"]


def _touch(path: Path) -> Path:
    path.touch()
    return path


def snapshot(folder: Path) -> dict[str, tuple[object, ...]]:
    """Every entry below ``folder`` as it is, links not followed and nothing but small
    regular files read (a device or FIFO is never opened)."""
    seen: dict[str, tuple[object, ...]] = {}
    for root, dirs, files in os.walk(folder):
        for name in [*dirs, *files]:
            path = Path(root) / name
            st = os.lstat(path)
            entry: tuple[object, ...] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode),
                                         st.st_rdev, st.st_size, st.st_ino)
            if stat.S_ISLNK(st.st_mode):
                entry += (os.readlink(path),)
            elif stat.S_ISREG(st.st_mode) and st.st_size < 1 << 20:
                entry += (path.read_bytes(),)
            seen[str(path.relative_to(folder))] = entry
    return seen


# --- what reads: (case, files beside the node, where the node goes, the command) ----------
def _profile(**extra: object) -> str:
    """The stand-alone valid profile with top-level/section fields added as YAML."""
    text = VALID
    for key, value in extra.items():
        section, _, field = key.partition("__")
        line = f"  {field}: {json.dumps(value)}\n"
        text = text.replace(f"{section}:\n", f"{section}:\n{line}", 1) if field else (
            text + f"{section}: {json.dumps(value)}\n")
    return text


def _model_config() -> str:
    from dockergen.outputs.plan import builtin_models

    return json.dumps(builtin_models()["llama-3-8b"]["config"])


READS: list[tuple[str, dict[str, str], str, list[str], int]] = [
    # (case, files to write first, the node's path, the command, exit code)
    ("profile", {}, "p.yaml", ["validate", "p.yaml"], 2),
    ("profile-render", {}, "p.yaml", ["render", "p.yaml"], 2),
    ("profile-explain", {}, "p.yaml", ["explain", "p.yaml"], 2),
    # every other command that takes a profile reads it through the same reader
    ("profile-deploy", {}, "p.yaml", ["deploy", "p.yaml", "--format", "compose"], 2),
    ("profile-plan", {}, "p.yaml", ["plan", "p.yaml"], 2),
    ("profile-observe", {}, "p.yaml", ["observe", "p.yaml", "-o", "obs"], 2),
    ("profile-build", {}, "p.yaml", ["build", "--dry-run", "p.yaml"], 2),
    ("profile-lock", {}, "p.yaml", ["lock", "p.yaml"], 2),
    ("profile-lock-python", {}, "p.yaml", ["lock", "--python", "p.yaml"], 2),
    # the profile is read before any index is asked (this port answers nothing)
    ("profile-outdated", {}, "p.yaml",
     ["outdated", "p.yaml", "--index", "http://127.0.0.1:9/simple"], 2),
    ("extends", {"p.yaml": "extends: hostile\nname: t\n"}, "hostile.yaml",
     ["validate", "p.yaml"], 2),
    ("knowledge", {"p.yaml": _profile(knowledge=["k.yaml"])}, "k.yaml",
     ["validate", "-q", "p.yaml"], 2),
    ("ca-certificate", {"p.yaml": _profile(build__ca_certificates=["c.pem"])}, "c.pem",
     ["render", "-q", "p.yaml"], 2),
    ("hf-config", {"p.yaml": _profile(serving__hf_config="cfg.json")}, "cfg.json",
     ["validate", "-q", "p.yaml"], 2),
    ("model-config", {"p.yaml": VALID}, "cfg.json",
     ["plan", "p.yaml", "--model-config", "cfg.json"], 2),
    ("model-dir-config", {"p.yaml": VALID}, "md/config.json",
     ["plan", "p.yaml", "--model-dir", "md"], 2),
    ("safetensors-header", {"p.yaml": VALID, "md/config.json": "{model}"},
     "md/model.safetensors", ["plan", "p.yaml", "--model-dir", "md"], 2),
    ("build-record", {"p.yaml": VALID}, "rec.json",
     ["deploy", "-q", "p.yaml", "--format", "compose", "--record", "rec.json"], 2),
    ("base-image-lock", {"p.yaml": VALID}, "p.lock.json", ["render", "-q", "p.yaml"], 2),
    ("base-image-lock-check", {"p.yaml": VALID}, "p.lock.json",
     ["lock", "--check", "p.yaml"], 2),
    ("python-lock", {"p.yaml": VALID}, "p.python.lock", ["render", "-q", "p.yaml"], 2),
    ("python-lock-check", {"p.yaml": VALID}, "p.python.lock",
     ["lock", "--python", "--check", "p.yaml"], 2),
    ("build-ca-cert", {"p.yaml": VALID}, "c.pem",
     ["build", "-q", "p.yaml", "--dry-run", "--builder", "buildkit", "--ca-cert", "c.pem"], 2),
]
# click's own checks of a path option come first: a folder given where a file is wanted
# is wrong usage (64) before dockergen reads anything
_CLICK_REFUSES = {("profile", "folder"), ("profile-render", "folder"),
                  ("profile-explain", "folder"), ("build-record", "folder"),
                  ("build-ca-cert", "folder"),
                  *((f"profile-{c}", "folder")
                    for c in ("deploy", "plan", "observe", "build", "lock", "lock-python",
                              "outdated"))}


def _setup(folder: Path, files: dict[str, str], node_at: str, node: str) -> None:
    folder.mkdir()
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text.replace("{model}", _model_config()))
    (folder / node_at).parent.mkdir(parents=True, exist_ok=True)
    MAKERS[node](folder / node_at)


def _expected_read(case: str, node: str, rc: int) -> int:
    if (case, node) in _CLICK_REFUSES:
        return 64
    return rc


@pytest.mark.parametrize("node", READ_NODES)
@pytest.mark.parametrize(("case", "files", "node_at", "args", "rc"), READS,
                         ids=[r[0] for r in READS])
def test_a_hostile_input_is_a_clear_error(case: str, files: dict[str, str], node_at: str,
                                          args: list[str], rc: int, node: str,
                                          tmp_path: Path) -> None:
    folder = tmp_path / "case"
    _setup(folder, files, node_at, node)
    before = snapshot(folder)
    result = run_limited(args, folder)
    assert result.rc == _expected_read(case, node, rc), (result.rc, result.err)
    assert "Traceback" not in result.err + result.out, result.err
    assert snapshot(folder) == before  # the node as it was, and nothing written
    if result.rc == 2 and node not in ("unreadable",):
        assert Path(node_at).name in result.err or ".target-of-" in result.err, result.err


def test_a_huge_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """The sparse 10 GiB profile is refused from its size: the message says so."""
    folder = tmp_path / "case"
    _setup(folder, {}, "p.yaml", "huge-sparse")
    result = run_limited(["validate", "p.yaml"], folder)
    assert result.rc == 2
    assert result.err.splitlines()[0] == (
        "p.yaml: is 10737418240 bytes, more than the 4 MiB dockergen reads of a profile, a "
        "parent it extends, or a knowledge file; give the right file (docs/commands.md, "
        "\"Input limits\", lists what each kind may hold)")


@pytest.mark.parametrize(("node", "message"), [
    ("link-loop", "p.yaml: is a symbolic link loop (or a chain of more than 40 links); point "
                  "the link at a regular file, or give the file's own path"),
    ("dangling-link", "p.yaml: is a symbolic link to nothing-here, which does not exist; "
                      "point the link at a regular file, or give the file's own path"),
    ("fifo", "p.yaml: is a FIFO (named pipe), not a regular file; give the path of a regular "
             "file"),
    ("zero-device", "p.yaml: is a character device, not a regular file; give the path of a "
                    "regular file"),
])
def test_what_is_wrong_with_a_profile_is_named(node: str, message: str,
                                               tmp_path: Path) -> None:
    """A link loop was a RuntimeError traceback; a FIFO blocked; /dev/zero ate the memory."""
    folder = tmp_path / "case"
    _setup(folder, {}, "p.yaml", node)
    result = run_limited(["validate", "p.yaml"], folder)
    assert result.rc == 2
    assert result.err.splitlines()[0] == message


def test_the_installed_command_refuses_a_device_profile_in_bounded_memory(
        tmp_path: Path) -> None:
    """The same through `python -m dockergen`, as a user runs it (validate /dev/zero grew
    to 22 GB before)."""
    folder = tmp_path / "case"
    _setup(folder, {}, "zero", "zero-device")
    proc = subprocess.run([sys.executable, "-m", "dockergen", "validate", "zero"],
                          capture_output=True, text=True, cwd=folder, preexec_fn=_limit,
                          timeout=TIMEOUT_S, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2, proc.stderr
    assert "is a character device, not a regular file" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("entry", "problem"), [
    ({"mirror": None}, "has no digest"),
    ({"digest": "latest"}, "the digest is not sha256:<64 hex digits>"),
    ("sha256:" + "0" * 64, "expected a mapping with the image's digest"),
])
def test_a_lock_entry_without_a_digest_is_a_located_problem(
        entry: object, problem: str, tmp_path: Path) -> None:
    """It was a KeyError traceback."""
    from dockergen.outputs.fleet.project import collect

    folder = tmp_path / "case"
    folder.mkdir()
    (folder / "p.yaml").write_text(VALID)
    refs = {i.ref for t in collect([folder / "p.yaml"], (), pin=False, render=False).members
            for i in t.images}
    (folder / "p.lock.json").write_text(json.dumps(
        {"lockfile": 1, "images": {ref: entry for ref in sorted(refs)}}))
    before = snapshot(folder)
    result = run_limited(["render", "-q", "p.yaml"], folder)
    assert result.rc == 2, result.err
    assert "Traceback" not in result.err
    assert f"p.lock.json:1:1: images['{sorted(refs)[0]}']: {problem}; regenerate it" \
        in result.err
    assert snapshot(folder) == before


# --- what writes: (case, files beside the node, where the node goes, the command) ---------
WRITES: list[tuple[str, dict[str, str], str, list[str]]] = [
    ("deploy-file", {"p.yaml": VALID}, "out",
     ["deploy", "-q", "p.yaml", "--format", "compose", "-o", "out"]),
    ("schema-file", {}, "out", ["schema", "-o", "out"]),
    ("reference-file", {}, "out", ["reference", "-o", "out"]),
    ("render-folder", {"p.yaml": VALID}, "out", ["render", "-q", "p.yaml", "-o", "out"]),
    ("render-matrix", {}, "out", ["render", "-q", str(ROOT / "profiles" / "fleet.yaml"),
                                  "-o", "out"]),
    ("observe-folder", {"p.yaml": VALID}, "out", ["observe", "-q", "p.yaml", "-o", "out"]),
    ("deploy-all-folder", {}, "out", ["deploy", "--all", "-q", "--format", "compose", "-o",
                                      "out"]),
]
# click's own checks of the -o type: a file where a folder is wanted, or the reverse
_FOLDER_OUTPUTS = {"render-folder", "render-matrix", "observe-folder"}


def _expected_write(case: str, node: str) -> int:
    if case == "render-matrix" and node == "folder":
        return 0  # -o is the parent of the variant folders: new ones go beside mine.txt
    if case in ("schema-file", "reference-file") and node == "folder":
        return 64  # click.Path(dir_okay=False)
    if case in _FOLDER_OUTPUTS and node in ("huge-sparse", "unreadable"):
        return 64  # click.Path(file_okay=False): a regular file is no folder
    return 4


@pytest.mark.parametrize("node", WRITE_NODES)
@pytest.mark.parametrize(("case", "files", "node_at", "args"), WRITES,
                         ids=[w[0] for w in WRITES])
def test_an_output_path_that_is_not_dockergens_is_left_alone(
        case: str, files: dict[str, str], node_at: str, args: list[str], node: str,
        tmp_path: Path) -> None:
    """`deploy -o /dev/null` replaced the device with a file and said `wrote`; a FIFO, a
    link and a user's file were replaced too."""
    folder = tmp_path / "case"
    _setup(folder, files, node_at, node)
    before = snapshot(folder)
    result = run_limited(args, folder)
    assert result.rc == _expected_write(case, node), (result.rc, result.err)
    assert "Traceback" not in result.err
    after = snapshot(folder)
    if result.rc == 0:  # a matrix adds its variants and bake file beside the user's files
        assert {k: after[k] for k in before} == before
        return
    assert not [line for line in result.err.splitlines() if line.startswith("wrote")]
    assert after == before


def test_a_file_the_user_wrote_is_not_overwritten_by_deploy(tmp_path: Path) -> None:
    folder = tmp_path / "case"
    _setup(folder, {"p.yaml": VALID, "userfile.yaml": "services: {mine: {}}\n"},
           "md", "folder")
    args = ["deploy", "-q", "p.yaml", "--format", "compose", "-o", "userfile.yaml"]
    result = run_limited(args, folder)
    assert result.rc == 4, result.err
    assert result.err.splitlines()[0] == (
        "userfile.yaml: exists and was not written by dockergen; move it away or choose "
        "another -o path")
    assert (folder / "userfile.yaml").read_text() == "services: {mine: {}}\n"
    (folder / "userfile.yaml").unlink()
    assert run_limited(args, folder).rc == 0  # a new file...
    again = run_limited([*args, "--bind", "127.0.0.2"], folder)
    assert again.rc == 0, again.err  # ...is dockergen's own: a re-run replaces it
    assert "127.0.0.2" in (folder / "userfile.yaml").read_text()


@pytest.mark.parametrize("args", [["schema", "-o", "-"], ["reference", "-o", "-"],
                                  ["deploy", "-q", "p.yaml", "--format", "k8s", "-o", "-"],
                                  ["render", "-q", "p.yaml", "-o", "-"]])
def test_dash_is_standard_output(args: list[str], tmp_path: Path) -> None:
    folder = tmp_path / "case"
    _setup(folder, {"p.yaml": VALID}, "md", "folder")
    before = snapshot(folder)
    result = run_limited(args, folder)
    assert result.rc == 0, result.err
    assert len(result.out) > 100
    assert snapshot(folder) == before  # no file named '-'


@pytest.mark.parametrize("args", [["observe", "-q", "p.yaml", "-o", "-"],
                                  ["build", "-q", "p.yaml", "--dry-run", "-o", "-"],
                                  ["deploy", "--all", "--format", "k8s", "-o", "-"]])
def test_dash_cannot_hold_a_folder(args: list[str], tmp_path: Path) -> None:
    folder = tmp_path / "case"
    _setup(folder, {"p.yaml": VALID}, "md", "folder")
    before = snapshot(folder)
    result = run_limited(args, folder)
    assert result.rc == 64, result.err
    assert snapshot(folder) == before


def test_a_read_only_output_folder_is_not_swapped(tmp_path: Path) -> None:
    """A folder dockergen wrote and the user then made read-only (chmod 555) was replaced
    by a new, writable one (root ignores the mode; dockergen must not)."""
    folder = tmp_path / "case"
    _setup(folder, {"p.yaml": VALID}, "md", "folder")
    assert run_limited(["render", "-q", "p.yaml", "-o", "ctx"], folder).rc == 0
    (folder / "ctx").chmod(0o555)
    before = snapshot(folder)
    result = run_limited(["render", "-q", "p.yaml", "-o", "ctx", "--set",
                          "serving.max_model_len=4096"], folder)
    assert result.rc == 4, result.err
    assert "ctx: is read-only (mode 555); make it writable (chmod u+w)" in result.err
    assert snapshot(folder) == before
    (folder / "ctx").chmod(0o750)
    again = run_limited(["render", "-q", "p.yaml", "-o", "ctx"], folder)
    assert again.rc == 0, again.err
    assert stat.S_IMODE((folder / "ctx").stat().st_mode) == 0o750  # its mode is kept


def test_a_file_dockergen_wrote_but_made_read_only_is_kept(tmp_path: Path) -> None:
    folder = tmp_path / "case"
    _setup(folder, {"p.yaml": VALID}, "md", "folder")
    assert run_limited(["schema", "-o", "s.json"], folder).rc == 0
    (folder / "s.json").chmod(0o444)
    result = run_limited(["schema", "-o", "s.json"], folder)
    assert result.rc == 4
    assert "s.json: is read-only (mode 444)" in result.err


# --- writers called directly: locks, build records and logs ------------------------------
def _writers() -> dict[str, Callable[[Path], None]]:
    from dockergen.files import atomic
    from dockergen.input.buildrecord import BuildRecord, Status
    from dockergen.outputs import pylock
    from dockergen.outputs.fleet import locks

    def log(path: Path) -> None:
        with atomic.open_new(path) as fh:
            fh.write("x\n")

    return {
        "base-image-lock": lambda p: locks.write_lock(p, {"lockfile": 1, "images": {}}),
        "python-lock": lambda p: pylock.write_lock(p, pylock.MARK + "{}\n"),
        "build-record": lambda p: BuildRecord("p", "h", "buildkit", ("r/x:t",), "r/x:t",
                                              status=Status.BUILT).write(p),
        "build-log": log,
    }


@pytest.mark.parametrize("node", WRITE_NODES)
@pytest.mark.parametrize("writer", ["base-image-lock", "python-lock", "build-record",
                                    "build-log"])
def test_the_other_writers_leave_what_is_not_theirs_alone(writer: str, node: str,
                                                          tmp_path: Path) -> None:
    from dockergen.errors import OutputError

    folder = tmp_path / "case"
    _setup(folder, {}, "out", node)
    before = snapshot(folder)
    with pytest.raises(OutputError):
        _writers()[writer](folder / "out")
    assert snapshot(folder) == before


@pytest.mark.parametrize("writer", ["base-image-lock", "python-lock", "build-record"])
def test_the_other_writers_replace_their_own_file_and_no_other(writer: str,
                                                               tmp_path: Path) -> None:
    from dockergen.errors import OutputError

    out = tmp_path / "out"
    _writers()[writer](out)
    first = out.read_bytes()
    _writers()[writer](out)  # its own: replaced
    assert out.read_bytes() == first
    out.write_text('{"mine": true}\n')
    with pytest.raises(OutputError, match="exists and was not written by dockergen"):
        _writers()[writer](out)
    assert out.read_text() == '{"mine": true}\n'


def test_the_docs_list_every_input_limit() -> None:
    """One table of limits (dockergen/files/inputs.py LIMITS); docs/commands.md shows it as it
    is."""
    from dockergen.files.inputs import LIMITS, size_text

    page = (ROOT / "docs" / "commands.md").read_text()
    for limit, what in LIMITS.values():
        assert f"| {what} | {size_text(limit)}" in page, what
