"""Assemble the monitoring files of one profile and write them atomically.

All access to the resolved profile goes through :func:`monitored` (one adapter over the
:class:`~dockergen.pipeline.Resolution`, so the resolved model can be re-pointed without
touching the generators).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml

from dockergen.errors import Location, Problem, ProfileError, Severity
from dockergen.files import atomic
from dockergen.files.owned import holds_only
from dockergen.input.profile import Observe
from dockergen.outputs import kube
from dockergen.outputs.observe.metrics import EngineMetrics, UnknownRelease, engine_metrics
from dockergen.outputs.observe.rules import (
    ALERT_FILE,
    RECORDING_FILE,
    Settings,
    alert_file,
    k8s_monitor,
    k8s_prometheus_rule,
    recording_file,
    recording_rules,
    scrape_config,
)

if TYPE_CHECKING:
    from dockergen.pipeline import Resolution

Format = Literal["prometheus", "k8s"]
MANIFEST = "dockergen-observe.json"
DASHBOARD_FILE = "dashboard.json"


@dataclass(frozen=True)
class Monitored:
    """The serving profile being monitored, as far as observe needs it (the one adapter over
    ``Resolved``)."""

    source: str  # profile path, for messages
    name: str
    engine: str
    release: str
    gpu_targets: tuple[str, ...]
    port: int
    cmd: tuple[str, ...]
    profile_hash: str
    observe: Observe
    # where the profile writes the fields observe's problems name (FILE:LINE:COL); a field
    # not here is named by the profile file alone
    at: Mapping[str, Location] = field(default_factory=dict)

    def where(self, field_path: str) -> Location:
        """The location of a field, for a problem about it."""
        return self.at.get(field_path) or Location(self.source)


# the fields observe's problems are about
_FIELDS = ("engine.version", "serving.extra_args", "observe.rate_window")


def monitored(res: Resolution) -> Monitored:
    """Keep only what the monitoring depends on of a resolved profile (``targets`` below
    are always Prometheus's: the addresses it scrapes)."""
    r = res.resolved
    p = r.profile
    return Monitored(
        source=source_of(res.path), name=p.name,
        engine=p.engine.name, release=p.engine.version,
        gpu_targets=tuple(t.given for t in r.gpus), port=p.serving.port,
        cmd=r.runtime.cmd, profile_hash=r.profile_hash, observe=p.observe,
        at={f: res.at(*f.split(".")) for f in _FIELDS})


def settings_for(t: Monitored, targets: tuple[str, ...] = ()) -> Settings:
    """The rule settings: the profile's ``observe:`` section with its derived defaults."""
    o = t.observe
    return Settings(
        profile=t.name, job=o.job or f"dockergen-{t.name}",
        targets=targets or tuple(o.targets) or (f"localhost:{t.port}",),
        scrape_interval=o.scrape_interval, rate_window=o.rate_window,
        e2e_p99_budget_s=o.e2e_p99_budget_s,
        kv_cache_usage_threshold=o.kv_cache_usage_threshold, latency_for=o.latency_for,
        kv_cache_for=o.kv_cache_for, down_for=o.down_for, stalled_for=o.stalled_for,
        runbook_url=o.runbook_url)


def _seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    unit = "ms" if duration.endswith("ms") else duration[-1]
    return float(duration[: -len(unit)]) * units[unit]


def _metrics_for(t: Monitored) -> tuple[EngineMetrics, list[Problem]]:
    try:
        m = engine_metrics(t.engine, t.release)
    except UnknownRelease as exc:
        known = ", ".join(exc.known) or "none"
        raise ProfileError([Problem(
            t.where("engine.version"), "engine.version",
            f"no metrics knowledge for {t.engine} {t.release} (releases read: {known})",
            "use a listed release, or read this one's wheel with scripts/extract_metrics.py "
            f"and add it to the {t.engine} metrics.yaml (its folder in "
            "dockergen/parts/engines/)")]) from None
    warnings: list[Problem] = []
    if m.unverified:
        names = ", ".join(x.name for x in m.unverified)
        srcs = "; ".join(sorted({x.src for x in m.unverified}))
        warnings.append(Problem(
            t.where("engine.version"), "engine.version",
            f"{m.engine} {m.release}: metric names {names} were not read from a released "
            f"artefact ({srcs})",
            f"check them against the server's {m.metrics_path} before relying on the alerts",
            severity=Severity.WARNING))
    if m.enable_flag and m.enable_flag not in t.cmd:
        warnings.append(Problem(
            t.where("serving.extra_args"), "serving.extra_args",
            f"{m.engine} exposes no metrics without {m.enable_flag}; the rules would stay empty",
            f"add {m.enable_flag} to serving.extra_args", severity=Severity.WARNING))
    return m, warnings


def settings_problems(observe: Observe, where: Location) -> list[Problem]:
    """What ``observe`` refuses in a profile's ``observe:`` section (``where``: the
    location of its rate window); ``validate`` runs it too, so that it never passes a
    profile ``observe`` then refuses."""
    if _seconds(observe.rate_window) < 4 * _seconds(observe.scrape_interval):
        return [Problem(
            where, "observe.rate_window",
            f"{observe.rate_window} is shorter than 4 scrape intervals "
            f"({observe.scrape_interval}); rate() needs at least two samples in the window and "
            "misses scrapes otherwise",
            f"set observe.rate_window to at least {4 * _seconds(observe.scrape_interval):g}s")]
    return []


def source_of(path: Path) -> str:
    """How messages name a profile file: as given, or its name when the path is absolute."""
    return str(path) if not path.is_absolute() else path.name


def _yaml(data: Any, header: str) -> bytes:
    body: str = yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=100,
                          allow_unicode=True)
    return (header + body).encode()


@dataclass
class ObserveResult:
    """The generated files and the warnings about them."""

    name: str
    files: dict[str, bytes]
    warnings: list[Problem] = field(default_factory=list)
    metrics: EngineMetrics | None = None


def generate(t: Monitored, fmt: Format = "prometheus", targets: tuple[str, ...] = (),
             monitor: str = "PodMonitor", port_name: str = kube.SERVER_PORT_NAME,
             namespace: str = kube.DEFAULT_NAMESPACE) -> ObserveResult:
    """Every monitoring file of a monitored profile, by relative path (sorted, deterministic)."""
    from dockergen.outputs.observe.dashboard import dashboard_json  # the Grafana SDK: lazily

    m, warnings = _metrics_for(t)
    s = settings_for(t, targets)
    problems = settings_problems(t.observe, t.where("observe.rate_window"))
    if problems:
        raise ProfileError(problems)
    header = (f"# Generated by dockergen observe from profile {t.name} "
              f"({t.engine} {t.release}); do not edit, regenerate.\n")
    rules = recording_rules(m, s)
    files: dict[str, bytes] = {
        DASHBOARD_FILE: dashboard_json(s, rules, t.engine, t.release, t.gpu_targets).encode(),
    }
    if fmt == "k8s":
        files[f"{monitor.lower()}.yaml"] = _yaml(
            k8s_monitor(m, s, monitor, port_name, namespace), header)
        files["prometheusrule.yaml"] = _yaml(k8s_prometheus_rule(m, s, namespace), header)
    else:
        files["prometheus.yml"] = _yaml(scrape_config(m, s), header)
        files[RECORDING_FILE] = _yaml(recording_file(m, s), header)
        files[ALERT_FILE] = _yaml(alert_file(m, s), header)
    manifest = {
        "profile": t.name,
        "profile_hash": t.profile_hash,
        "engine": t.engine,
        "release": t.release,
        "format": fmt,
        "job": s.job,
        "metrics": {role: {"name": x.name, "type": x.type, "src": x.src,
                           **({"unverified": True} if x.unverified else {})}
                    for role, x in sorted(m.roles.items())},
        "files": sorted(files),
    }
    files[MANIFEST] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    # Only observe's own warnings: the profile's build warnings are render's to report.
    return ObserveResult(t.name, dict(sorted(files.items())), warnings, m)


def observe(res: Resolution, fmt: Format = "prometheus", targets: tuple[str, ...] = (),
            monitor: str = "PodMonitor", port_name: str = kube.SERVER_PORT_NAME,
            namespace: str = kube.DEFAULT_NAMESPACE) -> ObserveResult:
    """The monitoring files of a resolved profile, in memory (``namespace``: the one
    ``deploy --format k8s`` deploys into, where the Kubernetes objects live and select)."""
    return generate(monitored(res), fmt, targets, monitor, port_name, namespace)


def write_output(out_dir: Path, files: dict[str, bytes]) -> None:
    """Write one profile's monitoring files as one change (:mod:`dockergen.files.atomic`): an
    existing ``out_dir`` is replaced only while it holds just what ``observe`` wrote."""
    atomic.write_folder(out_dir, files, kind="observe", legacy=_observe_legacy)


def write_outputs(parent: Path, outputs: dict[str, dict[str, bytes]]) -> None:
    """``observe --all -o``: every profile's folder ``parent/<name>/``, all at once."""
    atomic.write_folders(parent, outputs, kind="observe", legacy=_observe_legacy)


def _observe_legacy(folder: Path, names: set[str]) -> bool:
    """A folder observe wrote before manifests of kind existed: its own manifest and no
    file but the ones this run writes (a file added since was deleted with it)."""
    return (folder / MANIFEST).is_file() and holds_only(folder, names)
