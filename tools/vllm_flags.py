"""Extract the `vllm serve` CLI flags from a vllm wheel (static, AST; no torch needed).

The reading is dockergen.parts.engines.vllm.wheel.serve_flags (its docstring says what
is and is not listed); `dockergen upgrade` reads a new release through the same function.

Usage: python tools/vllm_flags.py WHEEL [--update dockergen/parts/engines/vllm/flags.json]
Exits 2 when the layout is not understood (a short list would be worse than none).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dockergen.parts.engines.vllm.wheel import (  # noqa: E402 - after the path set-up
    MEMBERS,
    WheelLayoutError,
    serve_flags,
)


def extract(wheel: Path) -> tuple[str, list[str]]:
    """(vllm version, sorted option strings) of a vllm wheel."""
    version = re.match(r"vllm-([^-]+)-", wheel.name)
    if version is None:
        raise SystemExit(f"{wheel.name}: not a vllm wheel name")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        members = {n: z.read(n) for n in MEMBERS if n in names}
    try:
        return version.group(1), serve_flags(members, wheel.name)
    except WheelLayoutError as exc:
        print(f"{exc}; the wheel layout changed", file=sys.stderr)
        raise SystemExit(2) from None


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 64
    wheel = Path(argv[0])
    version, flags = extract(wheel)
    if len(argv) == 3 and argv[1] == "--update":
        target = Path(argv[2])
        data: dict[str, Any] = json.loads(target.read_text()) if target.exists() else {
            "about": "Flags of `vllm serve` per release, extracted from the real wheel by "
                     "tools/vllm_flags.py (see its docstring for what is and is not listed).",
            "releases": {}, "src": {}}
        data["releases"][version] = flags
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        data["src"][version] = f"VLLM-WHEEL {version} {wheel.name} sha256:{digest}"
        target.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"{target}: vllm {version}: {len(flags)} flags")
    else:
        print(json.dumps(flags, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
