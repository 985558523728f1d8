"""The parts of a profile, in the order their rules run and their derivations are listed.

Each piece of the image is a :class:`~dockergen.resolve.part.Part`; a piece whose rules or
derivations sit at two places of the order is two parts (the serving engine's release
rules run before torch's, its serving rules after flash-attn's; flash-attn's smoke check
runs after the engine's; the certificates, the unused-field warnings and the Python lock
are checked last). :func:`for_engine` is the list the fold is handed
(:mod:`dockergen.resolve.fold`), :func:`~dockergen.parts.assemble.assemble` its last step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dockergen.parts import cuda, engine_jit, fields, flash_attn, flashinfer, image, python, torch
from dockergen.parts.engines import engine_for
from dockergen.parts.engines.base import ServingEngine
from dockergen.resolve.context import Context
from dockergen.resolve.model import CERT_DIR, Derivation, Mode
from dockergen.resolve.part import Contribution, Part

Got = Mapping[str, Any]


def _cuda(ctx: Context, d: list[Derivation], got: Got, mode: Mode) -> Contribution:
    part = cuda.derive(ctx, d)
    return Contribution(part, build_apt=part.base.apt, runtime_apt=part.runtime_apt,
                        env=part.env, labels=part.labels)


def _python(ctx: Context, d: list[Derivation], got: Got, mode: Mode) -> Contribution:
    part = python.derive(ctx, d, mode)
    return Contribution(part, build_apt=part.build_apt, runtime_apt=part.runtime_apt,
                        env=part.env, copies=part.copies, context_files=part.context_files)


def _torch(ctx: Context, d: list[Derivation], got: Got, mode: Mode) -> Contribution:
    install = torch.derive(ctx, d, mode)
    return Contribution(install, labels={"dockergen.torch": install.version},
                        smoke=(torch.smoke_import(install),))


def _flash_attn(ctx: Context, d: list[Derivation], got: Got, mode: Mode) -> Contribution:
    stage = flash_attn.derive(ctx, d, got["cuda"].arch_list, mode)
    return Contribution(stage, build_apt=flash_attn.build_apt(ctx),
                        copies=flash_attn.runtime_copies(stage),
                        labels={"dockergen.flash-attn.archs": stage.archs if stage else "none"})


def _flash_attn_smoke(ctx: Context, d: list[Derivation], got: Got, mode: Mode
                      ) -> Contribution:
    stage = got["flash_attn"]
    return Contribution(smoke=(flash_attn.smoke_import(stage),) if stage is not None else ())


def _certificates(ctx: Context, d: list[Derivation], got: Got, mode: Mode) -> Contribution:
    return Contribution(context_files={f"{CERT_DIR}/extra-{i}.crt": pem
                                       for i, pem in enumerate(ctx.certificates)})


def _engine_parts(engine: ServingEngine) -> tuple[Part, Part, Part, Part]:
    """The engine's release rules, its serving part, FlashInfer's AOT kernels and its
    start-up JIT (both read the engine's own facts)."""

    def serving(ctx: Context, d: list[Derivation], got: Got, mode: Mode) -> Contribution:
        part = engine.derive(ctx, d, got["torch"], got["flash_attn"] is not None, mode)
        return Contribution(part, runtime_apt=part.runtime_apt, env=part.env,
                            copies=part.copies, smoke=part.smoke,
                            labels={"dockergen.engine": part.stage.requirement},
                            context_files={**part.serve.context_files, **part.context_files})

    def aot(ctx: Context, d: list[Derivation], got: Got, mode: Mode) -> Contribution:
        stage = flashinfer.derive(ctx, d, engine.facts(ctx.facts),
                                  (engine.flashinfer_row(ctx) or {}).get("python"), mode)
        return Contribution(stage, after_venv=flashinfer.runtime_copies(stage),
                            context_files=flashinfer.context_files(stage))

    def jit(ctx: Context, d: list[Derivation], got: Got, mode: Mode) -> Contribution:
        # the engine's own start-up JIT
        found = engine_jit.derive(ctx, d, engine.facts(ctx.facts), mode)
        return Contribution(found, env=found.env if found else {},
                            runtime_apt=found.apt if found else (),
                            context_files=engine_jit.context_files(found))

    return (Part("engine-release", rules=(
                engine.check_release, engine.check_platform_wheels,
                engine.check_closure_wheels, engine.check_kernels,
                engine.check_flashinfer_on_pypi)),
            Part("engine", reads=("torch", "flash_attn"), derive=serving, rules=(
                engine.check_quantization, engine.check_scheduler, engine.check_server_args,
                engine.check_model_path, engine.check_extra_args, engine.check_packages)),
            Part("flashinfer", derive=aot), Part("engine_jit", derive=jit))


def for_engine(name: str, python_lock: bool = True) -> list[Part]:
    """The parts of a profile served by engine ``name``, in the order they run.

    ``python_lock=False`` leaves the profile's Python lock out (``dockergen lock --python``
    resolves the profile to refresh a lock that may no longer match it).
    """
    engine = engine_for(name)
    release, serving, aot, jit = _engine_parts(engine)
    return [
        Part("cuda", derive=_cuda, rules=(
            cuda.check_gpus, cuda.check_platform, cuda.check_cuda, cuda.check_locked)),
        Part("python", derive=_python),
        release,
        Part("torch", derive=_torch, rules=(torch.check,)),
        Part("python-source", rules=(python.check_python_source,)),
        Part("flash_attn", reads=("cuda",), derive=_flash_attn, rules=(flash_attn.check,)),
        serving,
        Part("flash_attn-smoke", reads=("flash_attn",), derive=_flash_attn_smoke),
        aot, jit,
        Part("image-tags", rules=(image.check_tags,)),
        Part("certificates", derive=_certificates, rules=(cuda.check_ca_certificates,)),
        Part("fields", rules=(fields.check_unused,)),
        *([Part("python-lock", rules=(engine.check_python_lock,))] if python_lock else []),
    ]
