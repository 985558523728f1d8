#!/usr/bin/env python3
"""Read, per engine release, Python and wheel platform, which members of the engine's whole
resolved closure have no wheel there: the `closure_wheels` rows of its facts.

`validate` judges a profile offline from these rows; `dockergen lock --python` judges the
real closure online the same way (dockergen/outputs/closure.py). Each row is made as the lock is:
uv pip compile for the platform and Python (from metadata, torch from PyPI's main index, the
one PyTorch index reachable from here being PyPI), then each pinned distribution's files on
the index matched against packaging.tags of the target interpreter and platform.

Usage:
  python tools/closure_wheels.py PROFILE RELEASE PLATFORM PYTHON [PYTHON ...]
    PROFILE   a shipped profile of the engine (profiles/gh200-vllm.yaml)
    PLATFORM  uv's --python-platform, e.g. aarch64-manylinux_2_35
Prints the rows to paste into the engine's facts file (`closure_wheels:`).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dockergen.input.profile import MACHINE_OF_PLATFORM  # noqa: E402
from dockergen.outputs import closure, pylock  # noqa: E402 - after the path set-up
from dockergen.parts.engines.base import ServingEngine  # noqa: E402


def _unjudged(self: object, c: object) -> None:
    """The rows being read are not judged by the rows read before them."""


ServingEngine.check_closure_wheels = _unjudged  # type: ignore[method-assign]


def missing(profile: Path, release: str, platform: str, python: str) -> list[str]:
    """``name==version`` of every closure member without a wheel for the target."""
    machine = platform.split("-", 1)[0]
    image = next(p for p, m in MACHINE_OF_PLATFORM.items() if m == machine)
    res = pylock.lock_resolution(profile, ("build.torch_from=main-index",
                                           f"engine.version={release}", f"python={python}",
                                           f"build.platform={image}"))
    inp = pylock.inputs_of(res, platform=platform)
    found = closure.verdicts(pylock.compile_lock(inp), python, platform)
    return sorted(f"{v.name}=={v.version}" for v in found if v.kind == "missing")


def main(argv: list[str]) -> int:
    """Command line (see the module docstring)."""
    if len(argv) < 4 or any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 2
    profile, release, platform, pythons = Path(argv[0]), argv[1], argv[2], argv[3:]
    cells = ", ".join(f'"{py}": [{", ".join(missing(profile, release, platform, py))}]'
                      for py in pythons)
    print(f'  "{release}": {{"{platform}": {{{cells}}}, src: "tools/closure_wheels.py '
          f'(uv pip compile from PyPI, files on PyPI)"}}')
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
