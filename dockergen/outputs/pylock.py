"""The Python lock: the image's whole Python closure resolved ahead of the build, with hashes.

Why: the engine stage used to run ``uv pip install --extra-index-url <PyTorch cuXYZ index>
vllm==X torch==Y``. uv's default ``first-index`` strategy takes each name from the first
index that has it; the PyTorch index also carries requests, pillow, certifi, setuptools at
older versions, so the install fails ("requests was found on .../cu130, but not at the
requested version"). The lock-less engine stage now passes ``unsafe-best-match`` and checks
the CUDA of the torch it got afterwards; the lock goes further and decides before the
build. Here the closure is resolved once with ``uv pip compile``:
the torch family only from the CUDA-matched index, declared as an *explicit* index (uv
``[[tool.uv.index]] explicit = true`` + ``[tool.uv.sources]``), everything else from the main
index; the result is a requirements file with a sha256 for every artifact. Installing it
with ``--require-hashes`` cannot get another torch: any other wheel has another hash.

The lock starts with one ``# dockergen-python-lock:`` line holding the inputs it was made
from (the one file format: :mod:`dockergen.input.pylockfile`, which resolution's check and the
engine stage's install read too); :func:`check_matches` compares them with the profile, so
a stale lock is an error whose fix is ``dockergen lock --python PROFILE``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from dockergen.errors import DockergenError, ExitCode, MissingToolError
from dockergen.files import atomic, inputs
from dockergen.input.pylockfile import (
    MARK,
    LockHeaderError,
    LockInputs,
    differences,
    header,
    path_of,
    read_inputs,
)
from dockergen.platforms import for_platform, platform_of

if TYPE_CHECKING:
    from dockergen.input.loader import Overrides
    from dockergen.pipeline import Resolution

TORCH_FAMILY = ("torch", "torchvision", "torchaudio")
_UV_TIMEOUT_S = 900


class LockError(DockergenError, code=ExitCode.INVALID_PROFILE):
    """The lock cannot be made, or no longer matches its profile."""


def lock_resolution(profile: Path, overrides: Overrides = ()) -> Resolution:
    """The resolution the Python lock is computed from: without the profile's Python lock
    (the one being refreshed may no longer match it) and without the base-image lock (the
    Python closure does not depend on the base images' digests)."""
    from dockergen.pipeline import resolution

    return resolution(profile, overrides, python_lock=False, pin=False)


def inputs_of(res: Resolution, *, platform: str | None = None, torch_index: str | None = None,
              main_index: str | None = None) -> LockInputs:
    """The lock inputs of a resolved profile (what resolution decided:
    ``Resolved.python_lock_inputs``), with the command's own platform and indexes."""
    inp = res.resolved.python_lock_inputs
    return dataclasses.replace(inp, platform=platform or inp.platform,
                               torch_index=torch_index or inp.torch_index,
                               main_index=main_index or inp.main_index)


def uv() -> str:
    """The uv binary (the ``uv`` package on PyPI, a dependency of the lock command)."""
    found = shutil.which("uv", path=sysconfig.get_path("scripts")) or shutil.which("uv")
    if not found:
        raise MissingToolError("uv is not installed: pip install uv")
    return found


def _pyproject(inp: LockInputs, family: tuple[str, ...]) -> str:
    engine_name = re.split(r"[=<>!~ ]", inp.engine, maxsplit=1)[0]
    deps = [inp.engine, f"torch=={inp.torch}", *inp.extra,
            *([inp.flashinfer_cubin] if inp.flashinfer_cubin else []),
            *(n for n in family if n != "torch")]
    lines = ["[project]", 'name = "dockergen-image"', 'version = "0"',
             "dependencies = [" + ", ".join(json.dumps(d) for d in deps) + "]", "",
             "[[tool.uv.index]]", 'name = "pytorch"', f"url = {json.dumps(inp.torch_index)}",
             "explicit = true", ""]
    sources = [f'{n} = {{ index = "pytorch" }}' for n in ("torch", *family) if n != "torch"]
    sources.insert(0, 'torch = { index = "pytorch" }')
    if inp.engine_index:
        lines += ["[[tool.uv.index]]", 'name = "engine"', f"url = {json.dumps(inp.engine_index)}",
                  "explicit = true", ""]
        sources.append(f'{engine_name} = {{ index = "engine" }}')
    if inp.flashinfer_index and inp.flashinfer_cubin:
        lines += ["[[tool.uv.index]]", 'name = "flashinfer"',
                  f"url = {json.dumps(inp.flashinfer_index)}", "explicit = true", ""]
        sources.append('flashinfer-cubin = { index = "flashinfer" }')
    return "\n".join([*lines, "[tool.uv.sources]", *sorted(set(sources)), ""])


# uv's wording for DNS, connect, TLS and retry-exhausted failures (uv 0.13 stderr)
_UNREACHABLE = ("error sending request for url", "dns error", "tcp connect error",
                "Request failed after")


def _compile(inp: LockInputs, family: tuple[str, ...], work: Path) -> str:
    (work / "pyproject.toml").write_text(_pyproject(inp, family), encoding="utf-8")
    constraints = []
    if inp.constraints:  # the engine stage's own constraints: the same closure
        (work / "constraints.txt").write_text("".join(f"{c}\n" for c in inp.constraints),
                                              encoding="utf-8")
        constraints = ["--constraint", "constraints.txt"]
    cmd = [uv(), "pip", "compile", "--quiet", "--no-header", "--generate-hashes",
           "--emit-index-annotation", "--python-version", inp.python,
           "--python-platform", inp.platform, "--index-url", inp.main_index,
           *constraints, "pyproject.toml"]
    env = {**os.environ, "UV_NO_CONFIG": "1"}
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, check=False,
                          timeout=_UV_TIMEOUT_S, env=env)
    if proc.returncode != 0 and any(m in proc.stderr for m in _UNREACHABLE):
        # the index is unreachable, the profile may be fine: exit 3, not 2
        causes = [line.split("cause:", 1)[1].strip() for line in proc.stderr.splitlines()
                  if "cause:" in line]
        raise MissingToolError(f"uv pip compile cannot reach the package index "
                               f"({causes[-1] if causes else 'no answer'}); check the "
                               f"network, or the index addresses {inp.main_index} and "
                               f"{inp.torch_index}")
    missing = _missing_wheel(proc.stderr, inp) if proc.returncode != 0 else None
    if missing:
        raise LockError(missing)
    if proc.returncode != 0:
        raise LockError(f"uv pip compile could not resolve {inp.engine} with torch=="
                        f"{inp.torch} (torch family from {inp.torch_index} only, the rest "
                        f"from {inp.main_index}): {proc.stderr.strip()[-1500:]}")
    return proc.stdout


# uv 0.13's words for a release without a wheel for the platform (and, in its hint, the
# platforms it has wheels for)
_NO_WHEEL = re.compile(r"([A-Za-z0-9_.-]+)==(\S+) has no wheels with a matching platform tag")
_HAS_WHEELS = re.compile(r"Wheels are available for `([^`]+)` \(v([^)]+)\) on the following "
                         r"platforms?: (.+)")


def _missing_wheel(stderr: str, inp: LockInputs) -> str | None:
    """The verdict for a closure that has no wheel for the lock's platform, or None."""
    m = _NO_WHEEL.search(stderr)
    if not m:
        return None
    name, version = m.group(1), m.group(2)
    hint = _HAS_WHEELS.search(stderr)
    has = (f" (its wheels are for {hint.group(3).strip()})" if hint else "")
    machine = inp.platform.split("-", 1)[0]
    return (f"{name} {version} has no wheel for {inp.platform}{has}, so the "
            f"{platform_of(inp.platform)} image cannot install {inp.engine} with torch=="
            f"{inp.torch}; fix: pin a release of {name} that publishes {machine} wheels "
            f"(e.g. engine.version), serve a {machine} wheel of {name} {version} on "
            f"{inp.main_index}, or build without {platform_of(inp.platform)}")


def compile_lock(inp: LockInputs) -> str:
    """Resolve the closure; the lock text (deterministic for the same index contents).

    Two passes: uv applies ``tool.uv.sources`` to direct dependencies, so the torch-family
    packages the first pass finds in the closure (torchvision, torchaudio) are added as
    direct dependencies bound to the PyTorch index, and the closure is resolved again.
    """
    with tempfile.TemporaryDirectory(prefix="dockergen-lock-") as tmp:
        work = Path(tmp)
        first = _compile(inp, ("torch",), work)
        family = tuple(n for n in TORCH_FAMILY if re.search(rf"^{n}==", first, re.M))
        text = _compile(inp, family, work) if family != ("torch",) else first
    text = text.replace("dockergen-image (pyproject.toml)", "the profile")
    torch_line = re.search(r"^torch==(\S+)", text, re.M)
    if not torch_line:
        raise LockError("the resolved closure holds no torch")
    return header(inp) + "\n" + text


def _origin(text: str, name: str) -> str | None:
    """The index a locked package came from (uv's ``# from`` annotation)."""
    m = re.search(rf"^{re.escape(name)}==\S+ \\\n(?:.*\n)*?\s+# from (\S+)", text, re.M)
    return m.group(1) if m else None


def verify_sources(text: str, inp: LockInputs) -> list[str]:
    """Problems: a torch-family package not from the PyTorch index, or anything else from it."""
    problems = []
    for name in re.findall(r"^([A-Za-z0-9_.-]+)==", text, re.M):
        origin = _origin(text, name)
        family = name.lower() in TORCH_FAMILY
        if family and origin != inp.torch_index:
            problems.append(f"{name} comes from {origin}, not {inp.torch_index}")
        if (not family and origin == inp.torch_index and inp.torch_index != inp.main_index):
            problems.append(f"{name} comes from the PyTorch index {origin}")
    return problems


def check_matches(lock_path: Path, inp: LockInputs, profile: Path) -> None:
    """Raise :class:`LockError` when the lock was made for other inputs than the profile's."""
    fix = f"run `dockergen lock --python {profile}` to refresh it"
    try:
        had = read_inputs(inputs.read_text(lock_path, "lock"))
    except FileNotFoundError:
        raise LockError(f"{lock_path}: no Python lock; {fix}") from None
    except inputs.InputError as exc:  # a device, FIFO, link loop, huge file
        raise LockError(f"{exc.path}: {exc.problem}; {fix}") from None
    except LockHeaderError as exc:
        raise LockError(f"{lock_path}:1:1: {exc}; {fix}") from None
    if had is None:
        raise LockError(f"{lock_path}:1:1: not a dockergen Python lock; {fix}")
    changed = [f"{k}: lock {was!r}, profile {now!r}"
               for k, was, now in sorted(differences(had, inp))]
    if changed:
        raise LockError(f"{lock_path}:1:1: the lock no longer matches the profile ("
                        + "; ".join(changed) + f"); {fix}")


def default_path(profile: Path) -> Path:
    """Where ``dockergen lock --python`` keeps a profile's lock: beside the profile."""
    return path_of(profile)


def platform_inputs(inp: LockInputs, platforms: tuple[str, ...]
                    ) -> list[tuple[str, LockInputs]]:
    """(platform, its lock inputs) for each platform of a multi-platform image: the same
    closure request, resolved for that platform's CPU at the profile's glibc."""
    return [(p, dataclasses.replace(inp, platform=for_platform(inp.platform, p)))
            for p in platforms]


def platform_path(profile: Path, platform: str, own: str) -> Path:
    """Where one platform's lock lives: the profile's own platform (``own``) in
    ``PROFILE.python.lock``, every other in ``PROFILE.<arch>.python.lock``."""
    if platform == own:
        return path_of(profile)
    lock = path_of(profile)
    arch = platform.split("/", 1)[1].replace("/", "")
    return lock.with_name(lock.name.removesuffix(".python.lock") + f".{arch}.python.lock")


def write_lock(path: Path, text: str) -> None:
    """Write the lock atomically (:func:`dockergen.files.atomic.write_file`); an existing file
    there is replaced only when it is a Python lock dockergen wrote."""
    atomic.write_file(path, text, ours=lambda head: head.startswith(MARK.encode()))
