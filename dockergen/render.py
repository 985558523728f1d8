"""Format a :class:`~dockergen.model.Resolved` with the Jinja templates (pure: data in, text out).

Also assembles the whole build context (Dockerfile, .dockerignore, lock file, audit
script, certificates) and writes it atomically.
May import: :mod:`dockergen.errors`, :mod:`dockergen.model`, :mod:`dockergen.resources`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import jinja2

from dockergen import __version__
from dockergen.atomic import MANIFEST
from dockergen.errors import OutputError
from dockergen.model import AUDIT_SCRIPT, CERT_DIR, Resolved
from dockergen.resources import templates_dir

LOCK_FILE = "dockergen.lock.json"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def dockerfile_quote(value: object) -> str:
    """Quote a value for a Dockerfile ENV/LABEL: ``"..."`` with ``\\ " $`` escaped.

    Values never contain control characters (the model rejects them); this refuses them
    again so that no input can ever start a new instruction line.
    """
    text = str(value)
    if _CONTROL.search(text):
        raise ValueError("control character in a Dockerfile value")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def shell_quote(value: object) -> str:
    """Quote a value for a shell word (single quotes unless it is plainly safe)."""
    text = str(value)
    if _CONTROL.search(text):
        raise ValueError("control character in a shell word")
    if re.fullmatch(r"[A-Za-z0-9_./:=,+@-]+", text):
        return text
    return "'" + text.replace("'", "'\"'\"'") + "'"


def python_literal(value: object) -> str:
    """A Python string literal safe inside a single-quoted shell word."""
    literal = json.dumps(str(value))
    if "'" in literal or _CONTROL.search(literal):
        raise ValueError("value cannot be embedded in a Python literal")
    return literal


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # noqa: S701 - output is a Dockerfile, not HTML
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        # Compiled templates are cached on disk (keyed by source checksum): a CLI run then
        # skips ~30 ms of template compilation. Output is identical either way.
        bytecode_cache=jinja2.FileSystemBytecodeCache(),
    )
    env.filters["dq"] = dockerfile_quote
    env.filters["sh"] = shell_quote
    env.filters["pyq"] = python_literal
    return env


_ENV: jinja2.Environment | None = None


def environment() -> jinja2.Environment:
    """The shared Jinja environment (templates compiled once per process)."""
    global _ENV
    if _ENV is None:
        _ENV = _environment()
    return _ENV


def render_dockerfile(r: Resolved, syntax: str | None = None) -> str:
    """The Dockerfile text of a resolved profile."""
    for text in (syntax or "", r.source_name, *r.chain):  # they land in comment lines
        if _CONTROL.search(text):
            raise ValueError(f"control character in a Dockerfile comment: {text!r}")
    template = environment().get_template("Dockerfile.j2")
    text = template.render(
        version=__version__, chain=r.chain, source_name=r.source_name, name=r.profile.name,
        profile_hash=r.profile_hash, mode=r.mode, syntax=syntax if r.mode == "buildkit" else None,
        base=r.base, fa=r.flash_attn, engine=r.engine, runtime=r.runtime,
    )
    # collapse runs of blank lines left by optional blocks; keeps output stable
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.rstrip("\n") + "\n"


def build_context(r: Resolved, cert_sources: list[Path],
                  syntax: str | None = None) -> dict[str, bytes]:
    """Every file of the build context, by relative path (sorted, deterministic)."""
    files: dict[str, bytes] = {"Dockerfile": render_dockerfile(r, syntax).encode()}
    files.update(r.context_files)
    if r.flash_attn is not None:
        files[AUDIT_SCRIPT] = (templates_dir() / "context" / AUDIT_SCRIPT).read_bytes()
    for i, src in enumerate(cert_sources):
        files[f"{CERT_DIR}/extra-{i}.crt"] = src.read_bytes()
    files[LOCK_FILE] = (json.dumps(r.lock, indent=2, sort_keys=True) + "\n").encode()
    copied = sorted({name.split("/")[0] + ("/" if "/" in name else "") for name in files
                     if name not in ("Dockerfile", LOCK_FILE)})
    ignore = environment().get_template("dockerignore.j2").render(files=copied)
    files[".dockerignore"] = ignore.encode()
    return dict(sorted(files.items()))


def write_context(out_dir: Path, files: dict[str, bytes], later: tuple[str, ...] = ()
                  ) -> None:
    """Write a build context atomically: all files appear at once, or nothing changes.

    See :func:`write_folder`; a context written before the manifest existed is recognised
    by its lock file (and holding only files this context has too).
    """
    write_folder(out_dir, files, later=later, legacy=_context_legacy)


def write_folder(out_dir: Path, files: dict[str, bytes], *, later: tuple[str, ...] = (),
                 legacy: Callable[[Path, set[str]], bool] | None = None,
                 writer: str = "dockergen") -> None:
    """Write a folder of generated files atomically: all appear at once, or nothing changes.

    The files (names may hold '/') are written to a temporary sibling folder which then
    replaces ``out_dir``. An existing ``out_dir`` is only replaced when it is empty or
    holds nothing but what dockergen wrote there (listed in its :data:`MANIFEST`, with the
    ``later`` files the caller writes into it afterwards; ``legacy(out_dir, names)`` judges
    a folder written before the manifest existed), so neither a mistyped ``-o`` nor a
    re-render ever deletes the user's files.
    """
    try:
        out_dir = out_dir.resolve()
        for above in out_dir.parents:  # `-o afile/sub`: mkdir would fail half-way
            if above.exists() and not above.is_dir():
                raise OutputError(f"{above}: is a file, not a folder; choose an -o folder "
                                  "that is not inside a file")
        if out_dir.exists():
            if not out_dir.is_dir():
                raise OutputError(f"{out_dir}: exists and is not a folder; choose another -o "
                                  "path")
            _check_owned(out_dir, {*files, *later}, legacy, writer)
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = _stage(out_dir.parent, out_dir.name, files, later)
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot create: {exc.strerror}; choose another -o "
                          "path") from None
    try:
        with _signals_deferred():
            _swap_in(staging, out_dir)
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot write: {exc.strerror}; nothing was changed"
                          ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _context_legacy(folder: Path, names: set[str]) -> bool:
    """A context written before the manifest existed: its lock file, and only files this
    context has too."""
    return _is_lock(folder / LOCK_FILE) and _files_in(folder) <= names


def write_contexts(out_dir: Path, contexts: dict[str, dict[str, bytes]],
                   top: dict[str, bytes], retired: tuple[str, ...] = (),
                   top_ours: Callable[[Path], None] | None = None) -> None:
    """Write sibling build contexts ``out_dir/<name>/`` and files ``out_dir/<file>`` (the
    bake file) as one change: all of them, or none (a matrix, ``render --all``).

    Every context is checked like :func:`write_context` and staged first; then, with
    signals held, each is swapped in and each top file replaced, and any failure puts back
    what was there. ``retired`` names contexts of an earlier run that this one no longer
    writes: they are removed with the change when dockergen wrote them, kept otherwise.
    ``top_ours(path)`` raises when an existing top file is not dockergen's.
    """
    staged: list[tuple[Path, Path]] = []  # (staging, destination)
    try:
        try:
            out_dir = out_dir.resolve()
            out_dir.mkdir(parents=True, exist_ok=True)
            for name in top:
                if top_ours is not None:
                    top_ours(out_dir / name)
            for name, files in contexts.items():
                dest = out_dir / name
                if dest.exists():
                    if not dest.is_dir():
                        raise OutputError(f"{dest}: exists and is not a folder; move it away "
                                          "or choose another -o folder")
                    _check_owned(dest, set(files), _context_legacy, "dockergen")
            gone = []
            for name in retired:
                with contextlib.suppress(OutputError):  # not provably ours: left alone
                    if (out_dir / name).is_dir():
                        _check_owned(out_dir / name, set(), None, "dockergen")
                        gone.append(out_dir / name)
            for name, files in contexts.items():
                staged.append((_stage(out_dir, name, files), out_dir / name))
            for name, data in top.items():
                fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=out_dir)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.chmod(tmp, 0o644)
                staged.append((Path(tmp), out_dir / name))
        except OSError as exc:
            raise OutputError(f"{out_dir}: cannot write: {exc.strerror}; nothing was changed"
                              ) from None
        with _signals_deferred():
            _swap_all(staged, gone)
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot write: {exc.strerror}; nothing was changed"
                          ) from None
    finally:
        for staging, _ in staged:
            _remove(staging)


def _stage(parent: Path, name: str, files: dict[str, bytes], later: tuple[str, ...] = ()
           ) -> Path:
    """A temporary sibling folder holding ``files`` and their manifest."""
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=parent))
    listing = sorted({*files, *later, MANIFEST})
    manifest = (_MANIFEST_HEADER + "".join(f"{n}\n" for n in listing)).encode()
    try:
        for rel, data in {**files, MANIFEST: manifest}.items():
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        staging.chmod(0o755)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _swap_all(staged: list[tuple[Path, Path]], gone: list[Path]) -> None:
    """Move each staging path onto its destination, and ``gone`` out of the way; on any
    failure (or an interrupt) undo every move made, then re-raise."""
    done: list[tuple[Path, Path | None]] = []  # (destination, its old version moved aside)
    try:
        for staging, dest in staged:
            old = None
            if dest.exists() or dest.is_symlink():
                old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
                os.replace(dest, old)
            try:
                os.replace(staging, dest)
            except BaseException:
                if old is not None:
                    os.replace(old, dest)
                raise
            done.append((dest, old))
        for path in gone:
            aside = path.with_name(f".{path.name}.old-{os.getpid()}")
            os.replace(path, aside)
            done.append((path, aside))
    except BaseException:
        for dest, old in reversed(done):
            if dest.exists() or dest.is_symlink():  # what this change put there goes
                _remove(dest)
            if old is not None:  # and what was there comes back
                os.replace(old, dest)
        raise
    for _, old in done:
        if old is not None:
            _remove(old)


_MANIFEST_HEADER = ("# Written by dockergen: its -o replaces this folder only while it holds "
                    "just these files.\n")


def _files_in(folder: Path) -> set[str]:
    """Files and links below ``folder``, and its empty folders (as ``name/``)."""
    return {p.relative_to(folder).as_posix() + ("/" if p.is_dir() else "")
            for p in folder.rglob("*")
            if p.is_file() or p.is_symlink() or (p.is_dir() and not any(p.iterdir()))}


def _check_owned(out_dir: Path, names: set[str],
                 legacy: Callable[[Path, set[str]], bool] | None, writer: str) -> None:
    """Refuse a folder holding anything dockergen did not write there."""
    present = _files_in(out_dir)
    if not present:
        return
    manifest = out_dir / MANIFEST
    if manifest.is_file():
        text = manifest.read_text(encoding="utf-8", errors="replace")
        # the first line is a comment whose wording may change between releases
        listed = (set(text.splitlines()[1:]) if text.startswith("# Written by dockergen")
                  else set())
        foreign = sorted(present - listed)
        if listed and foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more"
                                              if len(foreign) > 5 else "")
            raise OutputError(f"{out_dir}: holds files {writer} did not write ({shown}); "
                              "move them out, or choose another -o folder")
        if listed:
            return
    elif legacy is not None and legacy(out_dir, names):
        return
    raise OutputError(f"{out_dir}: folder is not empty and was not written by {writer}; "
                      "choose an empty or new folder")


def _is_lock(path: Path) -> bool:
    """A lock file dockergen wrote (not just a file of that name)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and {"dockergen", "profile_hash", "mode"} <= data.keys()


def _swap_in(staging: Path, out_dir: Path) -> None:
    """Replace ``out_dir`` by ``staging`` with two renames; never lose both folders.

    Whatever interrupts the renames (an OSError, a KeyboardInterrupt raised from a signal
    handler the deferral could not cover), the old folder is moved back if the new one did
    not arrive, and is deleted only once the new one is in place.
    """
    old = None
    swapped = False
    try:
        if out_dir.exists():
            old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
            os.replace(out_dir, old)
        os.replace(staging, out_dir)
        swapped = True
    except BaseException:
        if old is not None and not out_dir.exists():
            os.replace(old, out_dir)
            old = None
        raise
    finally:
        if old is not None and swapped:
            shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM during the folder swap and deliver them right after it.

    A Ctrl-C between the two renames used to delete both the old and the new folder.
    Signal handlers can only be set in the main thread; elsewhere :func:`_swap_in`'s own
    recovery is the guard.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _frame: caught.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for number in dict.fromkeys(caught):
            signal.raise_signal(number)  # now handled as it would have been
