"""The Python lock's file format: ``PROFILE.python.lock`` beside the profile.

A lock is the text ``uv pip compile --generate-hashes`` writes, after one
``# dockergen-python-lock: {...}`` line holding the inputs it was made from
(:class:`LockInputs`). ``dockergen lock --python`` writes it (:mod:`dockergen.pylock`),
resolution checks it against the profile and the engine stage installs from it
(:mod:`dockergen.components.serving.base`): all three read and write it here, so the
lock that is checked is the lock that is installed, with the same arguments.
May import: nothing of dockergen.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

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


def path_of(profile: Path) -> Path:
    """Where a profile's lock is: beside the profile."""
    return profile.with_name(profile.stem + SUFFIX)


def header(inp: LockInputs) -> str:
    """The lock's first line."""
    return MARK + json.dumps(asdict(inp), sort_keys=True)


def read_inputs(text: str) -> LockInputs | None:
    """The inputs a lock's first line holds; None: not a dockergen Python lock. Fields a
    lock of an earlier release lacks take their defaults (``extra`` before packages.pip,
    the FlashInfer fields before FlashInfer's kernels were locked)."""
    first = text.splitlines()[0] if text else ""
    if not first.startswith(MARK):
        return None
    try:
        data = json.loads(first[len(MARK):])
        if not isinstance(data, dict):
            return None
        data["extra"] = tuple(data.get("extra") or ())  # JSON has lists
        return LockInputs(**data)
    except (ValueError, TypeError):
        return None


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
