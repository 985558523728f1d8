"""What every serving engine shares: releases, quantization, the engine stage, the server.

:class:`ServingEngine` is the base an engine module subclasses, built in layers that each
read the same way in every engine folder: its identity and facts
(:mod:`~dockergen.parts.engines.identity`), how it is installed
(:mod:`~dockergen.parts.engines.install`), the rules on its wheels and on the rest of
the profile (:mod:`~dockergen.parts.engines.rules_wheels`,
:mod:`~dockergen.parts.engines.rules`) and its server command
(:mod:`~dockergen.parts.engines.serve`); this module derives the engine stage from
them. An engine module adds what is its own: the server command
(:meth:`ServingEngine.serve`), extra environment, the import the smoke test checks, and why
it does or does not want a FlashAttention-2 build. The engine stage is formatted by
``templates/parts/serving.j2``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dockergen.knowledge import reproducible
from dockergen.parts import python
from dockergen.parts.engines.identity import OPTIONS_DIR
from dockergen.parts.engines.install import (
    CONSTRAINTS_IN_IMAGE,
    LOCK_IN_IMAGE,
)
from dockergen.parts.engines.install import (
    LOCK_IN_CONTEXT as LOCK_IN_CONTEXT,
)
from dockergen.parts.engines.run import IMAGE_ENV
from dockergen.parts.engines.serve import EngineServe
from dockergen.resolve.context import Context
from dockergen.resolve.model import (
    APP_HOME,
    VENV,
    Derivation,
    EngineStage,
    Mode,
    RuntimeCopy,
    ServeCommand,
    SmokeImport,
    TorchInstall,
)


@dataclass(frozen=True)
class ServingPart:
    """What a serving engine decided: its stage, server, and runtime contributions."""

    stage: EngineStage
    serve: ServeCommand
    runtime_apt: tuple[str, ...]
    copies: tuple[RuntimeCopy, ...]
    env: dict[str, str]
    health_cmd: tuple[str, ...]  # exec form
    smoke: tuple[SmokeImport, ...]  # the engine, then what it installs beside itself
    c_compiler: bool  # the engine compiles C at run time (Triton's launcher)
    context_files: Mapping[str, bytes] = field(default_factory=dict)  # e.g. python.lock
    # libraries the engine loads on some compute capabilities only: (glob, ccs)
    arch_scopes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # the script that runs the release's own server parser (facts serve_parser, a file of the
    # engine's folder): its text; empty: the engine has none
    serve_parser: str = ""
    # the module the server imports first (facts startup_import): the bytecode check's
    startup_import: str = ""
    # top-level site-packages entries of the engine and its kernels: one venv layer
    layer_packages: tuple[str, ...] = ()


class ServingEngine(EngineServe):
    """One serving engine; subclasses set the class attributes and :meth:`serve`."""

    def derive(self, c: Context, d: list[Derivation], torch: TorchInstall,
               flash_attn: bool, mode: Mode) -> ServingPart:
        """The engine stage, the server command and the runtime contributions."""
        p = c.p
        indexes = self.indexes(c)
        assert torch.from_main_index or indexes[0] == torch.index, (indexes, torch.index)
        self.explain_requirements(c, d)
        files: dict[str, bytes] = {}
        self._explain_engine_index(c, d, indexes)
        # uv's default first-index takes every name from the first index that has it, and
        # the PyTorch index carries requests, pillow, certifi, setuptools at older versions
        # than the engine needs: "requests was found on .../cu130, but not at the requested
        # version" (knowledge audit; astral-sh/uv#2683). best-match looks at every index;
        # torch stays the CUDA index's (2.14.0+cu130 sorts above PyPI's 2.14.0 for the exact
        # pin), and the build checks the CUDA the installed torch reports. vLLM's own
        # docker/Dockerfile sets UV_INDEX_STRATEGY=unsafe-best-match for the same reason.
        strategy = "unsafe-best-match"
        if c.python_lock is None and indexes:
            d.append(Derivation("uv index strategy", strategy, "the PyTorch index carries "
                                "older copies of shared dependencies; a hashed lock "
                                "(dockergen lock --python) pins every file instead",
                                "VLLM:docker/Dockerfile@0000977 ENV UV_INDEX_STRATEGY; "
                                "astral-sh/uv#2683"))
        lock_args = self._locked_install(c, d, indexes, files)
        constraints = self._constraints(c, d, files, locked=bool(lock_args))
        stage = EngineStage(name=p.engine.name,
                            requirements=self.requirements(c) + tuple(p.packages.pip),
                            torch=torch.version, indexes=tuple(indexes), venv=VENV, mode=mode,
                            flash_attn=flash_attn,
                            lock=LOCK_IN_IMAGE if lock_args else "", lock_args=lock_args,
                            index_strategy=strategy, torch_cuda=torch.cuda,
                            torch_cuda_major_only=torch.from_main_index,
                            constraints=CONSTRAINTS_IN_IMAGE if constraints else "",
                            bytecode=python.bytecode_mode(c.facts, d),
                            bytecode_env=python.BYTECODE_ENV,
                            local_install_records=reproducible.UV_LOCAL_INSTALL_RECORDS
                            if flash_attn else ())
        serve = self.serve(c, d)
        env = {"HF_HOME": f"{APP_HOME}/.cache/huggingface", "HOME": APP_HOME,
               **{name: value for name, value, _ in IMAGE_ENV}, **self.extra_env(c)}
        facts = self.facts(c.facts)
        health_path = self.probe_path(c.facts)
        health = (f"import urllib.request; urllib.request.urlopen("
                  f"'http://127.0.0.1:{p.serving.port}{health_path}', timeout=5)")
        runtime_apt, c_compiler = self._runtime_apt(c)
        return ServingPart(
            stage=stage, serve=serve, runtime_apt=runtime_apt, c_compiler=c_compiler,
            copies=tuple(RuntimeCopy(name, f"{OPTIONS_DIR}/{name}")
                         for name in sorted(serve.context_files)),
            env=env, health_cmd=(f"{VENV}/bin/python", "-c", health),
            smoke=(SmokeImport(self.module, facts["package"], p.engine.version,
                               bool(facts.get("import_needs_gpu", self.imports_need_gpu))),
                   *self.extra_smoke_imports(c)),
            arch_scopes=tuple((glob, tuple(ccs)) for glob, ccs in sorted(
                facts.get("arch_scoped_libraries", {}).items())),
            context_files=files, serve_parser=self._serve_parser(c.facts),
            startup_import=str(facts.get("startup_import", "")),
            layer_packages=tuple((facts.get("layer_packages") or {}).get("names", ())),
        )
