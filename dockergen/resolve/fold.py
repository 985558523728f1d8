"""Check a loaded profile with every component, then assemble the typed resolved model.

The components (:mod:`dockergen.parts`) each check and derive their own piece; this
module runs them in their one-way order (CUDA base -> Python -> serving engine's release ->
torch -> flash-attn -> the rest of the serving engine -> the image) and puts their slices
together into a :class:`~dockergen.resolve.model.Resolved`: the stages the templates format, the
lock data written next to the Dockerfile, the derivations ``dockergen explain`` prints.
The base-image lock beside the profile (``PROFILE.lock.json``) is an input of resolution,
read here and nowhere else, so that every output resolves the same pinned images.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from collections.abc import Callable, Iterable
from types import MappingProxyType
from typing import Any

from dockergen import __version__
from dockergen.errors import Edit, Problem, ProfileError, Severity
from dockergen.input.loader import LoadedProfile, with_overrides
from dockergen.input.pins import read_pins
from dockergen.input.profile import Profile
from dockergen.knowledge import reproducible
from dockergen.parts import cuda, engine_jit, fields, flash_attn, flashinfer, image, python, torch
from dockergen.parts.engines import engine_for
from dockergen.parts.engines.base import ServingEngine, ServingPart
from dockergen.parts.engines.run import ARBITRARY_UID_GID
from dockergen.resolve.context import Context
from dockergen.resolve.model import (
    APP_HOME,
    CERT_DIR,
    MAIN_INDEX,
    BuildBase,
    CudaBase,
    Derivation,
    EngineJit,
    FlashAttnStage,
    GivenCertificate,
    Inputs,
    Mode,
    Resolved,
    RuntimeCopy,
    RuntimeStage,
    TorchInstall,
)


def checks(loaded: LoadedProfile, python_lock: bool = True) -> list[Callable[[Context], None]]:
    """Every check of a profile, in the order the components depend on each other.

    ``python_lock=False`` leaves the profile's Python lock out (``dockergen lock --python``
    resolves the profile to refresh a lock that may no longer match it).
    """
    return rules(engine_for(loaded.profile.engine.name), python_lock)


def rules(engine: ServingEngine, python_lock: bool = True) -> list[Callable[[Context], None]]:
    """The rules of a profile served by ``engine``, in the order they run (the resolution
    entry of the check registry, :mod:`dockergen.checks`)."""
    return [cuda.check_gpus, cuda.check_platform, cuda.check_cuda, cuda.check_locked,
            engine.check_release, engine.check_platform_wheels, engine.check_closure_wheels,
            engine.check_kernels, engine.check_flashinfer_on_pypi, torch.check,
            python.check_python_source, flash_attn.check, engine.check_quantization,
            engine.check_scheduler, engine.check_server_args, engine.check_model_path,
            engine.check_extra_args, engine.check_packages, image.check_tags,
            cuda.check_ca_certificates, fields.check_unused,
            *([engine.check_python_lock] if python_lock else [])]


def check(loaded: LoadedProfile, inputs: Inputs | None = None, prove: bool = True
          ) -> Context:
    """Run every check; the returned context holds all problems and the GPU targets.

    Each error's candidate fixes are tried (``prove``): only those that leave no error and
    no warning the profile did not already have are offered, so following a fix never
    leads into the next rule's error or warning.
    """
    inputs = inputs or Inputs()
    ctx = Context(loaded, inputs)
    for rule in checks(loaded, inputs.python_lock):
        rule(ctx)
    if prove:
        ctx.problems = _proven(ctx.problems, loaded, inputs)
    return ctx


# how many working alternatives a fix offers per field it changes ("use CUDA 13.0.2 or
# 13.2.2, or use vllm 0.19.1"); the candidates come closest first
ALTERNATIVES_PER_FIELD = 2
# a candidate that fixes its problem but trips another rule is tried together with that
# rule's own candidates, up to this many pairs per problem
PAIRS_PER_PROBLEM = 24

Key = tuple[str, str]
# what an error says when every candidate fix broke another rule
NO_ONE_CHANGE = ("no single change fixes this with the rest of the profile as it is (each "
                 "candidate broke another rule): fix the other errors first, then validate "
                 "again")


def _proven(problems: list[Problem], loaded: LoadedProfile, inputs: Inputs
            ) -> list[Problem]:
    """``problems`` with each error's edits cut to those that work when applied: no error
    the profile did not have and, where any candidate manages it, no new warning either
    (a fix that trades an error for "torch has no wheels for that CUDA" is a poor fix; it
    is offered only where every working one warns)."""
    before = {p.identity() for p in problems if p.severity is Severity.ERROR}
    # a warning is new where no warning was on its field: the same rule warning with the
    # values the fix changed (torch 2.13 -> 2.14 "has no wheels for CUDA 13.1") is not, nor
    # is a switched-off feature's setting left without effect (the fix's own consequence)
    warned = {p.field for p in problems if p.severity is Severity.WARNING}
    tried: dict[Edit, list[Problem] | None] = {}

    def problems_with(edit: Edit) -> list[Problem] | None:
        if edit not in tried:
            tried[edit] = _problems_with(edit, loaded, inputs)
        return tried[edit]

    def works(edit: Edit, fixes: Key, quiet: bool) -> bool:
        after = problems_with(edit)
        return after is not None and all(
            p.identity() != fixes and (
                p.identity() in before if p.severity is Severity.ERROR
                else not quiet or p.field in warned or p.message.startswith(fields.UNUSED))
            for p in after)

    def kept_of(problem: Problem, drastic: bool, quiet: bool) -> list[Edit]:
        edits = [e for e in problem.edits if e.drastic == drastic]
        kept = _first_per_field(e for e in edits if works(e, problem.identity(), quiet))
        if kept:
            return kept
        # no one change does it: a change and what the next rule then asks for
        pairs = (Edit(f"{edit.text} and {then.text}", edit.sets + then.sets,
                      edit.drastic or then.drastic)
                 for edit in problem.edits if edit.drastic <= drastic
                 for new in (problems_with(edit) or ())
                 if new.severity is Severity.ERROR and new.identity() not in before
                 for then in new.edits if (edit.drastic or then.drastic) == drastic)
        return _first_per_field(pair for pair in itertools.islice(pairs, PAIRS_PER_PROBLEM)
                                if works(pair, problem.identity(), quiet))

    out = []
    for problem in problems:
        if not problem.edits:
            out.append(problem)
            continue
        # software first: other hardware only where no change of the software does it
        kept = next((k for drastic in (False, True) for quiet in (True, False)
                     if (k := kept_of(problem, drastic, quiet))), [])
        proven = problem.keeping(tuple(kept))
        out.append(proven if proven.fix else dataclasses.replace(proven, fix=NO_ONE_CHANGE))
    return out


def _first_per_field(edits: Iterable[Edit]) -> list[Edit]:
    """The first :data:`ALTERNATIVES_PER_FIELD` edits of each field set first."""
    kept: list[Edit] = []
    for edit in edits:
        if sum(e.sets[0][0] == edit.sets[0][0] for e in kept) < ALTERNATIVES_PER_FIELD:
            kept.append(edit)
    return kept


def _problems_with(edit: Edit, loaded: LoadedProfile, inputs: Inputs
                   ) -> list[Problem] | None:
    """The problems (errors and warnings) of ``loaded`` with ``edit`` applied, each with
    its candidate edits unproven (None: the edit is not a profile)."""
    try:
        edited = with_overrides(loaded, edit.overrides())
    except ProfileError:
        return None
    return check(edited, inputs, prove=False).problems


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


def resolve(loaded: LoadedProfile, mode: Mode = "buildkit", python_lock: bool = True,
            pin: bool = True, certificates: tuple[GivenCertificate, ...] = ()) -> Resolved:
    """Check a loaded profile and derive everything; raise :class:`ProfileError` on errors.

    The profile's user knowledge (``knowledge:`` files) joins the shipped facts for this
    resolve only, and every user fact is listed in the derivations (``explain``). The
    base images are pinned from the lock beside the profile, if there is one; ``pin=False``
    leaves it out (``dockergen lock`` resolves the unpinned images it is about to pin).
    ``certificates``: CA certificates the command was given (``build --ca-cert``), beside
    the profile's own.
    """
    inputs = Inputs(read_pins(loaded.path) if pin else None, certificates, python_lock)
    resolved = _resolve(loaded, mode, inputs)
    added = tuple(Derivation(f"user fact {component}", f"{table} {key}",
                             f"added by {row['user']}, not shipped with dockergen", row["src"])
                  for component, tables in sorted(loaded.user_facts.items())
                  for table, rows in sorted(tables.items())
                  for key, row in sorted(rows.items()))
    return dataclasses.replace(resolved, derivations=resolved.derivations + added)


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
                   fa: FlashAttnStage | None, serving: ServingPart, env: dict[str, str],
                   labels: dict[str, str], mode: Mode, after_venv: tuple[RuntimeCopy, ...],
                   jit_apt: tuple[str, ...]) -> RuntimeStage:
    """The runtime stage: the CUDA runtime image with the venv, the server and its checks."""
    p = ctx.p
    uid, start_period = p.runtime.uid, p.serving.health_start_period_s
    layers = python.venv_layers(ctx.facts, p.python, p.cuda.version.split(".")[0], mode,
                                               serving.layer_packages)
    return RuntimeStage(
        image=cuda_part.runtime_image,
        apt=tuple(sorted(set(cuda_part.runtime_apt + python_part.runtime_apt
                             + serving.runtime_apt + jit_apt))),
        uid=uid, home=APP_HOME, venv=python_part.setup.venv,
        copies=python_part.copies + flash_attn.runtime_copies(fa) + serving.copies,
        env=MappingProxyType(dict(sorted(env.items()))),
        labels=MappingProxyType(labels),
        port=p.serving.port, health_cmd=serving.health_cmd,
        health_start_period=start_period,
        entrypoint=tuple(serving.serve.entrypoint), cmd=tuple(serving.serve.args),
        jit_toolchain=p.runtime.jit_toolchain, jit_c_compiler=serving.c_compiler,
        venv_layers=layers, after_venv=after_venv,
        home_group=ARBITRARY_UID_GID, build_noise=reproducible.BUILD_NOISE,
    )


def _build_base(ctx: Context, cuda_part: cuda.CudaPart, python_part: python.PythonPart,
                torch_install: TorchInstall) -> BuildBase:
    """The build-base stage: the devel image with every build stage's packages, Python, torch."""
    return BuildBase(
        cuda=CudaBase(image=cuda_part.base.image,
                      apt=tuple(sorted(cuda_part.base.apt + python_part.build_apt
                                        + flash_attn.build_apt(ctx))),
                      ca_certificates=cuda_part.base.ca_certificates,
                      cert_dir=cuda_part.base.cert_dir),
        python=python_part.setup, torch=torch_install)


def _resolve(loaded: LoadedProfile, mode: Mode, inputs: Inputs) -> Resolved:
    ctx = check(loaded, inputs)
    if any(pr.severity is Severity.ERROR for pr in ctx.problems):
        raise ProfileError(ctx.problems)
    p = loaded.profile
    engine = engine_for(p.engine.name)
    d: list[Derivation] = []

    cuda_part = cuda.derive(ctx, d)
    python_part = python.derive(ctx, d, mode)
    torch_install = torch.derive(ctx, d, mode)
    fa = flash_attn.derive(ctx, d, cuda_part.arch_list, mode)
    serving = engine.derive(ctx, d, torch_install, fa is not None, mode)
    aot = flashinfer.derive(ctx, d, engine.facts(ctx.facts), (engine.flashinfer_row(ctx) or {}).get(
        "python"), mode)
    jit = engine_jit.derive(ctx, d, engine.facts(ctx.facts), mode)  # the engine's own start-up JIT

    base = _build_base(ctx, cuda_part, python_part, torch_install)
    env = _runtime_env(loaded, {**cuda_part.env, **python_part.env, **serving.env,
                                **(jit.env if jit else {})}, d)
    release_tags = image.tags(p)
    stage = serving.stage
    record_core = _record_core(p, ctx, cuda_part, python_part, fa, base, serving, release_tags,
                               jit)
    canonical = json.dumps(record_core, sort_keys=True, separators=(",", ":"))
    profile_hash = "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    labels = image.labels(p, cuda_part.runtime_image, profile_hash, {
        **cuda_part.labels,
        "dockergen.flash-attn.archs": fa.archs if fa else "none",
        "dockergen.engine": stage.requirement,
        "dockergen.torch": torch_install.version,
    }, d)
    d.append(Derivation("USER", f"{p.runtime.uid}:{p.runtime.uid}", "from runtime.uid: the "
                        "numeric non-root user of the runtime image (label "
                        "dockergen.runtime.uid)", ""))
    d.append(Derivation("HEALTHCHECK --start-period", f"{p.serving.health_start_period_s}s",
                        "from serving.health_start_period_s: time for model loading before "
                        "failed health checks count", ""))
    runtime = _runtime_stage(ctx, cuda_part, python_part, fa, serving, env, labels, mode,
                             flashinfer.runtime_copies(aot), jit.apt if jit else ())
    smoke = [torch.smoke_import(torch_install), *serving.smoke,
             *([flash_attn.smoke_import(fa)] if fa is not None else [])]
    record = {"dockergen": __version__, "mode": mode, "profile_hash": profile_hash, **record_core}
    return Resolved(
        profile=p, mode=mode, source_name=loaded.path.name,
        chain=tuple(c.rsplit("/", 1)[-1] for c in loaded.chain),
        gpus=tuple(ctx.gpus), base=base, flash_attn=fa, engine=stage, runtime=runtime,
        flashinfer_aot=aot, engine_jit=jit, context_files=MappingProxyType({
            **flashinfer.context_files(aot), **engine_jit.context_files(jit),
            **python_part.context_files, **serving.serve.context_files, **serving.context_files,
            **{f"{CERT_DIR}/extra-{i}.crt": pem for i, pem in enumerate(ctx.certificates)}}),
        tags=tuple(release_tags),  # the dg-<hash> tag of the inputs: `build` adds it
        record=MappingProxyType(record), profile_hash=profile_hash,
        min_driver=cuda_part.min_driver,
        main_index=python_part.setup.pip_index_url or MAIN_INDEX,
        python_lock_inputs=engine.lock_inputs(ctx), smoke_imports=tuple(smoke),
        arch_scopes=serving.arch_scopes, serve_parser=serving.serve_parser,
        startup_import=serving.startup_import, derivations=tuple(d),
        warnings=tuple(pr for pr in ctx.problems if pr.severity is Severity.WARNING),
    )
