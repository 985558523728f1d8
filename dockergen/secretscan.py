"""The scanner behind :data:`dockergen.errors.SECRET_VALUE`: dockergen's own credential
shapes and the vendored rules of a secret scanner, run only where their keywords are.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_LINE = 512
_IDENT = re.compile(r"[\w.-]", re.ASCII)


@dataclass(frozen=True)
class _Rule:
    """One vendored rule: run only when one of its keywords is in the text (as gitleaks
    does), then kept only above its entropy and outside its allowlists."""

    id: str
    pattern: str
    group: int
    entropy: float
    keywords: tuple[str, ...]
    lead: int  # identifier characters gitleaks' match may start with before the pattern's
    allowlists: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...]

    @functools.cached_property
    def regex(self) -> re.Pattern[str]:
        """Compiled on first use: a scan runs only the rules whose keywords it meets, and
        compiling all 200 would cost every command a few hundred milliseconds."""
        return re.compile(self.pattern, re.ASCII)


def _entropy(text: str) -> float:
    """Shannon entropy in bits per character (gitleaks detect/utils.go shannonEntropy)."""
    counts: dict[str, int] = {}
    for ch in text:
        counts[ch] = counts.get(ch, 0) + 1
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _allowed(allow: tuple[str, str, tuple[str, ...], tuple[str, ...]],
             secret: str, match: str, line: str) -> bool:
    scope, condition, regexes, stopwords = allow  # scope: gitleaks' allowlist "target"
    text = {"match": match, "line": line}.get(scope, secret)
    checks = []
    if regexes:
        checks.append(any(re.search(r, text, re.ASCII) for r in regexes))  # re's cache
    if stopwords:
        checks.append(any(w in secret.lower() for w in stopwords))
    return bool(checks) and (all(checks) if condition == "AND" else any(checks))


class SecretScan:
    """Credential shapes: dockergen's own (the pattern it is given: dockergen.errors'
    ``_OWN``) and the rules of gitleaks, vendored in ``data/secret_rules.json`` with their
    source, version and licence (derived by :mod:`dockergen.maint.secret_rules`). The
    file is read on the first scan, so commands that print nothing pay nothing. Every kept
    rule's pattern has no nested quantifier, so a scan stays linear
    (tests/unit/input/test_secrets_scan.py times each rule).
    """

    def __init__(self, own: re.Pattern[str], rules_file: Path) -> None:
        self._own = own
        self._file = rules_file
        self._rules: list[_Rule] | None = None
        self._global: tuple[str, str, tuple[str, ...], tuple[str, ...]] | None = None
        self._by_keyword: dict[str, list[int]] = {}  # keyword -> the rules that need it
        self._keywords: tuple[str, ...] = ()
        self._always: set[int] = set()  # rules without keywords

    def rules(self) -> list[_Rule]:
        """The vendored rules, compiled."""
        if self._rules is None:
            data = json.loads(self._file.read_text(encoding="utf-8"))

            def allow(a: dict[str, Any]) -> tuple[str, str, tuple[str, ...], tuple[str, ...]]:
                return (a.get("target", "secret"), a.get("condition", "OR"),
                        tuple(a.get("regexes", [])), tuple(a.get("stopwords", [])))

            self._global = allow(data["global_allowlist"])
            self._rules = [_Rule(r["id"], r["regex"], r["group"],
                                 r["entropy"], tuple(r["keywords"]), r["lead"],
                                 tuple(allow(a) for a in r["allowlists"]))
                           for r in data["rules"]]
            for i, rule in enumerate(self._rules):
                for k in rule.keywords:
                    self._by_keyword.setdefault(k, []).append(i)
                if not rule.keywords:
                    self._always.add(i)
            self._keywords = tuple(self._by_keyword)
        return self._rules

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, rule id) of every credential in ``text``, in order."""
        found = [(m.start(), m.end(), "dockergen") for m in self._own.finditer(text)]
        lower = text.lower()
        rules = self.rules()
        ids = {i for k in self._keywords if k in lower for i in self._by_keyword[k]}
        for rule in (rules[i] for i in sorted(ids | self._always)):
            for m in rule.regex.finditer(text):
                group = rule.group if m.start(rule.group) >= 0 else 0
                secret = m.group(group)
                if not secret or (rule.entropy and _entropy(secret) < rule.entropy):
                    continue
                # the line around the match, at most _LINE characters each side: a "line"
                # allowlist runs on it, and on a whole 200 kB line it could backtrack
                begin = max(text.rfind("\n", 0, m.start()) + 1, m.start() - _LINE)
                line = text[begin:m.end() + _LINE].split("\n", 1)[0]
                assert self._global is not None
                # the identifier run before the keyword that gitleaks' match starts with
                # (dockergen.maint.secret_rules strip_lead), for allowlists of the match
                lead = m.start()
                while lead > m.start() - rule.lead and lead and _IDENT.match(text, lead - 1):
                    lead -= 1
                if any(_allowed(a, secret, text[lead:m.end()], line)
                       for a in (self._global, *rule.allowlists)):
                    continue
                found.append((m.start(group), m.end(group), rule.id))
        return sorted(found)

    def search(self, text: str) -> tuple[int, int, str] | None:
        """The first credential in ``text`` (truthy), or None."""
        spans = self.spans(text)
        return spans[0] if spans else None

    def sub(self, repl: str, text: str) -> str:
        """``text`` with every credential (overlapping ones merged) replaced by ``repl``."""
        out, at = [], 0
        for start, end, _ in self.spans(text):
            if start < at:  # overlaps the one before: one replacement for both
                at = max(at, end)
                continue
            out.append(text[at:start] + repl)
            at = end
        return "".join(out) + text[at:]
