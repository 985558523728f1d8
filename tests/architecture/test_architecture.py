"""The one-way flow of docs/architecture.md, enforced on the import graph.

Every module's imports (top level and inside functions) are read with ``ast`` and checked
against the layer it belongs to. A violation names the module and the import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "dockergen"

# module (or package prefix ending in ".") -> what it may import from dockergen.
# "dockergen" alone is the package's __init__ (the version string).
_BASE = {"dockergen", "dockergen.atomic", "dockergen.atomic_owned", "dockergen.errors",
         "dockergen.inputs", "dockergen.refs"}
_COMPONENT = _BASE | {"dockergen.knowledge", "dockergen.loader", "dockergen.model",
                      "dockergen.pins", "dockergen.profile", "dockergen.components",
                      "dockergen.components.base"}
ALLOWED: dict[str, set[str]] = {
    "dockergen": set(),
    "dockergen.errors": {"dockergen.errors_secrets"},
    "dockergen.errors_secrets": set(),  # the credential scanner behind errors.SECRET_VALUE
    "dockergen.inputs": {"dockergen.errors"},
    "dockergen.atomic": {"dockergen.atomic_owned", "dockergen.atomic_swap", "dockergen.errors",
                         "dockergen.inputs"},
    # what makes output dockergen's own; the all-or-none swap of a change
    "dockergen.atomic_owned": {"dockergen.errors", "dockergen.inputs"},
    "dockergen.atomic_swap": {"dockergen.errors"},
    "dockergen.refs": set(),  # the image-reference grammar: a leaf every layer may read
    "dockergen.platforms": set(),  # the architectures (goarch, machine, ELF e_machine): a leaf
    # the namespace, labels and port name deploy's and observe's Kubernetes objects share
    "dockergen.kube": {"dockergen.errors"},
    "dockergen.ranges": {"dockergen.errors"},  # a remote file through range requests
    # the one HTTP layer: every network read of the product and its maintainer tools
    "dockergen.net": {"dockergen.errors", "dockergen.net_transport"},
    # one request through urllib3 (the pools, retries, bounded bodies)
    "dockergen.net_transport": {"dockergen.errors"},
    # which GPUs compiled code runs on: the image audit's reader, loaded from the templates
    "dockergen.kernels": {"dockergen.resources"},
    # the base-image lock read as the typed pins resolution applies
    "dockergen.pins": {"dockergen.errors", "dockergen.inputs", "dockergen.refs"},
    "dockergen.knowledge": set(),
    # the shapes a user knowledge file's rows must have, read from the shipped rows
    "dockergen.knowledge_shapes": {"dockergen.knowledge"},
    "dockergen.resources": set(),
    "dockergen.yamlsource": _BASE,
    "dockergen.profile": _BASE | {"dockergen.profile_build", "dockergen.profile_shapes",
                                  "dockergen.profile_software"},
    # the profile model's value shapes and sections
    "dockergen.profile_shapes": _BASE | {"dockergen.engine_names"},
    "dockergen.profile_software": _BASE | {"dockergen.profile_shapes"},
    "dockergen.profile_build": _BASE | {"dockergen.profile_shapes"},
    "dockergen.engine_names": set(),  # the one list of serving engines (a leaf)
    "dockergen.credentials": _BASE | {"dockergen.yamlsource"},
    "dockergen.loader": _BASE | {"dockergen.loader_fields", "dockergen.loader_merge",
                                 "dockergen.loader_overlay", "dockergen.loader_overrides",
                                 "dockergen.loader_validate", "dockergen.profile",
                                 "dockergen.yamlsource"},
    # the loader's stages: locate, read and merge, field paths, overrides, validate, overlay
    "dockergen.loader_locate": _BASE | {"dockergen.resources"},
    "dockergen.loader_merge": _BASE | {"dockergen.loader_locate", "dockergen.yamlsource"},
    "dockergen.loader_fields": _BASE | {"dockergen.profile", "dockergen.yamlsource"},
    "dockergen.loader_overrides": _BASE | {"dockergen.loader_fields", "dockergen.yamlsource"},
    "dockergen.loader_validate": _BASE | {"dockergen.credentials", "dockergen.loader_fields",
                                          "dockergen.profile", "dockergen.yamlsource"},
    "dockergen.loader_overlay": _BASE | {"dockergen.knowledge", "dockergen.loader_locate",
                                         "dockergen.knowledge_shapes",
                                         "dockergen.yamlsource"},
    "dockergen.schema": _BASE | {"dockergen.profile"},
    # the Markdown profile reference: written from the schema, never from the model itself
    "dockergen.reference": {"dockergen.schema"},
    "dockergen.buildid": {"dockergen"},
    # the build record: build writes it, deploy reads it
    "dockergen.buildrecord": {"dockergen.atomic", "dockergen.errors", "dockergen.refs"},
    "dockergen.model": _BASE | {"dockergen.pins", "dockergen.profile", "dockergen.pylockfile"},
    "dockergen.components.base": _COMPONENT,
    "dockergen.components.cuda": _COMPONENT,
    "dockergen.components.python": _COMPONENT,
    # the glibc of the base OS as the wheels' platform tag (a leaf of the components)
    "dockergen.components.python_platform": set(),
    "dockergen.components.image": _COMPONENT,
    "dockergen.components.fields": _COMPONENT,
    "dockergen.components.torch": _COMPONENT | {"dockergen.components.cuda",
                                                "dockergen.components.python",
                                                "dockergen.kernels"},
    "dockergen.components.flashinfer": _COMPONENT | {"dockergen.components.cuda",
                                                     "dockergen.components.python",
                                                     "dockergen.resources"},
    # the engine's start-up JIT kernels take their arguments from the model's config.json
    "dockergen.components.engine_jit": _COMPONENT | {"dockergen.components.cuda",
                                                     "dockergen.plan.shapes",
                                                     "dockergen.resources"},
    "dockergen.components.flash_attn": _COMPONENT | {"dockergen.components.cuda",
                                                     "dockergen.components.python",
                                                     "dockergen.components.torch",
                                                     "dockergen.reproducible"},
    # the engine base in layers, each file one job: identity and facts, install, the rules
    # on wheels, the other rules, the server command; base: the engine stage derived
    "dockergen.components.serving.identity": _COMPONENT | {"dockergen.components.serving.run",
                                                           "dockergen.kernels"},
    "dockergen.components.serving.install": _COMPONENT | {
        "dockergen.pylockfile", "dockergen.components.cuda", "dockergen.components.python",
        "dockergen.components.python_platform", "dockergen.components.torch",
        "dockergen.components.serving.identity"},
    "dockergen.components.serving.rules_wheels": _COMPONENT | {
        "dockergen.kernels", "dockergen.components.cuda", "dockergen.components.python_platform",
        "dockergen.components.serving.install"},
    "dockergen.components.serving.rules": _COMPONENT | {
        "dockergen.pylockfile", "dockergen.components.cuda", "dockergen.components.python",
        "dockergen.components.serving.identity", "dockergen.components.serving.rules_wheels"},
    "dockergen.components.serving.serve": _COMPONENT | {"dockergen.components.serving.identity",
                                                        "dockergen.components.serving.rules"},
    "dockergen.components.serving.base": _COMPONENT | {"dockergen.pylockfile",
                                                       "dockergen.reproducible",
                                                       "dockergen.components.cuda",
                                                       "dockergen.components.python",
                                                       "dockergen.components.python_platform",
                                                       "dockergen.components.serving.run",
                                                       "dockergen.components.torch",
                                                       "dockergen.components.serving.identity",
                                                       "dockergen.components.serving.install",
                                                       "dockergen.components.serving.serve",
                                                       "dockergen.kernels"},
    # a serving engine sees the shared engine base, never another engine
    "dockergen.components.serving.": _COMPONENT | {"dockergen.components.serving.base",
                                                   "dockergen.components.serving.identity",
                                                   "dockergen.components.serving.run",
                                                   "dockergen.components.serving.serve"},
    # the run facts' shape and the folders every engine writes (leaf)
    "dockergen.components.serving.run": set(),
    # what vLLM's wheel says of its server, read from its source: vLLM's own reader (leaf)
    "dockergen.components.serving.vllm.wheel": set(),
    "dockergen.components.serving.vllm": _COMPONENT | {"dockergen.components.serving.base",
                                                       "dockergen.components.serving.run",
                                                       "dockergen.components.serving.serve",
                                                       "dockergen.components.serving.vllm.wheel"},
    "dockergen.components.serving": {"dockergen.components.serving",
                                     "dockergen.components.serving.base",
                                     "dockergen.components.serving.*",
                                     "dockergen.engine_names"},
    "dockergen.components": set(),
    "dockergen.resolve": _COMPONENT | {"dockergen.components.*", "dockergen.reproducible"},
    "dockergen.render": _BASE | {"dockergen.model", "dockergen.resources"},
    "dockergen.progress": _BASE | {"dockergen.buildrecord"},
    "dockergen.daemon": _BASE | {"dockergen.daemon.docker"},  # connect(), lazily
    "dockergen.daemon.docker": _BASE | {"dockergen.daemon", "dockergen.daemon.docker_serve"},
    # the serve check's HTTP side (loopback only; the container object is handed in)
    "dockergen.daemon.docker_serve": _BASE,
    "dockergen.smoke": _BASE | {"dockergen.buildrecord", "dockergen.components",
                                "dockergen.platforms", "dockergen.knowledge",
                                "dockergen.components.flash_attn",
                                "dockergen.components.flashinfer",
                                "dockergen.components.engine_jit",
                                "dockergen.components.python", "dockergen.resources",
                                "dockergen.components.torch",
                                "dockergen.components.serving.base", "dockergen.daemon",
                                "dockergen.model", "dockergen.profile"},
    # the programmatic interface sits below the commands it serves (build, deploy, plan,
    # observe import it), so it never imports them: no circle
    # a profile loaded once and resolved once: the value every output takes
    "dockergen.pipeline": _BASE | {"dockergen.buildid", "dockergen.loader", "dockergen.model",
                                   "dockergen.render", "dockergen.resolve"},
    "dockergen.api": _BASE | {"dockergen.fleet.matrix", "dockergen.loader", "dockergen.model",
                              "dockergen.pipeline", "dockergen.render",
                              "dockergen.resources", "dockergen.yamlsource"},
    # the orchestration: options, one build, then record, smoke and push (beside it)
    "dockergen.build": _BASE | {"dockergen.build_options", "dockergen.build_release",
                                "dockergen.build_run", "dockergen.buildid",
                                "dockergen.buildrecord", "dockergen.daemon", "dockergen.layers",
                                "dockergen.loader", "dockergen.pipeline", "dockergen.platforms",
                                "dockergen.multiplatform", "dockergen.render",
                                # the step after a push (SBOM, provenance, signatures)
                                "dockergen.trust.attest"},
    # the command line's values and their checks, before anything is rendered
    "dockergen.build_options": _BASE | {"dockergen.buildid", "dockergen.loader",
                                        "dockergen.model", "dockergen.pipeline",
                                        "dockergen.platforms", "dockergen.render",
                                        "dockergen.trust", "dockergen.trust.cosign"},
    # one build through the engine: pulls, progress, failures, tags
    "dockergen.build_run": _BASE | {"dockergen.buildrecord", "dockergen.build_options",
                                    "dockergen.daemon", "dockergen.layers",
                                    "dockergen.progress", "dockergen.reproducible"},
    # after the build: the record, the smoke tests, the push
    "dockergen.build_release": _BASE | {"dockergen.build_options", "dockergen.build_run",
                                        "dockergen.buildrecord", "dockergen.daemon",
                                        "dockergen.pipeline", "dockergen.render",
                                        "dockergen.smoke", "dockergen.trust.attest"},
    # several platforms, one image index: the one-platform build repeated, the index written
    # in the registry
    "dockergen.multiplatform": _BASE | {"dockergen.buildrecord", "dockergen.daemon",
                                        "dockergen.fleet.digests", "dockergen.pipeline",
                                        "dockergen.platforms", "dockergen.render",
                                        "dockergen.smoke"},
    # fleet (bake files, matrices, base-image locks): only the adapter reads the loader
    # and the resolved model; the rest is pure or talks to registries
    "dockergen.fleet.adapter": _BASE | {"dockergen.components.image", "dockergen.loader",
                                        "dockergen.model", "dockergen.pipeline",
                                        "dockergen.profile", "dockergen.yamlsource"},
    # what each layer compression asks of the builder and the nodes (leaf)
    "dockergen.layers": {"dockergen.errors"},
    # what makes two builds give one digest: the epoch, the exporter's rewrite, the noise (leaf)
    "dockergen.reproducible": set(),
    "dockergen.fleet.": _BASE | {"dockergen.fleet", "dockergen.fleet.*", "dockergen.layers",
                                 "dockergen.loader", "dockergen.net",
                                 "dockergen.model", "dockergen.pins", "dockergen.pipeline",
                                 "dockergen.profile"},
    "dockergen.fleet": set(),
    # run configurations are written from the resolution; facts of their own
    "dockergen.deploy": _BASE | {"dockergen.pipeline", "dockergen.buildrecord", "dockergen.layers",
                                 "dockergen.kube", "dockergen.knowledge",
                                 "dockergen.model",
                                 "dockergen.components.serving",
                                 "dockergen.components.serving.run",
                                 "dockergen.deploy.admission",
                                 "dockergen.deploy.compose", "dockergen.deploy.facts",
                                 "dockergen.deploy.kubernetes"},
    "dockergen.deploy.": _BASE | {"dockergen.deploy", "dockergen.deploy.admission",
                                  "dockergen.deploy.facts", "dockergen.kube",
                                  "dockergen.platforms"},
    # the capacity plan of a resolution (GPU memory sizes are in its GPU targets)
    "dockergen.plan": _BASE | {"dockergen.pipeline", "dockergen.plan.capacity",
                               "dockergen.plan.counts",
                               "dockergen.plan.shapes", "dockergen.plan.table",
                               "dockergen.plan.weights"},
    # its parts: the model's shape, weight bytes, the plan (with each engine's KV-cache
    # budget rule), the table
    "dockergen.plan.shapes": _BASE,
    "dockergen.plan.counts": {"dockergen.plan.shapes"},
    "dockergen.plan.weights": _BASE | {"dockergen.plan.shapes"},
    "dockergen.plan.capacity": _BASE | {"dockergen.components.serving", "dockergen.plan.counts",
                                        "dockergen.components.serving.run",
                                        "dockergen.plan.shapes"},
    "dockergen.plan.table": {"dockergen.plan.capacity", "dockergen.plan.shapes"},
    # observe reads the resolution through monitored only (one adapter)
    "dockergen.observe.metrics": set(),
    # the metric families a release defines, read from its source (leaf)
    "dockergen.observe.families": set(),
    "dockergen.observe.rules": {"dockergen.kube", "dockergen.observe.metrics"},
    "dockergen.observe.dashboard": {"dockergen.observe.rules"},
    "dockergen.observe.generate": _BASE | {"dockergen.pipeline", "dockergen.profile",
                                           "dockergen.kube",
                                           "dockergen.observe.metrics",
                                           "dockergen.observe.rules",
                                           "dockergen.observe.dashboard"},
    "dockergen.observe": set(),  # the package imports nothing: no Grafana SDK for upgrade
    # newer releases on an index, judged by resolving the profile moved to each
    "dockergen.outdated": _BASE | {"dockergen.components.serving", "dockergen.knowledge",
                                   "dockergen.loader", "dockergen.model", "dockergen.pipeline",
                                   "dockergen.outdated_index"},
    # a package index's simple API and the wheels it serves, read in ranges
    "dockergen.outdated_index": _BASE | {"dockergen.net", "dockergen.ranges"},
    # who writes which file of a locked closure (RECORDs read from the index)
    "dockergen.owners": _BASE | {"dockergen.knowledge", "dockergen.outdated"},
    # every locked distribution has a wheel for the image's Python and machine
    "dockergen.closure": _BASE | {"dockergen.outdated_index", "dockergen.owners"},
    # a profile moved to newer releases: resolution with facts derived from the index
    "dockergen.upgrade": _BASE | {"dockergen.components.cuda", "dockergen.components.serving",
                                  "dockergen.kernels", "dockergen.knowledge",
                                  "dockergen.knowledge_shapes",
                                  "dockergen.loader", "dockergen.model",
                                  "dockergen.observe.families", "dockergen.observe.metrics",
                                  "dockergen.outdated", "dockergen.resolve"},
    # every check a profile must pass, whoever owns it: validate runs the registry
    "dockergen.checks": {"dockergen.components.serving", "dockergen.components.fields",
                         "dockergen.errors",
                         "dockergen.fleet.adapter", "dockergen.fleet.project",
                         "dockergen.observe.generate", "dockergen.plan", "dockergen.resolve"},
    "dockergen.cli": {"dockergen", "dockergen.*"},
    # one module per command, and the group they share (dockergen/cli/app.py)
    "dockergen.cli.": {"dockergen", "dockergen.*"},
    "dockergen.__main__": {"dockergen.cli"},
    "dockergen.pylock": _BASE | {"dockergen.loader", "dockergen.pipeline",
                                 "dockergen.pylockfile", "dockergen.platforms"},
    # the Python lock's file format: the lock command, resolution's check and the engine
    # stage's install read and write it here (leaf)
    "dockergen.pylockfile": {"dockergen.inputs"},
    # evidence about a pushed image (SBOM, provenance, cosign, verify): the documents are
    # pure; attest reads the resolution and the daemon after a push; verify reads files
    "dockergen.trust": set(),
    "dockergen.trust.sbom": {"dockergen", "dockergen.errors", "dockergen.refs"},
    "dockergen.trust.provenance": {"dockergen", "dockergen.refs"},
    "dockergen.trust.cosign": {"dockergen.errors"},
    "dockergen.trust.attest": _BASE | {"dockergen.buildrecord",
                                       "dockergen.components.serving.base", "dockergen.daemon",
                                       "dockergen.pipeline", "dockergen.pylockfile",
                                       "dockergen.trust", "dockergen.trust.*"},
    "dockergen.trust.verify": _BASE | {"dockergen.buildrecord", "dockergen.trust",
                                       "dockergen.trust.*"},
    # maintainer tools: read the knowledge files and PyPI, never the rendering pipeline
    "dockergen.maint": set(),
    "dockergen.maint.": _BASE | {"dockergen.knowledge", "dockergen.maint", "dockergen.net",
                                 "dockergen.ranges", "dockergen.maint.*",
                                 "dockergen.kernels"},  # the fatbin reader, for the rows
}
# Third-party packages with one owner (a module, or a package and its modules).
ONLY_IMPORTER = {"docker": "dockergen.daemon.docker", "requests": "dockergen.daemon.docker",
                 "urllib3": "dockergen.net_transport",
                 "truststore": "dockergen.net_transport",
                 "pypi_simple": "dockergen.outdated_index",
                 "click": "dockergen.cli", "jinja2": "dockergen.render",
                 "grafana_foundation_sdk": "dockergen.observe.dashboard",
                 "cyclonedx": "dockergen.trust.sbom", "packageurl": "dockergen.trust.sbom"}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


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
            # `from dockergen.components import cuda` imports the module itself
            out += [f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base
                    for a in node.names]
    return out


def _is_module(name: str) -> bool:
    if not name.startswith("dockergen."):
        return False
    rel = Path(*name.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").exists() or (PACKAGE / rel / "__init__.py").exists()


def _allowed_for(module: str) -> set[str]:
    if module in ALLOWED:
        return ALLOWED[module]
    for key, value in ALLOWED.items():
        if key.endswith(".") and module.startswith(key):
            return value
    raise AssertionError(f"{module} has no layer in tests/architecture/test_architecture.py: "
                         "add it to the Architecture page (docs/architecture.md) and to ALLOWED")


def _permits(allowed: set[str], target: str) -> bool:
    return target in allowed or any(
        a.endswith(".*") and target.startswith(a[:-1]) for a in allowed)


def _owns(owner: str, module: str) -> bool:
    return module == owner or module.startswith(owner + ".")


def violations(module: str, source: str) -> list[str]:
    """What ``module`` imports against the flow."""
    found = []
    allowed = _allowed_for(module)
    for target in imports_of(source, module):
        top = target.split(".")[0]
        if top == "dockergen":
            if target != module and not _permits(allowed, target):
                found.append(f"{module} imports {target}")
        elif top in ONLY_IMPORTER and not _owns(ONLY_IMPORTER[top], module):
            found.append(f"{module} imports {target} (only {ONLY_IMPORTER[top]} may)")
    return found


# scripts an engine's folder carries for the built image (run there after driver_stub.py),
# not modules of dockergen: nothing imports them
IMAGE_SCRIPTS = ("serve_parse.py",)


def all_modules() -> list[tuple[str, str]]:
    return [(module_name(p), p.read_text()) for p in sorted(PACKAGE.rglob("*.py"))
            if p.name not in IMAGE_SCRIPTS]


def test_every_module_follows_the_flow() -> None:
    found = [v for module, source in all_modules() for v in violations(module, source)]
    assert found == []


def test_the_checker_catches_violations() -> None:
    # a component importing the CLI, anything but the daemon adapter importing docker,
    # one serving engine importing another, rendering importing a component
    assert violations("dockergen.components.torch", "from dockergen import cli\n") == [
        "dockergen.components.torch imports dockergen.cli"]
    assert violations("dockergen.api", "from dockergen.cli.app import cli\n") == [
        "dockergen.api imports dockergen.cli.app"]
    assert violations("dockergen.build", "import docker\n") == [
        "dockergen.build imports docker (only dockergen.daemon.docker may)"]
    # click belongs to the cli package: its command modules, no module beside it
    assert violations("dockergen.cli.render", "import click\n") == []
    assert violations("dockergen.render", "import click\n") == [
        "dockergen.render imports click (only dockergen.cli may)"]
    assert violations("dockergen.components.serving.vllm",
                      "from dockergen.components.serving import tensorrt_llm\n") == [
        "dockergen.components.serving.vllm imports dockergen.components.serving.tensorrt_llm"]
    assert violations("dockergen.render", "def f():\n    from dockergen.components import cuda\n"
                      ) == ["dockergen.render imports dockergen.components.cuda"]
    # the programmatic interface never imports the commands it serves (no circle)
    assert violations("dockergen.api", "def f():\n    from dockergen.build import x\n") == [
        "dockergen.api imports dockergen.build"]
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
    # the finder finds one: api importing build back was the circle of the reference parsers
    assert _cycles({"dockergen.api": {"dockergen.build"}, "dockergen.build": {"dockergen.api"}}
                   ) == [["dockergen.api", "dockergen.build"]]


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
    assert private_imports("from dockergen.loader import _validate, load_profile\n") == [
        "dockergen.loader._validate"]
    assert private_imports("from dockergen import __version__\nfrom os import _exit\n") == []
