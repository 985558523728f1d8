#!/usr/bin/env python3
"""Extract the Prometheus metrics an engine release defines, from its real wheel.

Maintainer tool behind ``dockergen/data/metrics.yaml``: it reads the engine's metrics
module out of the wheel (a zip; nothing is installed or imported) and lists every metric
family it creates, with its type and label names, by walking the module's syntax tree for
``Gauge(...)`` / ``Counter(...)`` / ``Histogram(...)`` calls (also vLLM's
``self._gauge_cls(...)`` indirection). The output is JSON, one entry per release; the
checked-in snapshot ``dockergen/data/metrics_snapshot.json`` is its output for the
releases dockergen knows, and ``tests/test_metrics_knowledge.py`` compares the hand-kept
``metrics.yaml`` with that snapshot offline.

Usage::

    # download with pip (no deps) and extract
    python scripts/extract_metrics.py vllm==0.33.0 sglang==0.5.23
    # or from wheels already on disk
    python scripts/extract_metrics.py --wheel ~/wheels/vllm-0.33.0-cp38-abi3-*.whl
    # refresh the snapshot (merges into the existing file)
    python scripts/extract_metrics.py --update dockergen/data/metrics_snapshot.json vllm==0.33.0

Counters: prometheus_client strips a trailing ``_total`` from a Counter's name and exposes
the sample as ``<family>_total``; the extracted ``family`` is that stripped name, so
``Counter(name="vllm:prompt_tokens")`` and ``Counter(name="vllm:prompt_tokens_total")``
(vLLM 0.8) both give family ``vllm:prompt_tokens``.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

# Where each engine defines its server's Prometheus metrics, newest layout first.
# src: the wheels themselves (vllm/v1/metrics/loggers.py PrometheusStatLogger since the V1
# engine; sglang moved srt/metrics/collector.py to srt/observability/metrics_collector.py).
MODULES: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm/v1/metrics/loggers.py",),
    "sglang": ("sglang/srt/observability/metrics_collector.py",
               "sglang/srt/metrics/collector.py"),
}
PREFIX = {"vllm": "vllm:", "sglang": "sglang:"}
_TYPES = {"gauge": "gauge", "counter": "counter", "histogram": "histogram",
          "_gauge_cls": "gauge", "_counter_cls": "counter", "_histogram_cls": "histogram"}
_WHEEL = re.compile(r"(?P<name>[A-Za-z0-9_]+)-(?P<version>[^-]+)-.*\.whl$")


def _callee_type(func: ast.expr) -> str | None:
    name = func.attr if isinstance(func, ast.Attribute) else (
        func.id if isinstance(func, ast.Name) else None)
    return _TYPES.get(name.lower()) if name else None


def _const_str(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) \
        else None


class _Extractor(ast.NodeVisitor):
    """Collects metric constructor calls; resolves simple label-name variables."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.scopes: list[dict[str, list[str]]] = [{}]
        self.found: dict[str, dict[str, Any]] = {}

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.scopes.append({})
        self.generic_visit(node)
        self.scopes.pop()

    def visit_Assign(self, node: ast.Assign) -> None:
        # Only literal lists can be label-name variables; anything else is not recorded.
        if isinstance(node.value, (ast.List, ast.Tuple, ast.BinOp)):
            labels = self._labels(node.value)
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.scopes[-1][target.id] = labels
        self.generic_visit(node)

    def _lookup(self, name: str) -> list[str] | None:
        """A label-name list assigned to ``name`` in this or an enclosing scope."""
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def _labels(self, node: ast.expr | None) -> list[str]:
        """Label names: literals, known variables and ``+`` / ``*`` of those resolved;
        a part only known at run time (sglang's ``labels.keys()``) kept as ``<source>``."""
        if node is None:
            return []
        if isinstance(node, (ast.List, ast.Tuple)):
            out: list[str] = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    out.extend(self._labels(elt.value))
                elif (text := _const_str(elt)) is not None:
                    out.append(text)
                else:
                    out.append(f"<{ast.unparse(elt)}>")
            return out
        if isinstance(node, ast.Name) and (known := self._lookup(node.id)) is not None:
            return known
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self._labels(node.left) + self._labels(node.right)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("list", "tuple") and len(node.args) == 1):
            return self._labels(node.args[0])
        return [f"<{ast.unparse(node)}>"]

    def visit_Call(self, node: ast.Call) -> None:
        kind = _callee_type(node.func)
        if kind:
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            name_node = kw.get("name") or (node.args[0] if node.args else None)
            name = self._name(name_node) if name_node is not None else None
            if name and name.startswith(self.prefix):
                family = name[: -len("_total")] if kind == "counter" and name.endswith(
                    "_total") else name
                entry = {"type": kind, "labels": self._labels(kw.get("labelnames"))}
                # A name defined twice (e.g. per engine index) must agree on its type.
                previous = self.found.get(family)
                if previous and previous["type"] != kind:
                    raise SystemExit(f"{family}: defined as {previous['type']} and {kind}")
                self.found[family] = entry
        self.generic_visit(node)

    def _name(self, node: ast.expr) -> str | None:
        text = _const_str(node)
        if text is not None:
            return text
        # sglang/TensorRT-LLM style: self.metric_prefix + "name" or f"{prefix}name"
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            right = _const_str(node.right)
            return self.prefix + right if right is not None else None
        return None


def extract_source(engine: str, source: str) -> dict[str, dict[str, Any]]:
    """Metric families defined in one metrics module's source text."""
    visitor = _Extractor(PREFIX[engine])
    visitor.visit(ast.parse(source))
    return dict(sorted(visitor.found.items()))


def extract_wheel(path: Path) -> dict[str, Any]:
    """One snapshot entry for a wheel file."""
    match = _WHEEL.search(path.name)
    if not match:
        raise SystemExit(f"{path}: not a wheel file name")
    engine, version = match["name"].lower(), match["version"]
    if engine not in MODULES:
        raise SystemExit(f"{path}: no metrics module known for {engine}")
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        member = next((m for m in MODULES[engine] if m in names), None)
        if member is None:
            raise SystemExit(f"{path}: none of {MODULES[engine]} in the wheel")
        data = zf.read(member)
    return {
        "engine": engine,
        "version": version,
        "wheel": path.name,
        "module": member,
        "module_sha256": hashlib.sha256(data).hexdigest(),
        "metrics": extract_source(engine, data.decode("utf-8")),
    }


def _download(requirement: str, dest: Path) -> Path:
    before = set(dest.glob("*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary",
                    ":all:", "-q", "-d", str(dest), requirement], check=True)
    new = sorted(set(dest.glob("*.whl")) - before)
    if len(new) != 1:
        raise SystemExit(f"{requirement}: expected one wheel, got {new}")
    return new[0]


def main(argv: list[str] | None = None) -> int:
    """Extract the given releases and print (or merge into --update) the snapshot JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("requirements", nargs="*", help="e.g. vllm==0.33.0 (pip download)")
    parser.add_argument("--wheel", action="append", default=[], type=Path,
                        help="a wheel already on disk (repeatable)")
    parser.add_argument("--update", type=Path, help="merge the result into this snapshot file")
    args = parser.parse_args(argv)
    entries = [extract_wheel(w) for w in args.wheel]
    if args.requirements:
        with tempfile.TemporaryDirectory() as tmp:
            for req in args.requirements:
                wheel = _download(req, Path(tmp))
                entries.append(extract_wheel(wheel))
                wheel.unlink()  # vLLM wheels are ~400 MB: keep at most one on disk
    snapshot: dict[str, dict[str, Any]] = {}
    if args.update and args.update.exists():
        snapshot = json.loads(args.update.read_text(encoding="utf-8"))
    for entry in entries:
        snapshot.setdefault(entry["engine"], {})[entry["version"]] = entry
    text = json.dumps(snapshot, indent=1, sort_keys=True) + "\n"
    if args.update:
        args.update.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
