"""The Grafana dashboard of a profile, built with Grafana's typed SDK (grafana-foundation-sdk).

One row per concern (throughput, latency, queue, KV cache); every panel queries only the
recording rules of :mod:`dockergen.outputs.observe.rules`, so the dashboard is the same for every
engine and release and only the rules know the engine's metric names. The SDK is imported
here, lazily from the ``observe`` command, so other commands do not pay for it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from grafana_foundation_sdk.builders import dashboard as gdash
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DataSourceRef,
    Panel,
    Threshold,
    ThresholdsMode,
    VariableHide,
    VariableOption,
    VariableRefresh,
    VariableSort,
)

from dockergen.outputs.observe.rules import LATENCIES, QUANTILES, Rule, Settings

DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")


def _uid(profile: str) -> str:
    # Grafana uids are at most 40 characters; profile names may be 63.
    uid = f"dockergen-{profile}"
    return uid if len(uid) <= 40 else "dockergen-" + hashlib.sha256(
        profile.encode()).hexdigest()[:16]


def _query(expr: str, legend: str, ref: str) -> prometheus.Dataquery:
    return (prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref)
            .range().datasource(DATASOURCE))


def _series(rule: Rule, legend: str, ref: str, per_instance: bool) -> prometheus.Dataquery:
    selector = '{job="$job", instance=~"$instance"}' if per_instance else '{job="$job"}'
    return _query(rule.record + selector, legend, ref)


def _panel(title: str, unit: str, queries: list[prometheus.Dataquery],
           description: str) -> timeseries.Panel:
    """A time-series panel a third of the row wide, drawing ``queries``."""
    p = (timeseries.Panel().title(title).description(description).unit(unit)
         .datasource(DATASOURCE).height(8).span(8))
    for q in queries:
        p = p.with_target(q)
    return p


def _red_above(value: float) -> gdash.ThresholdsConfig:
    """Green up to ``value``, red from it on."""
    return gdash.ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps([
        Threshold(value=None, color="green"),
        Threshold(value=value, color="red")])


def _throughput_panels(by_name: dict[str, Rule]) -> list[timeseries.Panel]:
    return [
        _panel("Generated tokens/s", "short",
               [_series(by_name["job:dockergen_generation_tokens:rate"], "output", "A", False)],
               by_name["job:dockergen_generation_tokens:rate"].help),
        _panel("Prompt tokens/s", "short",
               [_series(by_name["job:dockergen_prompt_tokens:rate"], "prompt", "A", False)],
               by_name["job:dockergen_prompt_tokens:rate"].help),
        _panel("Requests/s", "reqps",
               [_series(by_name["job:dockergen_requests:rate"], "finished", "A", False)],
               by_name["job:dockergen_requests:rate"].help),
    ]


def _latency_panels(s: Settings, by_name: dict[str, Rule]) -> list[timeseries.Panel]:
    latency = []
    for _role, stem, what in LATENCIES:
        queries = [_series(by_name[f"job:dockergen_{stem}:{tag}"], tag.upper(), chr(65 + i),
                           False) for i, (tag, _q) in enumerate(QUANTILES)]
        latency.append(_panel(what[0].upper() + what[1:], "s", queries,
                              f"P50/P90/P99 {what} from the engine's histogram"))
    latency[-1] = latency[-1].thresholds(_red_above(s.e2e_p99_budget_s))
    return latency


def _queue_panels(by_name: dict[str, Rule]) -> list[timeseries.Panel]:
    return [
        _panel("Requests waiting", "short",
               [_series(by_name["instance:dockergen_requests_waiting:sum"], "{{instance}}",
                        "A", True)],
               by_name["instance:dockergen_requests_waiting:sum"].help),
        _panel("Requests running", "short",
               [_series(by_name["instance:dockergen_requests_running:sum"], "{{instance}}",
                        "A", True)],
               by_name["instance:dockergen_requests_running:sum"].help),
    ]


def _kv_cache_panels(s: Settings, by_name: dict[str, Rule]) -> list[Builder[Panel]]:
    kv_rule = by_name["instance:dockergen_kv_cache_usage:ratio"]
    return [
        _panel("KV-cache usage", "percentunit",
               [_series(kv_rule, "{{instance}}", "A", True)], kv_rule.help)
        .min(0).max(1).thresholds(_red_above(s.kv_cache_usage_threshold)),
        stat.Panel().title("KV-cache usage now (fullest replica)").unit("percentunit")
        .description(kv_rule.help).datasource(DATASOURCE).height(8).span(8)
        .with_target(_query(f'max({kv_rule.record}{{job="$job", instance=~"$instance"}})',
                            "fullest", "A")),
    ]


def _dashboard_without_panels(s: Settings, engine: str, release: str,
                              gpus: str) -> gdash.Dashboard:
    """The dashboard's settings and variables, before any row or panel."""
    return (
        gdash.Dashboard(f"dockergen {s.profile}: {engine} {release} on {gpus}")
        .uid(_uid(s.profile))
        .description(f"Serving metrics of dockergen profile {s.profile} ({engine} {release}, "
                     f"GPUs {gpus}); panels read the recording rules of recording-rules.yaml.")
        .tags(["dockergen", engine, s.profile])
        .editable()
        .tooltip(DashboardCursorSync.CROSSHAIR)
        .refresh("30s")
        .time("now-1h", "now")
        .timezone("browser")
        .with_variable(gdash.DatasourceVariable("datasource").label("Data source")
                       .type("prometheus"))
        .with_variable(
            gdash.QueryVariable("job").label("Job").datasource(DATASOURCE)
            .query("label_values(job:dockergen_requests:rate, job)")
            .current(VariableOption(selected=True, text=s.job, value=s.job))
            .refresh(VariableRefresh.ON_DASHBOARD_LOAD).sort(VariableSort.ALPHABETICAL_ASC))
        .with_variable(
            gdash.QueryVariable("instance").label("Replica").datasource(DATASOURCE)
            .query('label_values(instance:dockergen_requests_running:sum{job="$job"}, '
                   'instance)')
            .multi(True).include_all(True).all_value(".*")
            .current(VariableOption(selected=True, text="All", value="$__all"))
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(VariableSort.ALPHABETICAL_ASC))
        .with_variable(gdash.ConstantVariable("profile").value(s.profile))
        .with_variable(gdash.ConstantVariable("engine_release").value(f"{engine} {release}"))
        .with_variable(gdash.ConstantVariable("gpu_targets").value(gpus))
    )


def build_dashboard(s: Settings, rules: list[Rule], engine: str, release: str,
                    gpu_targets: tuple[str, ...]) -> dict[str, Any]:
    """The dashboard model as plain JSON data (deterministic)."""
    by_name = {r.record: r for r in rules}
    builder = _dashboard_without_panels(s, engine, release, ",".join(gpu_targets))
    for row_title, panels in (("Throughput", _throughput_panels(by_name)),
                              ("Latency", _latency_panels(s, by_name)),
                              ("Queue", _queue_panels(by_name)),
                              ("KV cache", _kv_cache_panels(s, by_name))):
        builder = builder.with_row(gdash.Row(row_title))
        for p in panels:
            builder = builder.with_panel(p)
    model = builder.build()
    data: dict[str, Any] = json.loads(json.dumps(model, cls=JSONEncoder))
    # Unique panel ids in layout order: Grafana links and alerts refer to panels by id.
    for i, item in enumerate(data["panels"], start=1):
        item["id"] = i
    # Constant variables are hidden by default; show them so the profile, engine release
    # and GPU targets are visible next to the title.
    for var in data["templating"]["list"]:
        if var["type"] == "constant":
            var["hide"] = int(VariableHide.DONT_HIDE)
    return data


def dashboard_json(s: Settings, rules: list[Rule], engine: str, release: str,
                   gpu_targets: tuple[str, ...]) -> str:
    """The dashboard as JSON text: sorted keys, no timestamps (deterministic)."""
    return json.dumps(build_dashboard(s, rules, engine, release, gpu_targets), indent=2,
                      sort_keys=True) + "\n"
