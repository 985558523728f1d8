"""What a vLLM wheel says about its server, read from its Python source (AST; no torch).

Importing vLLM's parser needs torch and the CUDA stack, so the option strings ``vllm serve``
registers are read from the wheel's source, as its parser builds them:

1. every literal option string of an ``add_argument(...)`` call inside ``make_arg_parser``
   (``vllm/entrypoints/common/cli_args.py``; ``launchers/`` or ``openai/`` before 0.33.0:
   --headless, --api-server-count/-asc, --config, --grpc) and inside every ``add_cli_args``
   of ``vllm/engine/arg_utils.py`` (EngineArgs: one literal call per flag, e.g.
   ``add_argument("--quantization", "-q", **kwargs[...])``);
2. the frontend flags ``FrontendArgs.add_cli_args`` builds from dataclass fields:
   ``"--" + name.replace("_", "-")`` for every annotated field of ``BaseFrontendArgs`` and
   ``FrontendArgs`` in that cli_args.py.

Boolean fields also get argparse's ``--no-<flag>`` form (BooleanOptionalAction); the list
does not spell those out, and the flag rule accepts ``--no-X`` where ``--X`` is listed.
A layout this reading does not understand raises :class:`WheelLayoutError`: a short list
would be worse than none.

vLLM also refuses a quantization config on a GPU below the config's
``get_min_capability()`` (``model_loader``: "not supported for the current GPU. Minimum
capability: ..."); the number lives in ``vllm/model_executor/layers/quantization/*.py`` and
changed between releases, and so did the files (``awq.py``/``awq_marlin.py`` became
``auto_awq.py``). For every dockergen method, :data:`METHODS` lists what vLLM may run for
such a checkpoint:

* alternatives vLLM chooses between by the GPU (a GPTQ checkpoint runs as gptq_marlin where
  Marlin runs, else as plain gptq): the method runs if *any* alternative does (minimum);
* inside one alternative, the checks all apply (compressed-tensors checks its config and
  then the W8A8-INT8 scheme): the method needs *all* of them (maximum).

An alternative whose file is not in the wheel is skipped; a method with none left, or a
``get_min_capability`` that is not a literal ``return <int>``, is a layout error: a wrong
floor would be worse than none.

``tools/vllm_flags.py`` and ``tools/vllm_quant.py`` (the shipped facts) and ``dockergen
upgrade`` (a release dockergen does not know) all read through :func:`serve_flags` and
:func:`quant_floors`.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

ARG_UTILS = "vllm/engine/arg_utils.py"
# where make_arg_parser and the frontend dataclasses live: common/ from 0.33.0,
# launchers/ in 0.30.0 and 0.32.0, openai/ in 0.27.1 (read from the wheels); the first
# that exists is used
CLI_ARGS = ("vllm/entrypoints/common/cli_args.py", "vllm/entrypoints/launchers/cli_args.py",
            "vllm/entrypoints/openai/cli_args.py")
FRONTEND_CLASSES = ("BaseFrontendArgs", "FrontendArgs")
# the wheel members serve_flags reads
MEMBERS = (ARG_UTILS, *CLI_ARGS)
QUANT = "vllm/model_executor/layers/quantization/"
# dockergen method -> alternatives (any runs) -> checks (all apply): (file under QUANT, class)
METHODS: dict[str, list[list[tuple[str, str]]]] = {
    "fp8": [[("fp8.py", "Fp8Config")]],
    "int8": [[("compressed_tensors/compressed_tensors.py", "CompressedTensorsConfig"),
              ("compressed_tensors/schemes/compressed_tensors_w8a8_int8.py",
               "CompressedTensorsW8A8Int8")]],
    "int4-awq": [[("awq.py", "AWQConfig")], [("awq_marlin.py", "AWQMarlinConfig")],
                 [("auto_awq.py", "AutoAWQConfig")]],
    "gptq": [[("gptq.py", "GPTQConfig")], [("gptq_marlin.py", "GPTQMarlinConfig")],
             [("auto_gptq.py", "AutoGPTQConfig")]],
}
# the wheel members quant_floors reads
QUANT_MEMBERS = tuple(sorted({QUANT + f for alternatives in METHODS.values()
                              for checks in alternatives for f, _ in checks}))
# what every `vllm serve` has: a layout change that loses one must fail loudly
_MUST = ("--max-model-len", "--tensor-parallel-size", "--quantization", "--port", "--host",
         "--served-model-name", "--api-server-count")


class WheelLayoutError(Exception):
    """The wheel's source is not laid out as this reading expects."""


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


def _parse(source: bytes, where: str) -> ast.Module:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        # RecursionError/MemoryError: nesting deeper than the parser's stack
        raise WheelLayoutError(f"{where} does not parse ({type(exc).__name__}: {exc})"
                               ) from None


def serve_flags(members: Mapping[str, bytes], shown: str) -> list[str]:
    """Every option string of ``vllm serve``, sorted, from the wheel ``members`` (path ->
    bytes; at least :data:`MEMBERS` that the wheel holds); ``shown`` names the wheel in
    errors."""
    if ARG_UTILS not in members:
        raise WheelLayoutError(f"{shown}: no {ARG_UTILS}")
    found = next((n for n in CLI_ARGS if n in members), None)
    if found is None:
        raise WheelLayoutError(f"{shown}: none of {', '.join(CLI_ARGS)}")
    engine = _parse(members[ARG_UTILS], f"{shown} {ARG_UTILS}")
    cli = _parse(members[found], f"{shown} {found}")
    engine_flags = _literal_options(engine, ("add_cli_args",))
    serve = _literal_options(cli, ("make_arg_parser",))
    frontend = _field_flags(cli, FRONTEND_CLASSES)
    every = engine_flags | serve | frontend
    lost = [m for m in _MUST if m not in every]
    if lost:
        raise WheelLayoutError(f"{shown}: {', '.join(lost)} not found")
    if len(engine_flags) < 100 or len(frontend) < 20:
        raise WheelLayoutError(f"{shown}: only {len(engine_flags)} engine / {len(frontend)} "
                               "frontend flags")
    return sorted(every)


def min_capability(source: bytes, cls: str, where: str) -> int | None:
    """The literal ``return N`` of ``cls.get_min_capability`` (None if the class is absent)."""
    for node in ast.walk(_parse(source, where)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "get_min_capability":
                    returns = [r for r in ast.walk(fn) if isinstance(r, ast.Return)]
                    if (len(returns) == 1 and isinstance(returns[0].value, ast.Constant)
                            and isinstance(returns[0].value.value, int)):
                        return returns[0].value.value
                    raise WheelLayoutError(f"{where}: {cls}.get_min_capability is not a "
                                           "literal `return <int>`")
            raise WheelLayoutError(f"{where}: {cls} has no get_min_capability")
    return None


def quant_floors(members: Mapping[str, bytes], shown: str) -> dict[str, dict[str, Any]]:
    """Per dockergen method: ``{"min_cc": "8.0", "read": ["fp8.py:Fp8Config=80", ...]}``,
    from the wheel ``members`` (at least :data:`QUANT_MEMBERS` that the wheel holds)."""
    methods: dict[str, dict[str, Any]] = {}
    for method, alternatives in METHODS.items():
        found: list[tuple[int, list[str]]] = []
        for checks in alternatives:
            if not all(QUANT + f in members for f, _ in checks):
                continue
            values, where = [], []
            for f, cls in checks:
                v = min_capability(members[QUANT + f], cls, f"{shown} {f}")
                if v is None:
                    raise WheelLayoutError(f"{shown} {f}: no class {cls}")
                values.append(v)
                where.append(f"{f}:{cls}={v}")
            found.append((max(values), where))
        if not found:
            raise WheelLayoutError(f"{shown}: none of the files of {method} "
                                   f"({', '.join(f for a in alternatives for f, _ in a)})")
        lowest = min(v for v, _ in found)
        methods[method] = {"min_cc": f"{lowest // 10}.{lowest % 10}",
                           "read": sorted(w for _, ws in found for w in ws)}
    return methods
