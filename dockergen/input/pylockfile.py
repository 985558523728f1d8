"""The Python lock's file format: ``PROFILE.python.lock`` beside the profile.

A lock is the text ``uv pip compile --generate-hashes`` writes, after one
``# dockergen-python-lock: {...}`` line holding the inputs it was made from
(:class:`LockInputs`). ``dockergen lock --python`` writes it (:mod:`dockergen.outputs.pylock`),
resolution checks it against the profile and the engine stage installs from it
(:mod:`dockergen.parts.engines.base`): all three read and write it here, so the
lock that is checked is the lock that is installed, with the same arguments.
The file is anyone's to edit: its first line is parsed by the bounded JSON reader and every
field is checked against :class:`LockInputs`, so a bad header is a :class:`LockHeaderError`
naming the field, never a traceback.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from dockergen.files import inputs

SUFFIX = ".python.lock"
MARK = "# dockergen-python-lock: "


@dataclass(frozen=True)
class LockInputs:
    """What a lock is resolved from (the profile's resolution decides each)."""

    engine: str  # "vllm==0.33.0"
    torch: str  # "2.14.0"
    torch_index: str  # the CUDA-matched index (explicit: only the torch family)
    main_index: str  # everything else
    engine_index: str | None  # e.g. pypi.nvidia.com (explicit: only the engine package)
    python: str  # "3.12"
    platform: str  # uv --python-platform
    extra: tuple[str, ...] = ()  # packages.pip: locked with the engine, hashed like the rest
    # FlashInfer's kernels where the engine leaves them out (flashinfer-cubin==X), and the
    # explicit index they come from (None: the main index)
    flashinfer_cubin: str | None = None
    flashinfer_index: str | None = None
    # what the engine stage installs under without a lock (cuda.major_constraints: the CUDA
    # Python bindings at the CUDA release's major), so a lock resolves the same closure
    constraints: tuple[str, ...] = ()


def path_of(profile: Path) -> Path:
    """Where a profile's lock is: beside the profile."""
    return profile.with_name(profile.stem + SUFFIX)


def header(inp: LockInputs) -> str:
    """The lock's first line."""
    return MARK + json.dumps(asdict(inp), sort_keys=True)


class LockHeaderError(ValueError):
    """A first line that starts as a dockergen Python lock's but holds what dockergen never
    writes there: ``field`` (None: the whole line) and ``problem``."""

    def __init__(self, field: str | None, problem: str) -> None:
        where = "its first line" if field is None else f"its first line's {field}"
        super().__init__(f"{where}: {problem}")
        self.field, self.problem = field, problem


# each field's annotation -> (the JSON types it may hold, what that is in words)
_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "str": ((str,), "text"),
    "str | None": ((str, type(None)), "text or null"),
    "tuple[str, ...]": ((list,), "a list of text"),
}


def read_inputs(text: str) -> LockInputs | None:
    """The inputs a lock's first line holds; None: not a dockergen Python lock;
    :class:`LockHeaderError` for a header dockergen never writes. Fields a lock of an
    earlier release lacks take their defaults (``extra`` before packages.pip, the
    FlashInfer fields before FlashInfer's kernels were locked)."""
    first = text.splitlines()[0] if text else ""
    if not first.startswith(MARK):
        return None
    try:
        data = inputs.loads_json(first[len(MARK):])
    except ValueError as exc:  # malformed, or nested past the parser's depth
        raise LockHeaderError(None, f"not JSON ({str(exc)[:80]})") from None
    if not isinstance(data, dict):
        raise LockHeaderError(None, f"a JSON {type(data).__name__}, not an object")
    known = {f.name: f for f in fields(LockInputs)}
    for key, value in data.items():
        if key not in known:
            raise LockHeaderError(json.dumps(key)[:60], "not an input dockergen locks with "
                                  "(a lock of another dockergen release?)")
        allowed, words = _TYPES[str(known[key].type)]
        if not isinstance(value, allowed) or (
                isinstance(value, list) and not all(isinstance(v, str) for v in value)):
            raise LockHeaderError(key, f"a JSON {type(value).__name__}, not {words}")
    missing = [name for name, f in known.items() if name not in data
               and f.default is dataclasses.MISSING]
    if missing:
        raise LockHeaderError(missing[0], "missing (dockergen writes every input it locks "
                              "with)")
    return LockInputs(**{**data, "extra": tuple(data.get("extra") or ()),
                         "constraints": tuple(data.get("constraints") or ())})


def differences(had: LockInputs, want: LockInputs, ignore: tuple[str, ...] = ()
                ) -> list[tuple[str, object, object]]:
    """(field, the lock's value, the profile's) of every input that differs, each value as
    the lock's first line writes it (lists, not tuples)."""
    def shown(value: object) -> object:
        return list(value) if isinstance(value, tuple) else value

    return [(f.name, shown(getattr(had, f.name)), shown(getattr(want, f.name)))
            for f in fields(LockInputs)
            if f.name not in ignore and getattr(had, f.name) != getattr(want, f.name)]


def install_args(main_index: str, extra_indexes: tuple[str, ...] | list[str]
                 ) -> tuple[str, ...]:
    """``uv pip install`` arguments that install exactly a lock (``-r LOCK`` follows them).

    Every artifact is pinned by its sha256 (``--require-hashes``, ``--no-deps``), so index
    order decides nothing: ``unsafe-best-match`` only lets uv find each pinned file wherever
    it is served, and a file with another hash is refused.
    """
    return ("--require-hashes", "--no-deps", "--index-strategy", "unsafe-best-match",
            "--index-url", main_index,
            *(a for i in extra_indexes for a in ("--extra-index-url", i)))
