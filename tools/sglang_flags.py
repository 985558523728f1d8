#!/usr/bin/env python3
"""Extract the `sglang serve` / `python -m sglang.launch_server` CLI flags from an sglang wheel.

Static (AST) extraction: importing sglang.srt.server_args needs torch + triton + numpy, so the
parser cannot be built on a machine without the CUDA stack. The script reproduces what
`ServerArgs.add_cli_args` registers:

  1. every literal `*.add_argument("--flag", "--alias", ...)` inside `add_cli_args` in
     sglang/srt/server_args.py (older releases register all flags this way);
  2. when add_cli_args calls `add_cli_args_from_dataclass(parser, ServerArgs)` (sglang >= 0.5.2x,
     declarative flags): every field `name: A[T, "help" | Arg(...)]` of the classes listed in
     `_INPUT_NAMESPACES` (resolved through server_args.py's `from ... import` lines to
     sglang/srt/arg_groups/fields/*.py) and of the ServerArgs class body, mirroring
     sglang/srt/arg_groups/arg_utils.py: flag = Arg.cli_name or "--" + name.replace("_", "-"),
     plus Arg.aliases; fields with Arg(no_cli=True) or without Arg/str metadata are skipped.

Usage:
  extract_flags.py WHEEL                 -> sorted JSON list of all option strings
  extract_flags.py WHEEL --details       -> JSON list of {flags, field, source, choices, default}

Exits 2 (with a message on stderr) when the wheel layout is not understood, so a changed
upstream layout fails loudly instead of yielding a short list.
"""

from __future__ import annotations

import ast
import json
import sys
import zipfile
from typing import Any

SERVER_ARGS = "sglang/srt/server_args.py"


def _src(node: ast.AST | None) -> str | None:
    return None if node is None else ast.unparse(node)


def _str_list(node: ast.AST) -> list[str]:
    if isinstance(node, (ast.List, ast.Tuple)):
        out = []
        for elt in node.elts:
            if not (isinstance(elt, ast.Constant) and isinstance(elt.value, str)):
                raise ValueError(f"non-literal alias: {ast.unparse(elt)}")
            out.append(elt.value)
        return out
    raise ValueError(f"non-literal aliases: {ast.unparse(node)}")


def _call_name(call: ast.Call) -> str | None:
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return None


def add_argument_flags(tree: ast.Module, path: str) -> list[dict[str, Any]]:
    """Literal add_argument calls inside every function named add_cli_args."""
    out = []
    funcs = [
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "add_cli_args"
    ]
    if not funcs:
        raise SystemExit(f"error: no add_cli_args function in {path}")
    for fn in funcs:
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and _call_name(node) == "add_argument":
                flags = [
                    a.value
                    for a in node.args
                    if isinstance(a, ast.Constant) and isinstance(a.value, str)
                ]
                if not flags or len(flags) != len(node.args):
                    raise SystemExit(
                        f"error: {path}:{node.lineno}: non-literal add_argument name(s): "
                        f"{ast.unparse(node)[:120]}"
                    )
                kw = {k.arg: k.value for k in node.keywords}
                if (_src(kw.get("action")) or "").split(".")[-1] == "BooleanOptionalAction":
                    flags += ["--no-" + f[2:] for f in flags if f.startswith("--")]
                out.append(
                    {
                        "flags": flags,
                        "field": _src(kw.get("dest")),
                        "source": f"{path}:{node.lineno}",
                        "choices": _src(kw.get("choices")),
                        "default": _src(kw.get("default")),
                    }
                )
    return out


def _is_annotated(ann: ast.AST) -> bool:
    if not isinstance(ann, ast.Subscript):
        return False
    v = ann.value
    name = v.id if isinstance(v, ast.Name) else v.attr if isinstance(v, ast.Attribute) else None
    return name in ("A", "Annotated")


def class_field_flags(cls: ast.ClassDef, path: str) -> list[dict[str, Any]]:
    """Flags that add_cli_args_from_dataclass derives from a class's annotated fields."""
    out = []
    for stmt in cls.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        if not _is_annotated(stmt.annotation):
            continue
        assert isinstance(stmt.annotation, ast.Subscript)  # _is_annotated checked it
        sl = stmt.annotation.slice
        elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        meta: ast.Call | str | None = None
        for m in elts[1:]:
            if isinstance(m, ast.Call) and _call_name(m) == "Arg":
                meta = m
                break
            if isinstance(m, (ast.Constant, ast.JoinedStr, ast.BinOp)):
                if isinstance(m, ast.Constant) and not isinstance(m.value, str):
                    continue
                meta = "help"
                break
            if isinstance(m, ast.Call):
                continue  # NS(...) and similar markers
            raise SystemExit(
                f"error: {path}:{stmt.lineno}: cannot tell if metadata "
                f"{ast.unparse(m)!r} is an Arg or help string"
            )
        if meta is None:
            continue
        name = stmt.target.id
        cli_name = "--" + name.replace("_", "-")
        aliases: list[str] = []
        choices = None
        if isinstance(meta, ast.Call):
            kw = {k.arg: k.value for k in meta.keywords}
            no_cli = kw.get("no_cli")
            if no_cli is not None:
                if not isinstance(no_cli, ast.Constant):
                    raise SystemExit(f"error: {path}:{stmt.lineno}: non-literal no_cli")
                if no_cli.value:
                    continue
            if "cli_name" in kw:
                c = kw["cli_name"]
                if not (isinstance(c, ast.Constant) and isinstance(c.value, str)):
                    raise SystemExit(f"error: {path}:{stmt.lineno}: non-literal cli_name")
                cli_name = c.value
            if "aliases" in kw:
                try:
                    aliases = _str_list(kw["aliases"])
                except ValueError as e:
                    raise SystemExit(f"error: {path}:{stmt.lineno}: {e}") from None
            choices = _src(kw.get("choices"))
            action = _src(kw.get("action")) or ""
            if action.split(".")[-1] == "BooleanOptionalAction":
                # argparse.BooleanOptionalAction also registers --no-X for every --X.
                aliases = aliases + [
                    "--no-" + f[2:] for f in [cli_name, *aliases] if f.startswith("--")
                ]
        if choices is None:
            # Literal[...] annotations become argparse choices.
            inner = _src(elts[0])
            if inner and "Literal[" in inner:
                choices = inner
        out.append(
            {
                "flags": [cli_name, *aliases],
                "field": name,
                "source": f"{path}:{stmt.lineno} ({cls.name})",
                "choices": choices,
                "default": _src(stmt.value),
            }
        )
    return out


def _module_path(module: str) -> str:
    return module.replace(".", "/") + ".py"


def extract(wheel: str) -> list[dict[str, Any]]:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        if SERVER_ARGS not in names:
            raise SystemExit(f"error: {wheel} has no {SERVER_ARGS}")
        sa_tree = ast.parse(zf.read(SERVER_ARGS), SERVER_ARGS)
        entries = add_argument_flags(sa_tree, SERVER_ARGS)

        uses_dataclass = any(
            isinstance(n, ast.Call) and _call_name(n) == "add_cli_args_from_dataclass"
            for n in ast.walk(sa_tree)
        )
        if uses_dataclass:
            imports = {}
            for n in sa_tree.body:
                if isinstance(n, ast.ImportFrom) and n.module:
                    for a in n.names:
                        imports[a.asname or a.name] = n.module
            classes: list[tuple[ast.ClassDef, str]] = []
            for n in sa_tree.body:
                if isinstance(n, ast.ClassDef) and n.name == "ServerArgs":
                    classes.append((n, SERVER_ARGS))
            ns_list = None
            for n in sa_tree.body:
                if isinstance(n, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "_INPUT_NAMESPACES" for t in n.targets
                ):
                    ns_list = n.value
            if ns_list is not None:
                if not isinstance(ns_list, (ast.List, ast.Tuple)):
                    raise SystemExit("error: _INPUT_NAMESPACES is not a literal list")
                for elt in ns_list.elts:
                    if not isinstance(elt, ast.Name) or elt.id not in imports:
                        raise SystemExit(f"error: cannot resolve namespace {ast.unparse(elt)}")
                    path = _module_path(imports[elt.id])
                    if path not in names:
                        raise SystemExit(f"error: {path} (for {elt.id}) not in wheel")
                    tree = ast.parse(zf.read(path), path)
                    found = [
                        c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == elt.id
                    ]
                    if len(found) != 1:
                        raise SystemExit(f"error: class {elt.id} not found once in {path}")
                    if found[0].bases and not all(
                        _src(b) in ("msgspec.Struct", "Struct") for b in found[0].bases
                    ):
                        raise SystemExit(
                            f"error: {elt.id} inherits {[_src(b) for b in found[0].bases]}; "
                            "inherited fields are not followed"
                        )
                    classes.append((found[0], path))
            elif (
                uses_dataclass
                and len(classes) == 1
                and not any(isinstance(s, ast.AnnAssign) for s in classes[0][0].body)
            ):
                raise SystemExit("error: dataclass-derived flags but no field source found")
            for cls, path in classes:
                entries.extend(class_field_flags(cls, path))

    seen: dict[str, str] = {}
    for e in entries:
        for f in e["flags"]:
            if f in seen:
                raise SystemExit(f"error: flag {f} registered twice ({seen[f]}, {e['source']})")
            seen[f] = e["source"]
    return sorted(entries, key=lambda e: e["flags"][0])


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3) or (len(argv) == 3 and argv[2] != "--details"):
        print(__doc__, file=sys.stderr)
        return 2
    entries = extract(argv[1])
    if len(argv) == 3:
        json.dump(entries, sys.stdout, indent=1, sort_keys=True)
    else:
        json.dump(sorted(f for e in entries for f in e["flags"]), sys.stdout, indent=0)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
