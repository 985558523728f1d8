#!/usr/bin/env python3
"""Extract the `vllm serve` CLI flags from a vllm wheel (static, AST; no torch needed).

Importing vllm's parser needs torch and the CUDA stack, so the script reproduces what
`vllm serve`'s parser registers, from the wheel's source:

  1. every literal option string of an `add_argument(...)` call inside `make_arg_parser`
     (vllm/entrypoints/common/cli_args.py; launchers/ or openai/ before 0.33.0: --headless,
     --api-server-count/-asc, --config,
     --grpc) and inside every `add_cli_args` of vllm/engine/arg_utils.py (EngineArgs: one
     literal call per flag, e.g. `add_argument("--quantization", "-q", **kwargs[...])`);
  2. the frontend flags `FrontendArgs.add_cli_args` builds from dataclass fields:
     "--" + name.replace("_", "-") for every annotated field of `BaseFrontendArgs` and
     `FrontendArgs` in that cli_args.py.

Boolean fields also get argparse's `--no-<flag>` form (BooleanOptionalAction); the list
does not spell those out, and dockergen accepts `--no-X` where `--X` is listed.

Usage: python tools/vllm_flags.py WHEEL [--update dockergen/components/serving/vllm_flags.json]
Exits 2 when the layout is not understood (a short list would be worse than none).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

ARG_UTILS = "vllm/engine/arg_utils.py"
# where make_arg_parser and the frontend dataclasses live: common/ from 0.33.0,
# launchers/ in 0.30.0 and 0.32.0, openai/ in 0.27.1 (read from the wheels); the first
# that exists is used
CLI_ARGS = ("vllm/entrypoints/common/cli_args.py", "vllm/entrypoints/launchers/cli_args.py",
            "vllm/entrypoints/openai/cli_args.py")
FRONTEND_CLASSES = ("BaseFrontendArgs", "FrontendArgs")


def _literal_options(tree: ast.Module, functions: tuple[str, ...]) -> set[str]:
    found: set[str] = set()
    for fn in ast.walk(tree):
        if not (isinstance(fn, ast.FunctionDef) and fn.name in functions):
            continue
        for call in ast.walk(fn):
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "add_argument"):
                found |= {a.value for a in call.args if isinstance(a, ast.Constant)
                          and isinstance(a.value, str) and a.value.startswith("-")}
    return found


def _field_flags(tree: ast.Module, classes: tuple[str, ...]) -> set[str]:
    found: set[str] = set()
    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef) and cls.name in classes:
            for stmt in cls.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    found.add("--" + stmt.target.id.replace("_", "-"))
    return found


def extract(wheel: Path) -> tuple[str, list[str]]:
    """(vllm version, sorted option strings) of a vllm wheel."""
    version = re.match(r"vllm-([^-]+)-", wheel.name)
    if version is None:
        raise SystemExit(f"{wheel.name}: not a vllm wheel name")
    with zipfile.ZipFile(wheel) as z:
        engine = ast.parse(z.read(ARG_UTILS))
        names = set(z.namelist())
        found = next((n for n in CLI_ARGS if n in names), None)
        if found is None:
            print(f"{wheel.name}: none of {', '.join(CLI_ARGS)}; the wheel layout changed",
                  file=sys.stderr)
            raise SystemExit(2)
        cli = ast.parse(z.read(found))
    engine_flags = _literal_options(engine, ("add_cli_args",))
    serve_flags = _literal_options(cli, ("make_arg_parser",))
    frontend = _field_flags(cli, FRONTEND_CLASSES)
    # sanity: what every vllm serve has; a layout change must fail loudly
    for must in ("--max-model-len", "--tensor-parallel-size", "--quantization", "--port",
                 "--host", "--served-model-name", "--api-server-count"):
        if must not in engine_flags | serve_flags | frontend:
            print(f"{wheel.name}: {must} not found; the wheel layout changed", file=sys.stderr)
            raise SystemExit(2)
    if len(engine_flags) < 100 or len(frontend) < 20:
        print(f"{wheel.name}: only {len(engine_flags)} engine / {len(frontend)} frontend "
              "flags; the wheel layout changed", file=sys.stderr)
        raise SystemExit(2)
    return version.group(1), sorted(engine_flags | serve_flags | frontend)


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
