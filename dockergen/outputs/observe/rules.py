"""Prometheus scrape config, recording rules and alert rules for one profile.

Python decides every expression here from the engine release's metric names
(:mod:`dockergen.outputs.observe.metrics`); the YAML emitter only formats. Recording rules give
engine-independent names (``job:dockergen_...``) so the dashboard and the alerts read the
same series whatever the engine, and only these rules know the engine's own names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dockergen.outputs import kube
from dockergen.outputs.observe.metrics import EngineMetrics

QUANTILES = (("p50", "0.5"), ("p90", "0.9"), ("p99", "0.99"))
LATENCIES = (  # role, recorded metric stem, what it is
    ("ttft", "ttft_seconds", "time to first token"),
    ("itl", "itl_seconds", "inter-token latency"),
    ("e2e", "e2e_latency_seconds", "end-to-end request latency"),
)


@dataclass(frozen=True)
class Settings:
    """Everything the rules depend on besides the metric names (from ``observe:``)."""

    profile: str
    job: str
    targets: tuple[str, ...]
    scrape_interval: str
    rate_window: str
    e2e_p99_budget_s: float
    kv_cache_usage_threshold: float
    latency_for: str
    kv_cache_for: str
    down_for: str
    stalled_for: str
    runbook_url: str | None


@dataclass(frozen=True)
class Rule:
    """One recording rule: the recorded name, its PromQL and what it means."""

    record: str
    expr: str
    help: str
    unit: str  # Grafana unit id of the recorded value


def recording_rules(m: EngineMetrics, s: Settings) -> list[Rule]:
    """The recording rules, in a fixed order (throughput, latency, queue, KV cache)."""
    sel = f'{{job="{s.job}"}}'
    w = s.rate_window
    r = m.roles
    out = [
        Rule("job:dockergen_generation_tokens:rate",
             f"sum by (job) (rate({r['generation_tokens'].sample()}{sel}[{w}]))",
             "generated (output) tokens per second, all replicas", "tokens/s"),
        Rule("job:dockergen_prompt_tokens:rate",
             f"sum by (job) (rate({r['prompt_tokens'].sample()}{sel}[{w}]))",
             "prompt (input) tokens processed per second, all replicas", "tokens/s"),
        Rule("job:dockergen_requests:rate",
             f"sum by (job) (rate({r['requests'].sample()}{sel}[{w}]))",
             "finished requests per second, all replicas", "reqps"),
    ]
    for role, stem, what in LATENCIES:
        bucket = r[role].sample("_bucket")
        for tag, q in QUANTILES:
            out.append(Rule(
                f"job:dockergen_{stem}:{tag}",
                f"histogram_quantile({q}, sum by (job, le) (rate({bucket}{sel}[{w}])))",
                f"{tag.upper()} {what} over {w}, all replicas", "s"))
    out += [
        Rule("instance:dockergen_requests_waiting:sum",
             f"sum by (job, instance) ({r['requests_waiting'].sample()}{sel})",
             "requests waiting in the queue, per replica", "short"),
        Rule("instance:dockergen_requests_running:sum",
             f"sum by (job, instance) ({r['requests_running'].sample()}{sel})",
             "requests being served, per replica", "short"),
        # max, not sum: a replica with several engines (data parallel) is as full as its
        # fullest engine.
        Rule("instance:dockergen_kv_cache_usage:ratio",
             f"max by (job, instance) ({r['kv_cache_usage'].sample()}{sel})",
             "fraction of the KV cache in use (1 = full), per replica", "percentunit"),
    ]
    return out


def _annotations(s: Settings, alert: str, summary: str, runbook: str) -> dict[str, str]:
    notes = {"summary": summary, "runbook": runbook}
    if s.runbook_url:
        notes["runbook_url"] = f"{s.runbook_url}#{alert.lower()}"
    return notes


def alert_rules(m: EngineMetrics, s: Settings) -> list[dict[str, Any]]:
    """The alert rules; every ``for:`` and threshold comes from the profile's ``observe:``."""
    sel = f'{{job="{s.job}"}}'
    gen = m.roles["generation_tokens"].sample()
    budget = f"{s.e2e_p99_budget_s:g}"
    threshold = f"{s.kv_cache_usage_threshold:g}"
    labels = {"profile": s.profile}

    def alert(name: str, expr: str, for_: str, severity: str, summary: str,
              runbook: str) -> dict[str, Any]:
        return {"alert": name, "expr": expr, "for": for_,
                "labels": {**labels, "severity": severity},
                "annotations": _annotations(s, name, summary, runbook)}

    return [
        alert("DockergenE2ELatencyP99High",
              f"job:dockergen_e2e_latency_seconds:p99{sel} > {budget}", s.latency_for, "warning",
              f"P99 end-to-end latency of {{{{ $labels.job }}}} is {{{{ $value | "
              f"humanizeDuration }}}}, above the {budget}s budget",
              "If requests wait (queue panel), add replicas or lower serving.max_num_seqs; "
              "if not, look for long generations (output tokens/s) or a slow GPU."),
        alert("DockergenKVCacheNearFull",
              f"instance:dockergen_kv_cache_usage:ratio{sel} > {threshold} and on (job, "
              f"instance) instance:dockergen_requests_waiting:sum{sel} > 0",
              s.kv_cache_for, "warning",
              "KV cache of {{ $labels.instance }} is {{ $value | humanizePercentage }} "
              "full while requests wait",
              "Requests queue for KV-cache blocks: add replicas, lower serving.max_model_len "
              "or max_num_seqs, or use an fp8 KV cache (quantization.kv_cache: fp8)."),
        alert("DockergenServerDown", f"up{sel} == 0", s.down_for, "critical",
              "{{ $labels.instance }} of {{ $labels.job }} does not answer its metrics scrape",
              "Check the container: docker logs / kubectl logs; model loading takes up to "
              "serving.health_start_period_s; look for OOM kills and GPU errors (nvidia-smi)."),
        alert("DockergenServerAbsent", f'absent(up{sel})', s.down_for, "critical",
              f"No scrape target of job {s.job} exists",
              "Prometheus has no target for this job: check the scrape config, the "
              "PodMonitor selector or service discovery."),
        alert("DockergenNoTokensGenerated",
              f"sum by (job, instance) (rate({gen}{sel}[{s.rate_window}])) == 0 and on (job, "
              f"instance) instance:dockergen_requests_running:sum{sel} > 0",
              s.stalled_for, "critical",
              "{{ $labels.instance }} has running requests but generates no tokens",
              "The engine is stuck: check its log for CUDA/NCCL errors or a hung worker, "
              "then restart the replica."),
    ]


def recording_file(m: EngineMetrics, s: Settings) -> dict[str, Any]:
    """The recording-rules file as data (``groups:``)."""
    return {"groups": [{
        "name": f"dockergen-{s.profile}-recording",
        "interval": s.scrape_interval,
        "rules": [{"record": r.record, "expr": r.expr} for r in recording_rules(m, s)],
    }]}


def alert_file(m: EngineMetrics, s: Settings) -> dict[str, Any]:
    """The alert-rules file as data (``groups:``)."""
    return {"groups": [{
        "name": f"dockergen-{s.profile}-alerts",
        "interval": s.scrape_interval,
        "rules": alert_rules(m, s),
    }]}


RECORDING_FILE = "recording-rules.yaml"
ALERT_FILE = "alert-rules.yaml"


def scrape_config(m: EngineMetrics, s: Settings) -> dict[str, Any]:
    """A complete ``prometheus.yml``: scrape job for the server plus both rule files."""
    return {
        "global": {"scrape_interval": s.scrape_interval,
                   "evaluation_interval": s.scrape_interval},
        "rule_files": [RECORDING_FILE, ALERT_FILE],
        "scrape_configs": [{
            "job_name": s.job,
            "metrics_path": m.metrics_path,
            "scrape_interval": s.scrape_interval,
            "static_configs": [{"targets": list(s.targets),
                                "labels": {"profile": s.profile}}],
        }],
    }


def k8s_monitor(m: EngineMetrics, s: Settings, kind: str, port: str,
                namespace: str) -> dict[str, Any]:
    """A Prometheus Operator PodMonitor or ServiceMonitor for the profile's pods.

    It lives in ``namespace``, the one ``deploy --format k8s`` deploys into, and selects
    there the labels deploy gives the pods and the Service (:mod:`dockergen.outputs.kube`): a
    monitor selects in its own namespace unless its ``namespaceSelector`` says otherwise
    (Prometheus Operator API, PodMonitorSpec/ServiceMonitorSpec ``namespaceSelector``), so
    the namespace is written in both places. The endpoint port is ``port``; the job label
    is set to the same job name the rules select on.
    """
    endpoint = {
        "port": port,
        "path": m.metrics_path,
        "interval": s.scrape_interval,
        "relabelings": [
            {"action": "replace", "targetLabel": "job", "replacement": s.job},
            {"action": "replace", "targetLabel": "profile", "replacement": s.profile},
        ],
    }
    endpoints_key = "podMetricsEndpoints" if kind == "PodMonitor" else "endpoints"
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": kind,
        "metadata": {"name": s.job, "namespace": namespace, "labels": kube.labels(s.profile)},
        "spec": {
            "namespaceSelector": {"matchNames": [namespace]},
            "selector": {"matchLabels": kube.selector(s.profile)},
            endpoints_key: [endpoint],
        },
    }


def k8s_prometheus_rule(m: EngineMetrics, s: Settings, namespace: str) -> dict[str, Any]:
    """Both rule groups as one Prometheus Operator PrometheusRule, in ``namespace`` beside
    the workload it watches."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": s.job, "namespace": namespace, "labels": kube.labels(s.profile)},
        "spec": {"groups": recording_file(m, s)["groups"] + alert_file(m, s)["groups"]},
    }
