"""The last step of a resolution: the typed resolved model from the parts' values.

The fold (:mod:`dockergen.resolve.fold`) derives every part of :func:`dockergen.parts.lineup.
for_engine` and merges their shares; :func:`assemble` builds what needs specific parts: the
build base, the record the profile hash covers, the labels that carry the hash, the runtime
stage with its environment (serving.env checked against what the image depends on), and the
:class:`~dockergen.resolve.model.Resolved` itself.
"""

from __future__ import annotations

import hashlib
import json
from types import MappingProxyType
from typing import Any

from dockergen import __version__
from dockergen.errors import Problem, ProfileError, Severity
from dockergen.input.loader import LoadedProfile
from dockergen.input.profile import Profile
from dockergen.knowledge import reproducible
from dockergen.parts import cuda, engine_jit, image, python
from dockergen.parts.engines import engine_for
from dockergen.parts.engines.base import ServingPart
from dockergen.parts.engines.run import ARBITRARY_UID_GID
from dockergen.resolve.context import Context
from dockergen.resolve.fold import Folded
from dockergen.resolve.model import (
    APP_HOME,
    MAIN_INDEX,
    BuildBase,
    CudaBase,
    Derivation,
    EngineJit,
    FlashAttnStage,
    FlashInferAotStage,
    Mode,
    Resolved,
    RuntimeStage,
    TorchInstall,
)
from dockergen.resolve.part import Contribution

# Set by the images themselves or by the runtime stage's own ENV lines (runtime.j2 puts the
# venv first on PATH; the nvidia/cuda images set LD_LIBRARY_PATH for libcuda; uv's
# relocatable CPython must not see a PYTHONHOME).
_RESERVED_ENV = {
    "PATH": "is set by the runtime stage (the venv's bin first, where the server lives)",
    "LD_LIBRARY_PATH": "is set by the CUDA base image so that libcuda is found",
    "PYTHONHOME": "would point the venv's Python at another standard library"}


def _check_env_names(loaded: LoadedProfile, derived: dict[str, str]) -> None:
    """serving.env must not replace what dockergen's image depends on (it happened: an env
    PATH hid `vllm`, and NVIDIA_DRIVER_CAPABILITIES was silently overridden)."""
    problems = []
    for name in sorted(loaded.profile.serving.env):
        if name in derived:
            why = f"is set by dockergen to {derived[name]!r}, which the image depends on"
        elif name in _RESERVED_ENV:
            why = _RESERVED_ENV[name]
        else:
            continue
        problems.append(Problem(loaded.at("serving", "env", name), f"serving.env.{name}",
                                f"{name} {why}; it cannot be overridden here",
                                f"remove {name} from serving.env (docker run -e {name}=... "
                                "still overrides it at run time, on purpose)"))
    if problems:
        raise ProfileError(problems)


def _runtime_env(loaded: LoadedProfile, derived: dict[str, str], d: list[Derivation]
                 ) -> dict[str, str]:
    """The runtime image's environment: what dockergen derives, then serving.env (which may
    not replace what the image depends on)."""
    _check_env_names(loaded, derived)
    user = loaded.profile.serving.env
    for name, value in sorted(user.items()):
        d.append(Derivation(f"env {name}", value, "from serving.env (runtime image)", ""))
    return {**derived, **user}


def _record_core(p: Profile, ctx: Context, cuda_part: cuda.CudaPart,
               python_part: python.PythonPart, fa: FlashAttnStage | None, base: BuildBase,
               serving: ServingPart, release_tags: list[str], jit: EngineJit | None
               ) -> dict[str, Any]:
    """What the profile hash covers: the profile's image inputs and every derived value."""
    torch_install, stage = base.torch, serving.stage
    return {
        # matrix: variants are resolved with it removed; cache_ref/attest only steer the
        # bake target, not the image content, so they leave the hash (and dg- tag) alone.
        # serving.hf_config feeds `plan`/`validate`, and the image only through the engine's
        # seeded JIT kernels (resolved.engine_jit, hashed there); observe: only monitoring
        # (dockergen observe): neither changes the hash or tags by itself.
        "profile": p.model_dump(mode="json", exclude={
            "extends": True, "abstract": True, "matrix": True, "observe": True,
            "image": {"cache_ref", "attest"}, "serving": {"hf_config"}}),
        "resolved": {
            "gpu": [{"target": t.given, "cc": t.cc} for t in ctx.gpus],
            "torch_cuda_arch_list": cuda_part.arch_list,
            "flash_attn_cuda_archs": fa.archs if fa else None,
            "flash_attn_expected_sass": fa.expect.split(",") if fa else [],
            "max_jobs": fa.max_jobs if fa else None,
            "devel_image": base.cuda.image,
            "runtime_image": cuda_part.runtime_image,
            "min_driver": cuda_part.min_driver,
            "torch": torch_install.version,
            "torch_index": torch_install.index,
            "engine": stage.requirement,
            # where everything else comes from: build.pip_index_url (PIP_INDEX_URL,
            # UV_DEFAULT_INDEX of the build stages) or PyPI
            "main_index": python_part.setup.pip_index_url or MAIN_INDEX,
            "package_indexes": list(stage.indexes),
            "uv": python_part.setup.uv_version,
            "entrypoint": list(serving.serve.entrypoint),
            "cmd": list(serving.serve.args),
            "tags": release_tags,
            # an engine without start-up JIT keeps its hash (and dg- tag)
            **({"engine_jit": engine_jit.record(jit)} if jit is not None else {}),
        },
    }


def _runtime_stage(ctx: Context, cuda_part: cuda.CudaPart, python_part: python.PythonPart,
                   serving: ServingPart, merged: Contribution, env: dict[str, str],
                   labels: dict[str, str], mode: Mode) -> RuntimeStage:
    """The runtime stage: the CUDA runtime image with the venv, the server and its checks."""
    p = ctx.p
    uid, start_period = p.runtime.uid, p.serving.health_start_period_s
    layers = python.venv_layers(ctx.facts, p.python, p.cuda.version.split(".")[0], mode,
                                               serving.layer_packages)
    return RuntimeStage(
        image=cuda_part.runtime_image,
        apt=merged.runtime_apt,
        uid=uid, home=APP_HOME, venv=python_part.setup.venv,
        copies=merged.copies,
        env=MappingProxyType(dict(sorted(env.items()))),
        labels=MappingProxyType(labels),
        port=p.serving.port, health_cmd=serving.health_cmd,
        health_start_period=start_period,
        entrypoint=tuple(serving.serve.entrypoint), cmd=tuple(serving.serve.args),
        jit_toolchain=p.runtime.jit_toolchain, jit_c_compiler=serving.c_compiler,
        venv_layers=layers, after_venv=merged.after_venv,
        home_group=ARBITRARY_UID_GID, build_noise=reproducible.BUILD_NOISE,
    )


def _build_base(cuda_part: cuda.CudaPart, python_part: python.PythonPart,
                torch_install: TorchInstall, apt: tuple[str, ...]) -> BuildBase:
    """The build-base stage: the devel image with every build stage's packages, Python, torch."""
    return BuildBase(
        cuda=CudaBase(image=cuda_part.base.image,
                      apt=apt,
                      ca_certificates=cuda_part.base.ca_certificates,
                      cert_dir=cuda_part.base.cert_dir),
        python=python_part.setup, torch=torch_install)


def assemble(ctx: Context, folded: Folded, d: list[Derivation], mode: Mode) -> Resolved:
    """The resolved model of a checked profile from its parts' values and merged shares."""
    loaded, p, v, merged = ctx.loaded, ctx.p, folded.values, folded.merged
    cuda_part: cuda.CudaPart = v["cuda"]
    python_part: python.PythonPart = v["python"]
    torch_install: TorchInstall = v["torch"]
    fa: FlashAttnStage | None = v["flash_attn"]
    serving: ServingPart = v["engine"]
    aot: FlashInferAotStage | None = v["flashinfer"]
    jit: EngineJit | None = v["engine_jit"]
    base = _build_base(cuda_part, python_part, torch_install, merged.build_apt)
    env = _runtime_env(loaded, dict(merged.env), d)
    release_tags = image.tags(p)
    record_core = _record_core(p, ctx, cuda_part, python_part, fa, base, serving, release_tags,
                               jit)
    canonical = json.dumps(record_core, sort_keys=True, separators=(",", ":"))
    profile_hash = "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    labels = image.labels(p, cuda_part.runtime_image, profile_hash, dict(merged.labels), d)
    d.append(Derivation("USER", f"{p.runtime.uid}:{p.runtime.uid}", "from runtime.uid: the "
                        "numeric non-root user of the runtime image (label "
                        "dockergen.runtime.uid)", ""))
    d.append(Derivation("HEALTHCHECK --start-period", f"{p.serving.health_start_period_s}s",
                        "from serving.health_start_period_s: time for model loading before "
                        "failed health checks count", ""))
    runtime = _runtime_stage(ctx, cuda_part, python_part, serving, merged, env, labels, mode)
    record = {"dockergen": __version__, "mode": mode, "profile_hash": profile_hash, **record_core}
    return Resolved(
        profile=p, mode=mode, source_name=loaded.path.name,
        chain=tuple(c.rsplit("/", 1)[-1] for c in loaded.chain),
        gpus=tuple(ctx.gpus), base=base, flash_attn=fa, engine=serving.stage, runtime=runtime,
        flashinfer_aot=aot, engine_jit=jit, context_files=MappingProxyType(
            dict(merged.context_files)),
        tags=tuple(release_tags),  # the dg-<hash> tag of the inputs: `build` adds it
        record=MappingProxyType(record), profile_hash=profile_hash,
        min_driver=cuda_part.min_driver,
        main_index=python_part.setup.pip_index_url or MAIN_INDEX,
        python_lock_inputs=engine_for(p.engine.name).lock_inputs(ctx),
        smoke_imports=merged.smoke, arch_scopes=serving.arch_scopes,
        serve_parser=serving.serve_parser, startup_import=serving.startup_import,
        derivations=tuple(d),
        warnings=tuple(pr for pr in ctx.problems if pr.severity is Severity.WARNING),
    )
