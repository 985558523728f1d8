"""Which Prometheus metrics an engine release exposes: typed access to ``data/metrics.yaml``.

The rows were read from the released wheels (``scripts/extract_metrics.py``; the checked-in
``data/metrics_snapshot.json`` is what it extracted) and carry their ``src:``. A profile's
engine and release pick the names; a release nobody read is an error, never a guess, since
a wrong name gives a dashboard that silently shows nothing.

May import: nothing of dockergen (data files only).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from packaging.version import Version

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
METRICS_FILE = DATA_DIR / "metrics.yaml"
SNAPSHOT_FILE = DATA_DIR / "metrics_snapshot.json"

# What the recording rules need from every engine (see metrics.yaml).
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
    """The parsed ``metrics.yaml`` (cached)."""
    data: dict[str, Any] = yaml.safe_load(METRICS_FILE.read_text(encoding="utf-8"))
    return data


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
            raise ValueError(f"metrics.yaml: {engine} {release} {role}: {len(rows)} rows match")
        row = rows[0]
        roles[role] = Metric(role=role, name=row["name"], type=row["type"],
                             labels=tuple(row["labels"]), unit=row["unit"], src=row["src"],
                             unverified=bool(row.get("unverified", False)))
    return EngineMetrics(engine=engine, release=release, metrics_path=spec["metrics_path"],
                         enable_flag=spec.get("enable_flag"), roles=roles)
