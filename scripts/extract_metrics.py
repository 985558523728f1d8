#!/usr/bin/env python3
"""Extract the Prometheus metrics an engine release defines, from its real wheel.

Maintainer tool behind each engine's ``metrics.yaml`` (in its folder under
``dockergen/parts/engines/``): it reads the engine's metrics
module out of the wheel (a zip; nothing is installed or imported) through
dockergen.outputs.observe.families (its docstring says how families are found). The output is JSON,
one entry per release; the checked-in snapshot ``dockergen/data/metrics_snapshot.json`` is
its output for the releases dockergen knows, and ``tests/unit/knowledge/test_metrics_knowledge.py``
compares the hand-kept ``metrics.yaml`` with that snapshot offline.

Usage::

    # download with pip (no deps) and extract
    python scripts/extract_metrics.py vllm==0.33.0 sglang==0.5.23
    # or from wheels already on disk
    python scripts/extract_metrics.py --wheel ~/wheels/vllm-0.33.0-cp38-abi3-*.whl
    # refresh the snapshot (merges into the existing file)
    python scripts/extract_metrics.py --update dockergen/data/metrics_snapshot.json vllm==0.33.0
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dockergen.outputs.observe.families import extract_source  # noqa: E402 - after the path
from dockergen.outputs.observe.metrics import read_modules  # noqa: E402

_WHEEL = re.compile(r"(?P<name>[A-Za-z0-9_]+)-(?P<version>[^-]+)-.*\.whl$")


def extract_wheel(path: Path) -> dict[str, Any]:
    """One snapshot entry for a wheel file."""
    match = _WHEEL.search(path.name)
    if not match:
        raise SystemExit(f"{path}: not a wheel file name")
    # the engine.name of a wheel's distribution: tensorrt_llm -> tensorrt-llm
    engine, version = match["name"].lower().replace("_", "-"), match["version"]
    modules, prefix = read_modules(engine)
    if not modules:
        raise SystemExit(f"{path}: no metrics module known for {engine}")
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        member = next((m for m in modules if m in names), None)
        if member is None:
            raise SystemExit(f"{path}: none of {modules} in the wheel")
        data = zf.read(member)
    return {
        "engine": engine,
        "version": version,
        "wheel": path.name,
        "module": member,
        "module_sha256": hashlib.sha256(data).hexdigest(),
        "metrics": extract_source(prefix, data.decode("utf-8")),
    }


def _download(requirement: str, dest: Path) -> Path:
    before = set(dest.glob("*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary",
                    ":all:", "-q", "-d", str(dest), requirement], check=True)
    new = sorted(set(dest.glob("*.whl")) - before)
    if len(new) != 1:
        raise SystemExit(f"{requirement}: expected one wheel, got {new}")
    return new[0]


def main(argv: list[str] | None = None) -> int:
    """Extract the given releases and print (or merge into --update) the snapshot JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("requirements", nargs="*", help="e.g. vllm==0.33.0 (pip download)")
    parser.add_argument("--wheel", action="append", default=[], type=Path,
                        help="a wheel already on disk (repeatable)")
    parser.add_argument("--update", type=Path, help="merge the result into this snapshot file")
    args = parser.parse_args(argv)
    entries = [extract_wheel(w) for w in args.wheel]
    if args.requirements:
        with tempfile.TemporaryDirectory() as tmp:
            for req in args.requirements:
                wheel = _download(req, Path(tmp))
                entries.append(extract_wheel(wheel))
                wheel.unlink()  # vLLM wheels are ~400 MB: keep at most one on disk
    snapshot: dict[str, dict[str, Any]] = {}
    if args.update and args.update.exists():
        snapshot = json.loads(args.update.read_text(encoding="utf-8"))
    for entry in entries:
        snapshot.setdefault(entry["engine"], {})[entry["version"]] = entry
    text = json.dumps(snapshot, indent=1, sort_keys=True) + "\n"
    if args.update:
        args.update.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
