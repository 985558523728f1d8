"""Format a :class:`~dockergen.resolve.model.Resolved` with the Jinja templates (pure: data
in, text out).

Also assembles the whole build context (Dockerfile, .dockerignore, the resolution
record, audit script, certificates) and writes it atomically.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jinja2

from dockergen import __version__
from dockergen.errors import OutputError
from dockergen.files import atomic, inputs
from dockergen.files.owned import MANIFEST, holds_only, is_own_file
from dockergen.resolve.model import (
    AUDIT_SCRIPT,
    DRIVER_STUB,
    ENGINE_JIT_SCRIPT,
    FLASHINFER_AOT_SCRIPT,
    Resolved,
)
from dockergen.resources import templates_dir

# the resolution record: every derived value (never a lock: those are PROFILE.lock.json,
# the base-image digests, and PROFILE.python.lock)
RESOLVED_FILE = "dockergen.resolved.json"
# its name before it was renamed: a context written then is still recognised as ours
_OLD_RESOLVED_FILE = "dockergen.lock.json"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def exec_form(argv: tuple[str, ...]) -> str:
    """A command in a Dockerfile's exec form: the JSON array ``["a", "b"]``."""
    return json.dumps(list(argv))


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
    env.filters["exec_form"] = exec_form
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
        aot=r.flashinfer_aot, jit=r.engine_jit,
        jit_files={"script": ENGINE_JIT_SCRIPT, "shared": FLASHINFER_AOT_SCRIPT,
                   "stub": DRIVER_STUB},
    )
    # collapse runs of blank lines left by optional blocks; keeps output stable
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.rstrip("\n") + "\n"


@dataclass(frozen=True)
class Stage:
    """One stage of the rendered Dockerfile: its name (``AS``) and what its ``FROM`` names,
    an image or an earlier stage."""

    name: str
    base: str


def stages(r: Resolved) -> tuple[Stage, ...]:
    """The stages ``Dockerfile.j2`` wires, in its order, each with what it starts from.

    The images are the model's own values, as the templates write them (``repo:tag@sha256:``
    when the base-image lock pins them): what a build pulls and ``--target`` may name is read
    here, never from the rendered text. tests/unit/building/test_stages.py holds this to
    the ``FROM`` lines of every shipped profile: a stage added to the templates is added
    here too.
    """
    out = [Stage("build-base", r.base.cuda.image)]
    if r.flash_attn is not None:
        out.append(Stage("flash-attn", "build-base"))
    out.append(Stage("engine", "build-base"))
    if r.flashinfer_aot is not None:
        out.append(Stage("flashinfer-aot", "engine"))
    if r.engine_jit is not None:
        out.append(Stage("jit-toolchain", "engine"))
    out.append(Stage("runtime", r.runtime.image))
    return tuple(out)


def base_images(r: Resolved) -> list[str]:
    """The images the Dockerfile starts from (not its own stages), each once, in order."""
    named = {s.name for s in stages(r)}
    return list(dict.fromkeys(s.base for s in stages(r) if s.base not in named))


def build_context(r: Resolved, syntax: str | None = None) -> dict[str, bytes]:
    """Every file of the build context, by relative path (sorted, deterministic); the
    certificates are among the resolved context files, as their check read them."""
    files: dict[str, bytes] = {"Dockerfile": render_dockerfile(r, syntax).encode()}
    files.update(r.context_files)
    if r.flash_attn is not None:
        files[AUDIT_SCRIPT] = (templates_dir() / "context" / AUDIT_SCRIPT).read_bytes()
    files[RESOLVED_FILE] = (json.dumps(dict(r.record), indent=2, sort_keys=True)
                            + "\n").encode()
    copied = sorted({name.split("/")[0] + ("/" if "/" in name else "") for name in files
                     if name not in ("Dockerfile", RESOLVED_FILE)})
    ignore = environment().get_template("dockerignore.j2").render(files=copied)
    files[".dockerignore"] = ignore.encode()
    return dict(sorted(files.items()))


# What dockergen itself puts beside a build context: the bake file of `render -o`, and the
# record and log of `build -o` (written after the context, named in its manifest).
BAKE_FILE = "docker-bake.hcl"  # = dockergen.outputs.fleet.bake.BAKE_FILE (test_atomic_write checks)
RECORD_FILE = "build-record.json"  # the pushed digests `deploy --record` reads
LOG_FILE = "build.log"


def write_context(out_dir: Path, files: dict[str, bytes], later: tuple[str, ...] = ()
                  ) -> None:
    """Write a build context atomically (:func:`dockergen.files.atomic.write_folder`).

    ``later``: files the caller writes into the folder afterwards (a build's record and
    log). A folder holding the record of an earlier build is refused by a plain render: it
    would take with it the digests `deploy --record` needs.
    """
    try:
        out_dir = atomic.real_folder(out_dir)
        has_record = (out_dir / RECORD_FILE).is_file()
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot read: {exc.strerror}; choose another -o path"
                          ) from None
    if has_record and RECORD_FILE not in later:
        raise OutputError(f"{out_dir}: holds {RECORD_FILE} of an earlier build (`dockergen "
                          "deploy --record` reads its digests); move it away, or choose "
                          "another -o folder")
    atomic.write_folder(out_dir, files, kind="context", later=later, legacy=_context_legacy)


def write_contexts(out_dir: Path, contexts: dict[str, dict[str, bytes]],
                   top: dict[str, bytes], retired: tuple[str, ...] = (),
                   top_ours: Callable[[Path], None] | None = None) -> None:
    """Write sibling build contexts ``out_dir/<name>/`` and the bake file beside them as
    one change (a matrix, ``render --all``): :func:`dockergen.files.atomic.write_folders`."""
    if (out_dir / MANIFEST).is_file():  # its own manifest would go stale, listing none
        raise OutputError(f"{out_dir}: is a single build context dockergen wrote; write a "
                          "matrix or --all into another -o folder")
    atomic.write_folders(out_dir, contexts, kind="context", top=top, retired=retired,
                         legacy=_context_legacy, top_ours=top_ours)


def _context_legacy(folder: Path, names: set[str]) -> bool:
    """A context written before manifests existed: dockergen's resolution record (under
    the name it had then), and no file but this context's and what dockergen puts beside
    one (stops at the first other)."""
    if not _is_record(folder / _OLD_RESOLVED_FILE):
        return False
    allowed = names | {_OLD_RESOLVED_FILE, BAKE_FILE, RECORD_FILE, LOG_FILE}
    return holds_only(folder, allowed)


def _is_record(path: Path) -> bool:
    """A resolution record dockergen wrote (not just a file of that name)."""
    return is_own_file(path, _record_head)


def _record_head(head: bytes) -> bool:
    try:
        data = inputs.loads_json(head)
    except ValueError:
        return False
    return isinstance(data, dict) and {"dockergen", "profile_hash", "mode"} <= data.keys()
