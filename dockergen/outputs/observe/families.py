"""The Prometheus metric families an engine release defines, read from its metrics module's
source (a syntax-tree walk: nothing installed or imported).

Every ``Gauge(...)`` / ``Counter(...)`` / ``Histogram(...)`` call (also vLLM's
``self._gauge_cls(...)`` indirection) with the engine's name prefix is one family, with its
type and label names. Counters: prometheus_client strips a trailing ``_total`` from a
Counter's name and exposes the sample as ``<family>_total``; the family is that stripped
name, so ``Counter(name="vllm:prompt_tokens")`` and ``Counter(name="vllm:prompt_tokens_total")``
(vLLM 0.8) both give ``vllm:prompt_tokens``.

``scripts/extract_metrics.py`` (the snapshot behind each engine's ``metrics.yaml``) and ``dockergen
upgrade`` (a release dockergen does not know) both read through :func:`extract_source`.
"""

from __future__ import annotations

import ast
from typing import Any

_TYPES = {"gauge": "gauge", "counter": "counter", "histogram": "histogram",
          "_gauge_cls": "gauge", "_counter_cls": "counter", "_histogram_cls": "histogram"}


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
                    raise ValueError(f"{family}: defined as {previous['type']} and {kind}")
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


def extract_source(prefix: str, source: str) -> dict[str, dict[str, Any]]:
    """Metric families defined in one metrics module's source text whose names start with
    ``prefix`` (an engine's, from its ``metrics.yaml``): family -> ``{"type": ...,
    "labels": [...]}``. Raises ValueError on source it cannot read."""
    visitor = _Extractor(prefix)
    try:
        visitor.visit(ast.parse(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        # RecursionError/MemoryError: nesting deeper than the parser's or the walk's stack
        raise ValueError(f"the metrics module does not parse ({type(exc).__name__}: {exc})"
                         ) from None
    return dict(sorted(visitor.found.items()))
