"""The serving engine's start-up JIT kernels: toolchain, seeded cache, and the proof.

Run with the venv's Python by dockergen's Dockerfile and smoke test::

    python engine_jit.py toolchain --cuda-home DIR
    python engine_jit.py seed  --archs 9.0,10.0 --override MOD:FN --cache-env VAR \
        --cache-dir DIR --kernels JSON
    python engine_jit.py check --archs 9.0 --override MOD:FN --crash-env VAR --kernels JSON

``toolchain`` makes CUDA's compiler wheels (``nvidia/cu13`` of ``cuda-toolkit[nvcc,...]``) look
like the CUDA home the engine's build expects (flashinfer_aot.py's preparation, beside this
file). ``seed`` builds every kernel through the engine's own builder (``MOD:FUNCTION(*args)``,
a string ``torch.NAME`` standing for that dtype) under the engine's arch override, one process
per arch: the engine fixes the arch, the compilers' fingerprint and the cache folder at its
first JIT call. ``check`` calls the same builders with the engine's switch that turns a cache
miss into an error (SGLang: SGLANG_CRASH_ON_JIT_COMPILE) and the cache folder the image's own
environment names, and prints one JSON line: {arch: {kernel: "cached" or the error}}.

No GPU is needed: the arch comes from the override, and the driver library from the stub of
driver_stub.py (beside this file) for whatever imports it. Standard library and the venv's
own packages only.
"""

import argparse
import importlib
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def _arg(value, torch):
    """A kernel argument as the builder takes it: ``torch.NAME`` is a torch dtype."""
    if isinstance(value, str) and value.startswith("torch."):
        return getattr(torch, value[len("torch."):])
    return value


def one(arch: str, override: str, kernels: list, crash_env: str) -> dict:
    """Build (or, with ``crash_env``, only look up) every kernel for one arch, in this
    process; each kernel's state: "cached"/"built", or its error's first line."""
    if crash_env:
        os.environ[crash_env] = "1"
    from driver_stub import libcuda_stub

    libcuda_stub()
    import torch

    module, _, function = override.partition(":")
    forced = getattr(importlib.import_module(module), function)
    major, minor = (int(x) for x in arch.split("."))
    out = {}
    with forced(major, minor):
        for k in kernels:
            module, _, function = k["builder"].partition(":")
            try:
                builder = getattr(importlib.import_module(module), function)
                builder(*(_arg(a, torch) for a in k["args"]))
                out[k["name"]] = "cached" if crash_env else "built"
            except Exception as exc:  # every kernel is tried: the report names each one
                first = (str(exc).strip().splitlines() or [""])[0][:300]
                out[k["name"]] = f"{type(exc).__name__}: {first}"
    return out


def per_arch(args: argparse.Namespace, crash_env: str) -> dict:
    """One process per arch (see the module's docstring); {arch: {kernel: state}}."""
    result = {}
    for arch in args.archs.split(","):
        run = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "one", "--arch", arch,
             "--override", args.override, "--crash-env", crash_env, "--kernels", args.kernels],
            capture_output=True, text=True, check=False)
        sys.stderr.write(run.stderr[-4000:])
        try:
            result[arch] = json.loads(run.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            result[arch] = {"*": f"exit {run.returncode}: {run.stderr.strip()[-300:]}"}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("mode", choices=("toolchain", "seed", "check", "one"))
    parser.add_argument("--cuda-home")
    parser.add_argument("--archs", default="")
    parser.add_argument("--arch", default="")
    parser.add_argument("--override", default="")
    parser.add_argument("--cache-env", default="")
    parser.add_argument("--cache-dir", default="")
    parser.add_argument("--crash-env", default="")
    parser.add_argument("--kernels", default="[]")
    args = parser.parse_args()
    if args.mode == "toolchain":
        from flashinfer_aot import prepare_cuda_home

        prepare_cuda_home(args.cuda_home)
        return
    if args.mode == "one":
        print(json.dumps(one(args.arch, args.override, json.loads(args.kernels),
                             args.crash_env), sort_keys=True))
        return
    if args.mode == "seed":
        os.environ[args.cache_env] = args.cache_dir
    result = per_arch(args, args.crash_env if args.mode == "check" else "")
    print(json.dumps(result, sort_keys=True))
    done = {"seed": "built", "check": "cached"}[args.mode]
    if any(state != done for row in result.values() for state in row.values()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
