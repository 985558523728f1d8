"""Which Prometheus metrics an engine release exposes: typed access to each serving engine's
``metrics.yaml`` (in its folder, ``dockergen/parts/engines/<engine>/``).

The rows were read from the released wheels (``scripts/extract_metrics.py``; the checked-in
``data/metrics_snapshot.json`` is what it extracted, for every engine) and carry their
``src:``. A profile's engine and release pick the names; a release nobody read is an error,
never a guess, since a wrong name gives a dashboard that silently shows nothing.

An engine's file: ``engine`` (its ``engine.name``), ``metrics_path``, ``enable_flag`` (the
server flag without which it exposes none), ``modules`` (where a release defines its
metrics, newest layout first), ``prefix`` (of every family name), ``releases`` (whose wheel
was read) and ``roles``. A role's rows: ``name`` is the metric family as prometheus_client
defines it (a counter's samples are ``<name>_total``, a histogram's
``<name>_bucket/_sum/_count``); ``since``/``until`` bound the releases (until is
exclusive); ``unverified: true`` marks rows not read from a released artefact (``observe``
warns for them). ``tests/unit/knowledge/test_metrics_knowledge.py`` checks, offline, that
every role of every listed release resolves to a family the snapshot has for that release,
with the same type and label names.

The roles (what the recording rules need): requests_running and requests_waiting (gauges,
queue depth), kv_cache_usage (gauge, fraction 0..1 of the KV cache in use), prompt_tokens
and generation_tokens (counters of tokens), requests (counter of finished requests), ttft,
itl and e2e (histograms in seconds: time to first token, inter-token latency, end-to-end
request latency).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from packaging.version import Version

DATA_DIR = Path(__file__).resolve().parents[2] / "data"
ENGINES_DIR = Path(__file__).resolve().parents[2] / "parts" / "engines"
METRICS_FILE = "metrics.yaml"  # in each engine's folder
SNAPSHOT_FILE = DATA_DIR / "metrics_snapshot.json"

# What the recording rules need from every engine (see the module's docstring).
ROLES = ("requests_running", "requests_waiting", "kv_cache_usage", "prompt_tokens",
         "generation_tokens", "requests", "ttft", "itl", "e2e")


@dataclass(frozen=True)
class Metric:
    """One metric family of one release, in the role the rules use it for."""

    role: str
    name: str  # family name as defined; counters expose <name>_total
    type: str  # gauge | counter | histogram
    labels: tuple[str, ...]
    unit: str
    src: str
    unverified: bool = False

    def sample(self, suffix: str = "") -> str:
        """The exposed series name: ``_total`` for counters, ``suffix`` for histograms."""
        if self.type == "counter":
            return f"{self.name}_total"
        return self.name + suffix


@dataclass(frozen=True)
class EngineMetrics:
    """The metrics of one engine release and how its server exposes them."""

    engine: str
    release: str
    metrics_path: str
    enable_flag: str | None
    roles: dict[str, Metric]

    @property
    def unverified(self) -> list[Metric]:
        """Rows not read from a released artefact (they only warn)."""
        return [m for m in self.roles.values() if m.unverified]


class UnknownRelease(LookupError):
    """No metrics knowledge for an engine release; ``known`` lists the releases read."""

    def __init__(self, engine: str, release: str, known: list[str]) -> None:
        self.engine, self.release, self.known = engine, release, known
        super().__init__(f"no metrics knowledge for {engine} {release}")


@functools.lru_cache(maxsize=1)
def load_table() -> dict[str, Any]:
    """Every engine's parsed ``metrics.yaml``: ``{"engines": {engine.name: table}}`` (cached)."""
    engines: dict[str, Any] = {}
    for path in sorted(ENGINES_DIR.glob(f"*/{METRICS_FILE}")):
        table = yaml.safe_load(path.read_text(encoding="utf-8"))
        engines[str(table.pop("engine"))] = table
    return {"engines": engines}


def read_modules(engine: str) -> tuple[tuple[str, ...], str]:
    """Where a release of ``engine`` defines its metrics (newest layout first) and the prefix
    of every family name: what :func:`dockergen.outputs.observe.families.extract_source` reads. None
    of either (``((), "")``) when its ``metrics.yaml`` names no prefix: its source is not
    read."""
    table = load_table()["engines"].get(engine, {})
    prefix = str(table.get("prefix") or "")
    return (tuple(table.get("modules") or ()) if prefix else ()), prefix


def _in_range(row: dict[str, Any], release: Version) -> bool:
    since, until = row.get("since"), row.get("until")
    return (since is None or release >= Version(since)) and (
        until is None or release < Version(until))


def engine_metrics(engine: str, release: str) -> EngineMetrics:
    """The metrics ``engine`` ``release`` exposes; raises :class:`UnknownRelease`."""
    table = load_table()["engines"]
    if engine not in table:
        raise UnknownRelease(engine, release, [])
    spec = table[engine]
    if release not in spec["releases"]:
        raise UnknownRelease(engine, release, list(spec["releases"]))
    version = Version(release)
    roles: dict[str, Metric] = {}
    for role in ROLES:
        rows = [r for r in spec["roles"][role] if _in_range(r, version)]
        if len(rows) != 1:  # the data is checked by tests; this guards hand edits
            raise ValueError(f"{engine} metrics.yaml: {release} {role}: {len(rows)} rows match")
        row = rows[0]
        roles[role] = Metric(role=role, name=row["name"], type=row["type"],
                             labels=tuple(row["labels"]), unit=row["unit"], src=row["src"],
                             unverified=bool(row.get("unverified", False)))
    return EngineMetrics(engine=engine, release=release, metrics_path=spec["metrics_path"],
                         enable_flag=spec.get("enable_flag"), roles=roles)
