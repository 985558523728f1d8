"""The serving engine's own start-up JIT: the compiler it needs, and its cache seeded.

Some engine releases JIT-build CUDA kernels of their own when the server starts, with no
fallback (SGLang 0.5.23: FP8 quantization at weight load, SiLU-and-mul and RoPE at the first
forward; the engine's facts ``startup_jit``, with the source lines). Without a CUDA compiler
in the image the server cannot start on any GPU; with one, its first start on each node
compiles for minutes. The engine's JIT cache key holds the compiler's and the host
compiler's version output and every header's digest, so kernels built in another stage are
never found: this component puts CUDA's compiler wheels (at the profile's CUDA version) and
g++ into the runtime image, seeds the engine's cache there for each GPU target through the
engine's own builders and arch override, leaves the cache writable by the runtime user (a
kernel another model needs still compiles), and proves with the engine's own switch that a
start finds every seeded kernel (:func:`load_check`).

The kernels' arguments come from the model (its dtype and RoPE shape): they are seeded when
``serving.hf_config`` names the model; otherwise the toolchain alone is shipped and the
derivations say what the first start compiles.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dockergen.errors import Problem, ProfileError
from dockergen.knowledge.models import PlanError, builtin_models, load_shape
from dockergen.parts import cuda
from dockergen.resolve.context import Context
from dockergen.resolve.model import (
    CUDA_COMPILER_DIR,
    DRIVER_STUB,
    ENGINE_JIT_SCRIPT,
    FLASHINFER_AOT_SCRIPT,
    VENV,
    CommandCheck,
    Derivation,
    EngineJit,
    JitKernel,
    Mode,
    cc_tuple,
)
from dockergen.resources import templates_dir

# where the seeded cache lives: outside HOME, so that a volume mounted over the caches of
# HOME (the Kubernetes output's) does not hide it
CACHE_DIR = "/opt/dockergen/jit-cache"
# where the runtime stage copies the seeding script (the smoke check runs the same copy)
SCRIPT_DIR = "/opt/dockergen"
# the host compiler nvcc hands host code to and the engine links with (``c++``): g++ brings
# cc1plus and libstdc++'s headers; the runtime image's gcc alone has neither
HOST_COMPILER_APT = ("g++",)
HOST_COMPILER_EXECUTABLES = ("g++", "c++")  # what g++ puts on PATH (nvcc stays off it)
# GiB one nvcc job of these kernels may take (SGLang's kernels are header-only CUDA files,
# far below FlashInfer's largest, parts/flashinfer.py JOB_GIB)
JOB_GIB = 4
TORCH_DTYPES = {"bfloat16": "torch.bfloat16", "float16": "torch.float16",
                "float32": "torch.float32"}


def derive(c: Context, d: list[Derivation], facts: Mapping[str, Any], mode: Mode
           ) -> EngineJit | None:
    """The engine's start-up JIT for this profile (None: the release has none known)."""
    row = (facts.get("startup_jit") or {}).get(c.p.engine.version)
    if row is None:
        return None
    engine = f"{c.p.engine.name} {c.p.engine.version}"
    wheels = cuda.compiler_wheels(c.facts, c.p.cuda.version)
    home = cuda.CUDA_HOME_IN_WHEELS.get(c.p.cuda.version.split(".")[0])
    if wheels is None or home is None:
        d.append(Derivation("engine JIT toolchain", "none", f"{engine} JIT-builds "
                            f"{', '.join(sorted(row['kernels']))} at start-up, and CUDA "
                            f"{c.p.cuda.version}'s compiler wheels are not known to dockergen "
                            "(cuda.yaml compiler_wheels): set runtime.jit_toolchain: true",
                            str(row["src"])))
        return None
    kernels = _kernels(c, d, row, engine, facts)
    archs = tuple(sorted({t.cc for t in c.gpus}, key=cc_tuple))
    cuda_home = f"{CUDA_COMPILER_DIR}/{home}"
    d.append(Derivation("engine JIT toolchain", f"{wheels[0]} + g++", f"{engine} JIT-builds "
                        f"{', '.join(sorted(row['kernels']))} at start-up with nvcc and c++ "
                        f"(no fallback): CUDA_HOME={cuda_home} in the runtime image",
                        str(row["src"])))
    return EngineJit(
        engine=engine, toolchain=wheels, target=CUDA_COMPILER_DIR, cuda_home=cuda_home,
        apt=HOST_COMPILER_APT, script_dir=SCRIPT_DIR, cache_dir=CACHE_DIR,
        cache_env=str(row["cache_env"]), crash_env=str(row["crash_env"]),
        override=str(row["override"]),
        archs=archs, kernels=kernels, max_jobs=max(1, c.p.build.memory_gib // JOB_GIB),
        venv=VENV, mode=mode)


def _kernels(c: Context, d: list[Derivation], row: dict[str, Any], engine: str,
             facts: Mapping[str, Any]) -> tuple[JitKernel, ...]:
    """The start-up kernels with the model's arguments; () where the model is unknown. The
    activations' dtype is the checkpoint's unless the profile's quantization sets one
    (``--dtype``, the engine's facts ``quantization.<weights>.dtype``)."""
    shape = _model(c)
    if shape is None:
        d.append(Derivation("engine JIT kernels seeded", "none", f"{engine} compiles "
                            f"{', '.join(sorted(row['kernels']))} at its first start on each "
                            "node (minutes): their arguments come from the model; set "
                            "serving.hf_config to seed them in the image", str(row["src"])))
        return ()
    neox = row.get("rope_neox", {})
    known = next((neox[a] for a in shape.architectures if a in neox), None)
    forced = (facts.get("quantization") or {}).get(c.p.quantization.weights, {}).get("dtype")
    dtype = {"half": "float16"}.get(str(forced), str(forced)) if forced else shape.dtype
    values = {"dtype": TORCH_DTYPES.get(dtype), "rope_dim": shape.head_dim,
              # the model's own setting where the engine reads one (llama.py:335), and only
              # for architectures whose RoPE dockergen has read
              "rope_neox": None if known is None else (
                  known if shape.rope_is_neox_style is None else shape.rope_is_neox_style)}
    out, left = [], []
    for name, k in sorted(row["kernels"].items()):
        reached = all(getattr(c.p.quantization, f) == v for f, v in k.get("when", {}).items())
        if not reached or ("rope_dims" in k and shape.head_dim not in k["rope_dims"]):
            continue  # the engine takes a kernel of its own wheels for this profile
        args = [values[a] for a in k["args"]]
        if any(a is None for a in args):
            left.append(name)
            continue
        out.append(JitKernel(name, str(k["builder"]), tuple(args)))
    d.append(Derivation("engine JIT kernels seeded", ", ".join(k.name for k in out) or "none",
                        f"for {shape.name} ({dtype}, head_dim {shape.head_dim}) on "
                        f"{', '.join(t.given for t in c.gpus)}: a start finds them in the "
                        "image's JIT cache"
                        + (f"; not seeded (dockergen does not know their arguments for this "
                           f"model): {', '.join(left)}" if left else ""),
                        "; ".join(str(row["kernels"][k.name]["src"]) for k in out)))
    return tuple(out)


def _model(c: Context) -> Any:
    """The model's shape from serving.hf_config (None: unset)."""
    config = c.p.serving.hf_config
    if config is None:
        return None
    if config not in builtin_models():
        config = str(c.loaded.path.parent / config)
    try:
        return load_shape(config)
    except PlanError as exc:
        raise ProfileError([Problem(c.at("serving", "hf_config"), "serving.hf_config",
                                    str(exc))]) from None


def context_files(jit: EngineJit | None) -> dict[str, bytes]:
    """The seeding script, the compiler-wheel preparation it shares with the FlashInfer
    stage, and the driver stub (files of templates/context)."""
    if jit is None:
        return {}
    return {name: (templates_dir() / "context" / name).read_bytes()
            for name in (ENGINE_JIT_SCRIPT, FLASHINFER_AOT_SCRIPT, DRIVER_STUB)}


def record(jit: EngineJit | None) -> dict[str, Any] | None:
    """What the profile hash covers of it."""
    if jit is None:
        return None
    return {"toolchain": list(jit.toolchain), "archs": list(jit.archs),
            "kernels": jit.kernel_rows}


def load_check(jit: EngineJit) -> CommandCheck:
    """Every seeded kernel is found in the image's JIT cache, as the runtime user, with the
    engine's own switch that turns a cache miss into an error and the cache folder the
    image's environment names, for every GPU target (the image's copy of the script)."""

    def verify(code: int, out: str) -> tuple[bool, str]:
        # the script's JSON line; a library may still print after it as the process ends
        # (a cache miss left "Cannot detect CUDA architecture." below it, 2026-12-06)
        rows = [line for line in out.strip().splitlines() if line.startswith("{")]
        try:
            got = json.loads(rows[-1])
        except (ValueError, IndexError):
            return False, out.strip()[-500:] or f"exit {code}"
        if not isinstance(got, dict):
            return False, out.strip()[-500:]
        bad = [f"{arch} {name}: {state}" for arch, row in sorted(got.items())
               for name, state in sorted(row.items()) if state != "cached"]
        missing = [f"{a} {k.name}: not tried" for a in jit.archs for k in jit.kernels
                   if k.name not in got.get(a, {})]
        if code != 0 or bad or missing:
            return False, "; ".join(bad + missing)[:800]
        return True, (f"{len(jit.kernels)} kernel(s) ({', '.join(k.name for k in jit.kernels)})"
                      f" found for {', '.join(jit.archs)} with {jit.crash_env}=1")

    return CommandCheck(f"{jit.engine}'s start-up JIT kernels are in the image's cache "
                        f"({', '.join(k.name for k in jit.kernels)})",
                        (f"{jit.venv}/bin/python", f"{jit.script_dir}/{ENGINE_JIT_SCRIPT}", "check",
                         "--archs", ",".join(jit.archs), "--override", jit.override,
                         "--crash-env", jit.crash_env, "--kernels", jit.kernels_json),
                        verify)
