"""``python -m dockergen.maint.secret_rules GITLEAKS_TOML --version V -o FILE``: vendor the
secret-scanning rules of gitleaks (github.com/gitleaks/gitleaks, ``config/gitleaks.toml``,
MIT licence) as ``dockergen/data/secret_rules.json``, the rules :mod:`dockergen.errors` scans
every message, log line and profile value with.

gitleaks writes its rules for Go's RE2, which matches in linear time whatever the pattern;
Python's ``re`` backtracks. Each rule is therefore converted (:func:`to_python`) and then
kept only when its pattern has no nested quantifier (:func:`nested_quantifier`), the shape
that makes a backtracking scan super-linear; a rule that cannot be converted or kept is
listed under ``skipped`` with the reason, so a refresh shows what it loses.
``tests/unit/input/test_secrets_scan.py`` re-derives the file from the rule text it records
and times every kept rule on hostile input.

Rules that only apply to a file path (``path``) or need a second rule (``required``) scan
files, not strings, and are skipped. The few formats gitleaks has no rule for are added
from :data:`SUPPLEMENT`, each with its own source.

Needs Python >= 3.11 (``tomllib``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

SOURCE = "https://github.com/gitleaks/gitleaks/blob/{commit}/config/gitleaks.toml"
LICENCE = ("MIT License, Copyright (c) 2019 Zachary Rice; the full text is "
           "dockergen/data/secret_rules.LICENSE (gitleaks' LICENSE file)")

# Formats gitleaks has no rule for, each with where its shape is documented.
SUPPLEMENT: list[dict[str, Any]] = [
    {"id": "nvidia-api-key", "regex": r"\b(nvapi-[a-zA-Z0-9_-]{20,128})", "keywords": ["nvapi"],
     "src": "NVIDIA NGC / build.nvidia.com API keys: nvapi- and 64 characters (trufflehog "
            "pkg/detectors/nvapi keyPat); any length from 20 here, the prefix is the key's "
            "own, and a key cut or extended by a paste is still one"},
    {"id": "aws-secret-access-key-option",
     "regex": r"(?i)\baws_secret_access_key[ \t]{1,8}([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
     "keywords": ["aws_secret_access_key"],
     "src": "AWS CLI `aws configure set aws_secret_access_key VALUE` (docs.aws.amazon.com "
            "cli/latest/reference/configure/set.html): a 40-character secret after a space, "
            "which gitleaks' generic rule (an = or : between) does not see"},
    {"id": "password-assignment",
     "regex": r"(?i)(?<![A-Za-z0-9])(?:password|passwd|pwd)[ \t]{0,3}[=:][ \t]{0,3}"
              r"([^\s'\"<>$][^\s'\"<>]{0,255})",  # $VAR, ${{ x }}: a reference, not a value
     "keywords": ["password", "passwd", "pwd"],
     "src": "a value assigned to a password by name is one whatever it looks like (BuildKit's "
            "SecretsUsedInArgOrEnv names: moby/buildkit dockerfile2llb/validations.go); "
            "gitleaks' generic-api-key rule wants 10+ characters of entropy >= 3.5"},
    {"id": "private-key-header",
     "regex": r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----",
     "keywords": ["-----begin"],
     "src": "RFC 7468 section 10 / OpenSSH PROTOCOL.key: a private key's PEM header; "
            "gitleaks' private-key rule needs the whole block up to its END line, so a "
            "header alone (a truncated paste) passed"},
]

_POSIX = {"alnum": "a-zA-Z0-9", "alpha": "a-zA-Z", "digit": "0-9", "xdigit": "0-9a-fA-F",
          "upper": "A-Z", "lower": "a-z", "space": r" \t\n\r\f\v", "word": r"\w",
          "punct": r"!-/:-@\[-`{-~"}


def to_python(go: str) -> str:
    """An RE2 (Go ``regexp``) pattern as a Python ``re`` pattern of the same meaning.

    RE2 allows flags such as ``(?i)`` anywhere, applying to the end of the enclosing group;
    Python only at the start, so they become scoped groups ``(?i:...)``. POSIX classes
    (``[[:alnum:]]``) are spelt out, ``\\z`` is ``\\Z``, and characters Python would read as
    set operations inside a class are escaped.
    """
    out: list[str] = []
    closers: list[int] = [0]  # per open group: scoped-flag groups to close with it
    i, in_class = 0, False
    while i < len(go):
        ch = go[i]
        if ch == "\\":
            pair = go[i:i + 2]
            out.append("\\Z" if pair == "\\z" else pair)
            i += 2
            continue
        if in_class:
            posix = re.match(r"\[:(\^?)([a-z]+):\]", go[i:])
            if posix and posix.group(2) in _POSIX and not posix.group(1):
                out.append(_POSIX[posix.group(2)])
                i += posix.end()
                continue
            if ch == "]" and out[-1] not in ("[", "[^"):
                in_class = False
            elif ch in "[&|~" or (ch == "-" and go[i - 1] == "-"):
                out.append("\\" + ch)
                i += 1
                continue
            out.append(ch)
            i += 1
            continue
        if ch == "[":
            in_class = True
            out.append("[^" if go[i + 1:i + 2] == "^" else "[")
            i += 2 if go[i + 1:i + 2] == "^" else 1
            if go[i:i + 1] == "]":  # a leading ] is a literal
                out.append("\\]")
                i += 1
            continue
        flags = re.match(r"\(\?([a-z-]+)\)", go[i:])
        if flags and i > 0:
            out.append(f"(?{flags.group(1)}:")
            closers[-1] += 1
            i += flags.end()
            continue
        if ch == "(":
            closers.append(0)
        elif ch == ")":
            out.append(")" * closers.pop())
        out.append(ch)
        i += 1
    out.append(")" * closers[0])
    return "".join(out)


# gitleaks' keyword rules open with up to 50 identifier characters before the keyword
# (``[\w.-]{0,50}?``), lazily: it never decides whether there is a match or what the secret
# is, only where the match starts. Python's backtracking engine retries it at every
# position, 50 x the keyword's continuation each time (0.5 s per 8 kB of "adobe"); without
# it the pattern starts at a literal. The match is widened again over those characters
# for the allowlists that read it (:mod:`dockergen.errors`, ``lead``).
_LEAD = r"[\w.-]{0,50}?"


# gitleaks ends a secret at a quote, a space, ';', an escaped line break or the end; in a
# message or a log line a token is as often followed by ':' (a port), ',' or ')' (a list),
# '/' or '&' (a URL), so those end one too.
_END = r"""(?:[\x60'"\s;]|\\[nr]|$)"""
_END_HERE = r"""(?:[\x60'"\s;:,)\]}&/|<>]|\\[nr]|$)"""


def strip_lead(pattern: str) -> tuple[str, int]:
    """(the pattern without its leading lazy identifier run, that run's longest length)."""
    flags = "(?i)" if pattern.startswith("(?i)") else ""
    body = pattern[len(flags):]
    lead = 0
    while True:
        if body.startswith(_LEAD):
            body, lead = body[len(_LEAD):], 50
        elif body.startswith("(?i:" + _LEAD):
            body, lead = "(?i:" + body[len("(?i:" + _LEAD):], 50
        else:
            return flags + body, lead


def python_pattern(go: str) -> tuple[str, int]:
    """(the Python pattern of a gitleaks rule, its stripped lead): :func:`to_python`, then
    :func:`strip_lead`, then a secret's end widened (``_END_HERE``)."""
    pattern, lead = strip_lead(to_python(go))
    return pattern.replace(_END, _END_HERE), lead


def nested_quantifier(pattern: str) -> bool:
    """The pattern repeats something that itself repeats (``(a+)+``, ``(?:x{2,}){3,}``).

    Those are the shapes a backtracking engine can take super-linear time on; a bounded
    repeat of a fixed-length atom (``[a-z]{32}``, ``(?:-[a-z]{4}){3}``) is not one.
    """
    try:
        from re import _parser as parser  # type: ignore[attr-defined]
    except ImportError:  # Python 3.10
        import sre_parse as parser

    repeats = {parser.MAX_REPEAT, parser.MIN_REPEAT, getattr(parser, "POSSESSIVE_REPEAT",
                                                             parser.MAX_REPEAT)}

    def variable(items: Any) -> bool:
        lo, hi = items.getwidth() if hasattr(items, "getwidth") else (0, 0)
        return bool(lo != hi)

    def walk(items: Any, inside: bool) -> bool:
        for op, av in items:
            if op in repeats:
                lo, hi, sub = av
                if inside and (hi > 1 or variable(sub)):
                    return True
                if walk(sub, inside or (hi > 1 and variable(sub))):
                    return True
            elif op is parser.SUBPATTERN:
                if walk(av[-1], inside):
                    return True
            elif op is parser.BRANCH:
                if any(walk(b, inside) for b in av[1]):
                    return True
            elif op in (parser.ASSERT, parser.ASSERT_NOT) and walk(av[1], inside):
                return True
        return False

    return walk(parser.parse(pattern, re.ASCII), False)


def _allowlists(rule: dict[str, Any]) -> list[dict[str, Any]]:
    """The rule's allowlists that apply to a string (path-only ones apply to files)."""
    out = []
    for allow in rule.get("allowlists", []):
        if allow.get("paths") and not (allow.get("regexes") or allow.get("stopwords")):
            continue
        if allow.get("commits"):
            continue
        out.append({"target": allow.get("regexTarget", "secret"),
                    "condition": allow.get("condition", "OR").upper(),
                    "regexes": [to_python(r) for r in allow.get("regexes", [])],
                    "stopwords": [w.lower() for w in allow.get("stopwords", [])]})
    return out


def convert(config: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """(kept rules, skipped rules with their reasons) of a parsed gitleaks config."""
    kept, skipped = [], []
    for rule in config.get("rules", []):
        rid = rule["id"]
        if "regex" not in rule:
            skipped.append({"id": rid, "why": "no regex (a path-only rule)"})
            continue
        if rule.get("path") or rule.get("required"):
            skipped.append({"id": rid, "why": "applies to file paths or needs another rule"})
            continue
        pattern, lead = python_pattern(rule["regex"])
        try:
            compiled = re.compile(pattern, re.ASCII)
        except re.error as exc:
            skipped.append({"id": rid, "why": f"not a Python pattern: {exc}"})
            continue
        if nested_quantifier(pattern):
            skipped.append({"id": rid, "why": "nested quantifier (super-linear in Python re)"})
            continue
        group = rule.get("secretGroup") or (1 if compiled.groups else 0)
        kept.append({"id": rid, "regex": pattern, "gitleaks_regex": rule["regex"],
                     "group": group, "lead": lead,
                     "entropy": rule.get("entropy", 0),
                     "keywords": sorted({k.lower() for k in rule.get("keywords", [])}),
                     "allowlists": _allowlists(rule)})
    for extra in SUPPLEMENT:
        kept.append({"id": extra["id"], "regex": extra["regex"], "group": 0 if
                     not re.compile(extra["regex"]).groups else 1, "entropy": 0, "lead": 0,
                     "keywords": extra["keywords"], "allowlists": [], "src": extra["src"]})
    return kept, skipped


def build(config: dict[str, Any], version: str, commit: str) -> dict[str, Any]:
    """The data file's content: rules, global allowlist, source, version and licence."""
    rules, skipped = convert(config)
    allow = config.get("allowlist", {})
    return {
        "source": SOURCE.format(commit=commit), "version": version, "commit": commit,
        "licence": LICENCE,
        "derived_by": "python -m dockergen.maint.secret_rules config/gitleaks.toml "
                      f"--version {version} --commit {commit} -o dockergen/data/"
                      "secret_rules.json",
        "global_allowlist": {"regexes": [to_python(r) for r in allow.get("regexes", [])],
                             "stopwords": [w.lower() for w in allow.get("stopwords", [])]},
        "rules": rules, "skipped": skipped}


def main(argv: list[str] | None = None) -> int:
    """Write the data file from a gitleaks.toml."""
    import tomllib

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("toml", type=Path)
    parser.add_argument("--version", required=True, help="gitleaks version, e.g. v8.30.0")
    parser.add_argument("--commit", required=True, help="the commit of the toml file")
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args(argv)
    data = build(tomllib.loads(args.toml.read_text(encoding="utf-8")), args.version,
                 args.commit)
    args.output.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{len(data['rules'])} rules kept, {len(data['skipped'])} skipped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
