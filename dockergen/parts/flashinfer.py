"""FlashInfer's start-up kernels, compiled in the build for the profile's GPUs.

An engine that pins flashinfer-python runs some of its kernels at start-up or at the first
request (vLLM's top-k/top-p sampler, in its dummy sampler run). flashinfer-python ships no
compiled kernels: without them FlashInfer JIT-builds each module with nvcc at that moment,
which the runtime image does not carry (a start that fails), and which costs minutes where it
does. This component decides the ``flashinfer-aot`` stage: which modules (the engine's facts
``flashinfer_aot``, read from the release's sources), for which archs (the GPU targets), with
which compiler (CUDA's compiler wheels at the profile's CUDA version, so the devel image
needs none), and the smoke check that loads every module with JIT disabled.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dockergen.parts import cuda, python
from dockergen.resolve.context import Context
from dockergen.resolve.model import (
    CUDA_COMPILER_DIR,
    DRIVER_STUB,
    FLASHINFER_AOT_OUT,
    FLASHINFER_AOT_SCRIPT,
    VENV,
    CommandCheck,
    Derivation,
    FlashInferAotStage,
    FlashInferModule,
    GpuTarget,
    Mode,
    RuntimeCopy,
    cc_tuple,
    last_json_line,
)
from dockergen.resources import templates_dir

# GiB one of FlashInfer's nvcc jobs may take: the largest measured, one FP8 MoE file for
# sm_90, peaked at 4.6 GB (shared/reference/platform-notes.md, 2026-12-06); the profile's build
# memory bounds the parallel jobs (ninja's -j, MAX_JOBS) as it does flash-attn's
JOB_GIB = 5


def arch_of(target: GpuTarget) -> str:
    """FLASHINFER_CUDA_ARCH_LIST's value for a GPU: ``9.0a`` from Hopper on (FlashInfer
    compiles the arch-specific variant there, flashinfer/compilation_context.py), the plain
    capability before."""
    return target.cc + ("a" if cc_tuple(target.cc) >= (9, 0) else "")


def derive(c: Context, d: list[Derivation], facts: Mapping[str, Any], flashinfer: str | None,
           mode: Mode) -> FlashInferAotStage | None:
    """The stage for an engine release whose start-up FlashInfer modules are known (its
    facts' ``flashinfer_aot``) and that installs ``flashinfer`` (flashinfer-python's
    version); None otherwise, with the reason in the derivations."""
    row = (facts.get("flashinfer_aot") or {}).get(c.p.engine.version)
    if row is not None and flashinfer is not None and not c.p.build.flashinfer_aot:
        d.append(Derivation("FlashInfer kernels ahead of time", "off", "from "
                            "build.flashinfer_aot: false: the engine JIT-compiles "
                            f"{', '.join(sorted(row['modules']))} at its first start, which "
                            "needs nvcc on the node (runtime.jit_toolchain)", ""))
        return None
    if row is None or flashinfer is None:
        if flashinfer is not None:
            d.append(Derivation("FlashInfer kernels ahead of time", "none", f"which FlashInfer "
                                f"modules {c.p.engine.name} {c.p.engine.version} runs at "
                                "start-up was not read from its sources: they JIT-build at "
                                "first use, where nvcc is found", "flashinfer_aot"))
        return None
    major = c.p.cuda.version.split(".")[0]
    home = cuda.CUDA_HOME_IN_WHEELS.get(major)
    # FlashInfer's sources include cuRAND's and cuBLAS's headers
    nvcc = cuda.compiler_wheels(c.facts, c.p.cuda.version, "nvcc,cccl,cudart,curand,cublas")
    if home is None or nvcc is None:
        d.append(Derivation("FlashInfer kernels ahead of time", "none", f"CUDA "
                            f"{c.p.cuda.version}'s compiler wheels are not known to dockergen "
                            "(cuda.yaml compiler_wheels): FlashInfer JIT-builds at first use, "
                            "where nvcc is found", "flashinfer_aot"))
        return None
    archs = sorted({arch_of(t) for t in c.gpus}, key=lambda a: cc_tuple(a.rstrip("a")))
    modules = tuple(FlashInferModule(name, spec) for name, spec in sorted(row["modules"].items()))
    jobs = max(1, c.p.build.memory_gib // JOB_GIB)
    d.append(Derivation("FlashInfer kernels ahead of time", ", ".join(m.name for m in modules),
                        f"{c.p.engine.name} {c.p.engine.version} runs them at start-up or at "
                        f"the first request ({row['why']}); built in the flashinfer-aot stage "
                        f"for {' '.join(archs)} with {nvcc[0]}, loaded from flashinfer/data/aot "
                        "before any JIT", str(row["src"])))
    return FlashInferAotStage(
        version=flashinfer, modules=modules, arch_list=" ".join(archs),
        nvcc=nvcc,
        ninja=f"ninja=={python.tool(c.facts, 'ninja')}",
        # the compiler wheels in a folder of the stage, never in the venv: build tools
        cuda_home=f"{CUDA_COMPILER_DIR}/{home}", target=CUDA_COMPILER_DIR, max_jobs=jobs, venv=VENV,
        mode=mode,
        aot_dir=f"{VENV}/lib/python{c.p.python}/site-packages/flashinfer/data/aot")


def context_files(stage: FlashInferAotStage | None) -> dict[str, bytes]:
    """The stage's script and the driver stub it links against (files of
    templates/context)."""
    if stage is None:
        return {}
    return {name: (templates_dir() / "context" / name).read_bytes()
            for name in (FLASHINFER_AOT_SCRIPT, DRIVER_STUB)}


def runtime_copies(stage: FlashInferAotStage | None) -> tuple[RuntimeCopy, ...]:
    """The built modules go where the installed FlashInfer looks first."""
    if stage is None:
        return ()
    return (RuntimeCopy(f"{FLASHINFER_AOT_OUT}/", f"{stage.aot_dir}/", "flashinfer-aot"),)


# Each module loaded the way the engine loads it (the JIT spec's build_and_load), with JIT
# disabled: a module that is not in flashinfer/data/aot, or does not load, raises
# (MissingJITCacheError) instead of compiling; FlashInfer logs the real reason of a library
# that is there but does not load only as a warning, so the library is then loaded directly to
# say why. torch first: it loads the CUDA runtime the modules link; the driver library is the
# stand-in of driver_stub.py (no GPU here), and so is the arch list FlashInfer would detect.
LOAD_PROBE = """
import importlib, json, os, sys
os.environ["FLASHINFER_DISABLE_JIT"] = "1"
os.environ["FLASHINFER_CUDA_ARCH_LIST"] = sys.argv[2]
libcuda_stub()
import torch  # noqa: F401
out = {}
for item in json.loads(sys.argv[1]):
    module, _, function = item["spec"].partition(":")
    spec = getattr(importlib.import_module(module), function)()
    try:
        spec.build_and_load()
        out[item["name"]] = "loaded"
        continue
    except Exception as exc:
        said = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:160])
    import flashinfer.jit.env as env, tvm_ffi
    path = env.FLASHINFER_AOT_DIR / item["name"] / (item["name"] + ".so")
    if not path.is_file():
        said += " (no %s in flashinfer/data/aot)" % path.name
    else:
        try:
            tvm_ffi.load_module(str(path))
        except Exception as exc:
            said += " (%s does not load: %s)" % (path.name, str(exc).splitlines()[0][:160])
    out[item["name"]] = said
print(json.dumps(out, sort_keys=True))
"""


def load_check(stage: FlashInferAotStage, driver_stub: str) -> CommandCheck:
    """Every start-up module loads from the image with FlashInfer's JIT disabled."""
    items = [{"name": m.name, "spec": m.spec} for m in stage.modules]

    def verify(code: int, out: str) -> tuple[bool, str]:
        got = last_json_line(out)
        if got is None:
            return False, out.strip()[-500:] or f"exit {code}"
        bad = [f"{name}: {state}" for name, state in sorted(got.items()) if state != "loaded"]
        missing = [m.name for m in stage.modules if m.name not in got]
        if code != 0 or bad or missing:
            return False, "; ".join(bad + [f"{m}: not tried" for m in missing])[:800]
        return True, (f"{len(got)} module(s) ({', '.join(sorted(got))}) loaded with "
                      "FLASHINFER_DISABLE_JIT=1")

    return CommandCheck("FlashInfer's start-up kernels load without JIT "
                        f"({', '.join(m.name for m in stage.modules)})",
                        (f"{stage.venv}/bin/python", "-c", driver_stub + LOAD_PROBE,
                         json.dumps(items, sort_keys=True), stage.arch_list), verify)
