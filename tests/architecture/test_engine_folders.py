"""Each serving engine lives in one folder (dockergen/parts/engines/<engine>/): its code,
facts, flag list, metric names, run facts and capacity rule; everything else asks the
registry (dockergen/parts/engines/__init__.py).

Code outside the folders that holds an engine's name as a value is listed here with the
reason, so a new branch on an engine's name fails this test until it moves into the folder.
"""

from __future__ import annotations

import ast
import typing

from tests.conftest import ROOT

SERVING = ROOT / "dockergen" / "parts" / "engines"

ENGINES = ("vllm", "sglang", "tensorrt-llm", "tensorrt_llm")
# code outside the engines' folders that may hold an engine's name as a value, and why
ALLOWED = {
    "dockergen/engine_names.py": "the one list of engines: a line each (the registry and "
                                 "engine.name's choices read it)",
    "dockergen/input/credentials.py": "the secret scan runs on the raw profile, before the "
                                      "engine is known to be valid: where vLLM takes its API "
                                      "key",
}
IMAGE_SCRIPTS = ("serve_parse.py",)  # run in the image, not modules of dockergen


def _lines_naming_engines(source: str) -> list[int]:
    """The lines where ``source`` holds an engine's name as a string value."""
    return sorted(n.lineno for n in ast.walk(ast.parse(source))
                  if isinstance(n, ast.Constant) and n.value in ENGINES)


def _engine_names_in_code() -> dict[str, list[int]]:
    """file -> the lines where code outside the engines' folders holds an engine's name as
    a string value (a branch on it, a key of a table per engine); comments, docstrings,
    sources and examples name engines freely."""
    found: dict[str, list[int]] = {}
    for path in sorted((ROOT / "dockergen").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if path.name in IMAGE_SCRIPTS or any(
                rel.startswith(f"dockergen/parts/engines/{e}/") for e in ENGINES):
            continue
        lines = _lines_naming_engines(path.read_text(encoding="utf-8"))
        if lines:
            found[rel] = lines
    return found


def test_no_code_outside_an_engines_folder_decides_by_its_name() -> None:
    """Adding an engine touches its folder and one registry line: anything that differs
    per engine is the engine's (an attribute or method of its class, a file of its
    folder), never a branch or a table keyed by its name elsewhere."""
    found = _engine_names_in_code()
    assert sorted(set(found) - set(ALLOWED)) == [], found
    assert sorted(set(ALLOWED) - set(found)) == []  # no stale entry


def test_the_checker_sees_a_branch_or_a_table_on_an_engine_name() -> None:
    assert _lines_naming_engines('def f(engine):\n    return engine == "sglang"\n') == [2]
    assert _lines_naming_engines('HINT = {\n    "vllm": "x"}\n') == [2]
    assert _lines_naming_engines('"""vllm and sglang, in words."""\n# vllm\n') == []


def test_each_engine_folder_holds_its_parts() -> None:
    from dockergen.outputs.observe.metrics import load_table
    from dockergen.parts.engines import ENGINES as REGISTRY

    metrics = load_table()["engines"]
    for name, engine in REGISTRY.items():
        folder = engine.folder()
        assert folder.parent == SERVING, name
        assert (folder / "facts.yaml").is_file() and (folder / "metrics.yaml").is_file(), name
        assert name in metrics  # its metrics.yaml names it
        assert engine.run.caches, name  # run facts: the folders it writes
        budget, _, rule = engine.kv_budget(80 << 30, 16 << 30, 2 << 30, None)
        assert 0 < budget < 80 << 30 and rule, name  # its capacity rule


def test_the_profiles_engine_choices_are_the_registry() -> None:
    from dockergen.input.software import Engine
    from dockergen.parts.engines import ENGINES as REGISTRY

    choices = typing.get_args(Engine.model_fields["name"].annotation)
    assert sorted(choices) == sorted(REGISTRY)
