"""The layers of docs/architecture.md, enforced on the import graph.

Every module belongs to one layer, found from its package (:data:`LAYERS`); it may import
its own layer and the layers above it, never one below. Every module's imports (top level
and inside functions) are read with ``ast``; a violation names the module and the import.
A few rules inside the layers are kept apart (:data:`APART`), and some third-party packages
have one owner (:data:`ONLY_IMPORTER`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "dockergen"

# The layers, top to bottom: (name, the modules or packages it holds). A module imports
# only its own layer and the ones above it. docs/architecture.md draws this list.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # the edges every layer shares: errors, the one reader and the one writer of files,
    # the reference grammar, the architectures, the list of engines, the shipped files
    ("edges", ("dockergen", "dockergen.errors", "dockergen.secretscan", "dockergen.files",
               "dockergen.refs", "dockergen.platforms", "dockergen.engine_names",
               "dockergen.resources")),
    ("net", ("dockergen.net",)),  # the one HTTP layer: only it opens a connection
    ("knowledge", ("dockergen.knowledge",)),  # facts with sources, the user's overlay
    ("input", ("dockergen.input",)),  # profile YAML -> the Profile model, pins, lock format
    ("resolve", ("dockergen.resolve",)),  # the Part contract, the fold, the Resolved model
    ("parts", ("dockergen.parts",)),  # the pieces of the image, the serving engines
    # a profile loaded once and resolved once, and every output written from it
    ("outputs", ("dockergen.pipeline", "dockergen.outputs")),
    ("entrances", ("dockergen.checks", "dockergen.api")),  # every check; the Python API
    # Engine API build, smoke test, push, record; and the evidence about the pushed image
    # (SBOM, provenance, signatures: written at the push; verify)
    ("build", ("dockergen.build", "dockergen.trust")),
    ("releases", ("dockergen.releases",)),  # outdated and upgrade
    ("cli", ("dockergen.cli", "dockergen.__main__")),  # the only layer that prints or exits
)
# maintainer tools read everything but the command line
MAINT = "dockergen.maint"

# Rules inside a layer: (importer prefix, imported prefix, why).
APART: tuple[tuple[str, str, str], ...] = (
    ("dockergen.resolve", "dockergen.parts",
     "the fold is handed its parts and never names one"),
    ("dockergen.parts.engines.vllm", "dockergen.parts.engines.sglang", "an engine is alone"),
    ("dockergen.parts.engines.vllm", "dockergen.parts.engines.tensorrt_llm",
     "an engine is alone"),
    ("dockergen.parts.engines.sglang", "dockergen.parts.engines.vllm", "an engine is alone"),
    ("dockergen.parts.engines.sglang", "dockergen.parts.engines.tensorrt_llm",
     "an engine is alone"),
    ("dockergen.parts.engines.tensorrt_llm", "dockergen.parts.engines.vllm",
     "an engine is alone"),
    ("dockergen.parts.engines.tensorrt_llm", "dockergen.parts.engines.sglang",
     "an engine is alone"),
    ("dockergen.outputs.observe.", "dockergen.pipeline",
     "observe reads a resolution in one adapter (generate)"),
)
APART_EXCEPT = {("dockergen.outputs.observe.generate", "dockergen.pipeline")}

# Third-party packages with one owner (a module, or a package and its modules).
ONLY_IMPORTER = {"docker": "dockergen.build.daemon.docker",
                 "requests": "dockergen.build.daemon.docker",
                 "urllib3": "dockergen.net", "truststore": "dockergen.net",
                 "pypi_simple": "dockergen.net",
                 "click": "dockergen.cli", "jinja2": "dockergen.outputs.dockerfile",
                 "grafana_foundation_sdk": "dockergen.outputs.observe.dashboard",
                 "cyclonedx": "dockergen.trust.sbom", "packageurl": "dockergen.trust.sbom"}
# no module is longer than this: a longer one holds more than one subject
MAX_MODULE_LINES = 400


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _owns(owner: str, module: str) -> bool:
    return module == owner or module.startswith(owner + ".")


def layer_of(module: str) -> float:
    """The index of ``module``'s layer in :data:`LAYERS` (maint: after all but the CLI)."""
    if _owns(MAINT, module):
        return len(LAYERS) - 1.5
    found = [i for i, (_, owners) in enumerate(LAYERS)
             for owner in owners if module == owner or (
                 owner != "dockergen" and _owns(owner, module))]
    if not found:
        raise AssertionError(f"{module} has no layer in tests/architecture/"
                             "test_architecture.py: put it in a layer's package, or add it to "
                             "LAYERS and to docs/architecture.md")
    return found[0]


def imports_of(source: str, module: str) -> list[str]:
    """Every module a source file imports (relative imports resolved)."""
    out: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module.split(".")[: -node.level]
                base = ".".join([*pkg, base] if base else pkg)
            # `from dockergen.parts import cuda` imports the module itself
            out += [f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base
                    for a in node.names]
    return out


def _is_module(name: str) -> bool:
    if not name.startswith("dockergen."):
        return False
    rel = Path(*name.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").exists() or (PACKAGE / rel / "__init__.py").exists()


def _apart(module: str, target: str) -> str | None:
    for importer, imported, why in APART:
        if module.startswith(importer) and _owns(imported, target) and \
                (module, target) not in APART_EXCEPT:
            return why
    return None


def violations(module: str, source: str) -> list[str]:
    """What ``module`` imports against the layers."""
    found = []
    mine = layer_of(module)
    for target in imports_of(source, module):
        top = target.split(".")[0]
        if top == "dockergen":
            if target == module or target.startswith(module + "."):
                continue
            theirs = layer_of(target)
            if theirs > mine:
                found.append(f"{module} ({_name(mine)}) imports {target} ({_name(theirs)}, "
                             "a layer below)")
            elif (why := _apart(module, target)) is not None:
                found.append(f"{module} imports {target}: {why}")
        elif top in ONLY_IMPORTER and not _owns(ONLY_IMPORTER[top], module):
            found.append(f"{module} imports {target} (only {ONLY_IMPORTER[top]} may)")
    return found


def _name(index: float) -> str:
    return "maint" if index != int(index) else LAYERS[int(index)][0]


# scripts an engine's folder carries for the built image (run there after driver_stub.py),
# not modules of dockergen: nothing imports them
IMAGE_SCRIPTS = ("serve_parse.py",)


def all_modules() -> list[tuple[str, str]]:
    return [(module_name(p), p.read_text()) for p in sorted(PACKAGE.rglob("*.py"))
            if p.name not in IMAGE_SCRIPTS]


def test_every_module_keeps_to_its_layer() -> None:
    found = [v for module, source in all_modules() for v in violations(module, source)]
    assert found == []


def test_the_checker_catches_violations() -> None:
    # a part importing the CLI, anything but the daemon adapter importing docker,
    # one serving engine importing another, the fold naming a part, rendering a part
    assert violations("dockergen.parts.torch", "from dockergen import cli\n") == [
        "dockergen.parts.torch (parts) imports dockergen.cli (cli, a layer below)"]
    assert violations("dockergen.api", "from dockergen.cli.app import cli\n") == [
        "dockergen.api (entrances) imports dockergen.cli.app (cli, a layer below)"]
    assert violations("dockergen.build.orchestrate", "import docker\n") == [
        "dockergen.build.orchestrate imports docker (only dockergen.build.daemon.docker may)"]
    assert violations("dockergen.cli.render", "import click\n") == []
    assert violations("dockergen.outputs.dockerfile", "import click\n") == [
        "dockergen.outputs.dockerfile imports click (only dockergen.cli may)"]
    assert violations("dockergen.parts.engines.vllm",
                      "from dockergen.parts.engines import tensorrt_llm\n") == [
        "dockergen.parts.engines.vllm imports dockergen.parts.engines.tensorrt_llm: "
        "an engine is alone"]
    assert violations("dockergen.resolve.fold", "def f():\n    from dockergen.parts import cuda\n"
                      ) == ["dockergen.resolve.fold (resolve) imports dockergen.parts.cuda "
                            "(parts, a layer below)"]
    # the programmatic interface never imports the commands it serves (no circle)
    assert violations("dockergen.api", "def f():\n    from dockergen.build import x\n") == [
        "dockergen.api (entrances) imports dockergen.build (build, a layer below)"]
    assert violations("dockergen.maint.pypi", "from dockergen.cli import app\n") != []
    assert violations("dockergen.maint.pypi", "from dockergen.releases import outdated\n") == []
    with pytest.raises(AssertionError, match="has no layer"):
        violations("dockergen.newthing", "")


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph`` (its strongly connected parts of two or more)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the dockergen modules it imports; a package importing its own submodules
    (a lazy ``connect()`` or a format chosen at run time) is its own business, left out."""
    modules = dict(all_modules())
    return {m: {t for t in imports_of(source, m)
                if t in modules and t != m and not t.startswith(m + ".")}
            for m, source in modules.items()}


def test_no_import_circle() -> None:
    assert _cycles(import_graph()) == []
    # the finder finds one
    assert _cycles({"dockergen.api": {"dockergen.build"}, "dockergen.build": {"dockergen.api"}}
                   ) == [["dockergen.api", "dockergen.build"]]


def test_every_package_says_what_its_layer_holds() -> None:
    """A package's docstring is what the folder list says of it; module docstrings say what
    the module owns, never a list of imports (the layers above are the rule)."""
    missing = [m for m, source in all_modules()
               if (PACKAGE / Path(*m.split(".")[1:]) / "__init__.py").is_file()
               and not ast.get_docstring(ast.parse(source))]
    lists = [m for m, source in all_modules() if "May import" in source]
    assert (missing, lists) == ([], [])


def test_the_architecture_page_draws_these_layers() -> None:
    """docs/architecture.md's layer table names the layers in this order, each with its
    packages, so the page cannot drift from the rule."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| ([a-z]+) \| ([^|]+) \|", page, re.M)
    assert [(int(n), name) for n, name, _ in rows] == [
        (i + 1, name) for i, (name, _) in enumerate(LAYERS)]
    for (_, name, cell), (_, owners) in zip(rows, LAYERS, strict=True):
        named = set(re.findall(r"`([a-z_/.]+)`", cell))
        want = {o.removeprefix("dockergen.").replace(".", "/") + ("/" if (
            PACKAGE / o.removeprefix("dockergen.").replace(".", "/")).is_dir() else ".py")
            for o in owners if o != "dockergen"}
        assert want <= named, (name, want - named)


def test_no_module_is_longer_than_its_subject() -> None:
    found = [f"{m}: {source.count(chr(10))} lines" for m, source in all_modules()
             if source.count("\n") > MAX_MODULE_LINES]
    assert found == [], found


# A function longer than this does more than one job: split it into functions whose names
# say what each decides (docs/architecture.md).
MAX_FUNCTION_LINES = 60


def long_functions(source: str) -> list[tuple[str, int]]:
    """(name, lines from `def` to the end of its body) of every function over the limit."""
    return [(node.name, node.end_lineno - node.lineno + 1)
            for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno is not None
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]


def test_no_function_is_longer_than_a_screen() -> None:
    found = [f"{module}.{name}: {lines} lines" for module, source in all_modules()
             for name, lines in long_functions(source)]
    assert found == [], found


def test_the_length_check_sees_a_long_function_and_its_nested_ones() -> None:
    body = "    x = 1\n" * (MAX_FUNCTION_LINES - 1)
    assert long_functions(f"def short():\n{body}") == []
    assert long_functions(f"def long():\n{body}    y = 2\n") == [("long", 61)]
    inner = "".join("        " + line + "\n" for line in body.splitlines())
    nested = f"class C:\n    def m(self):\n        def inner():\n{inner}"
    # a method is as long as the function it holds (inner: 60 lines, at the limit)
    assert long_functions(nested) == [("m", 61)]
    assert long_functions(nested + "            y = 2\n") == [("m", 62), ("inner", 61)]


def private_imports(source: str) -> list[str]:
    """The private names (``_name``, not dunders) ``source`` imports from dockergen modules:
    a name another module needs is part of its module's interface, and says so."""
    return [f"{node.module}.{a.name}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dockergen")
            for a in node.names
            if a.name.startswith("_") and not a.name.startswith("__")]


def test_no_module_imports_another_modules_private_name() -> None:
    found = [f"{module} imports {name}" for module, source in all_modules()
             for name in private_imports(source)]
    assert found == [], found


def test_the_private_import_check_sees_one() -> None:
    assert private_imports("from dockergen.input.loader import _validate, load_profile\n") == [
        "dockergen.input.loader._validate"]
    assert private_imports("from dockergen import __version__\nfrom os import _exit\n") == []
