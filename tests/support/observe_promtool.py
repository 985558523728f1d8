"""Build a ``promtool test rules`` file for generated rules: synthetic series per engine.

The input series use the engine release's own metric names (from the generated manifest);
every expected value below is worked out by hand from the series, not read back from the
rules: a counter rising by 600 per 1m sample has rate 10/s; a histogram whose observations
all land in the (1, 2.5] bucket has quantile q = 1 + 1.5 q (linear interpolation).
"""

from __future__ import annotations

from typing import Any

INSTANCE = "replica-0:8000"


def _labels(job: str, extra: dict[str, str] | None = None, **more: str) -> str:
    items = {"job": job, "instance": INSTANCE, **(extra or {}), **more}
    return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(items.items())) + "}"


def _hist(name: str, job: str, buckets: dict[str, str], labels: dict[str, str]) -> list[dict]:
    return [{"series": f"{name}_bucket" + _labels(job, labels, le=le), "values": values}
            for le, values in buckets.items()]


def build_tests(manifest: dict[str, Any], alerts: list[dict[str, Any]],
                rule_files: list[str]) -> dict[str, Any]:
    """A promtool unit-test document covering every recording and alert rule."""
    job = manifest["job"]
    profile = manifest["profile"]
    m = {role: row["name"] for role, row in manifest["metrics"].items()}
    types = {role: row["type"] for role, row in manifest["metrics"].items()}

    def sample(role: str) -> str:
        return m[role] + "_total" if types[role] == "counter" else m[role]

    # Engine label sets as the real servers attach them (vLLM: model_name + engine index).
    lab = {"model_name": "m"}
    if manifest["engine"] == "vllm":
        lab["engine"] = "0"
    runbook = {a["alert"]: a["annotations"]["runbook"] for a in alerts}

    def series(role: str, values: str, **extra: str) -> dict[str, str]:
        return {"series": sample(role) + _labels(job, {**lab, **extra}), "values": values}

    healthy_hist = {"0.5": "0x20", "1": "0x20", "2.5": "0+60x20", "+Inf": "0+60x20"}
    healthy = [
        series("generation_tokens", "0+600x20"),
        series("prompt_tokens", "0+1200x20"),
        series("requests", "0+60x20", **({"finished_reason": "stop"}
                                         if manifest["engine"] != "sglang" else {})),
        series("requests_waiting", "3x20"),
        series("requests_running", "5x20"),
        series("kv_cache_usage", "0.5x20"),
        {"series": "up" + _labels(job), "values": "1x20"},
    ]
    for role in ("ttft", "itl", "e2e"):
        healthy += _hist(m[role], job, healthy_hist, lab)

    def rec(name: str, value: float, per_instance: bool = False) -> dict[str, Any]:
        labels = _labels(job) if per_instance else "{" + f'job="{job}"' + "}"
        return {"expr": name, "eval_time": "10m",
                "exp_samples": [{"labels": name + labels, "value": value}]}

    recording_checks = [
        rec("job:dockergen_generation_tokens:rate", 10),
        rec("job:dockergen_prompt_tokens:rate", 20),
        rec("job:dockergen_requests:rate", 1),
        rec("instance:dockergen_requests_waiting:sum", 3, True),
        rec("instance:dockergen_requests_running:sum", 5, True),
        rec("instance:dockergen_kv_cache_usage:ratio", 0.5, True),
    ]
    for stem in ("ttft_seconds", "itl_seconds", "e2e_latency_seconds"):
        for tag, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            recording_checks.append(rec(f"job:dockergen_{stem}:{tag}", 1 + 1.5 * q))

    def fired(alert: str, summary: str, severity: str, **labels: str) -> dict[str, Any]:
        return {"exp_labels": {"severity": severity, "profile": profile, "job": job, **labels},
                "exp_annotations": {"summary": summary, "runbook": runbook[alert]}}

    slow_hist = {"1": "0x20", "30": "0x20", "60": "0+60x20", "+Inf": "0+60x20"}
    tests: list[dict[str, Any]] = [
        {   # healthy server: every recording rule, and no alert fires
            "name": "recording rules over a healthy server",
            "interval": "1m", "input_series": healthy,
            "promql_expr_test": recording_checks,
            "alert_rule_test": [{"eval_time": "20m", "alertname": a["alert"], "exp_alerts": []}
                                for a in alerts],
        },
        {   # P99 e2e in (30, 60]: 30 + 30 * 0.99 = 59.7 s > 30 s budget, for 10m
            "name": "latency budget breached",
            "interval": "1m",
            "input_series": _hist(m["e2e"], job, slow_hist, lab),
            "alert_rule_test": [
                {"eval_time": "8m", "alertname": "DockergenE2ELatencyP99High", "exp_alerts": []},
                {"eval_time": "15m", "alertname": "DockergenE2ELatencyP99High", "exp_alerts": [
                    fired("DockergenE2ELatencyP99High",
                          f"P99 end-to-end latency of {job} is 59.7s, above the 30s budget",
                          "warning")]},
            ],
        },
        {   # KV cache 97 % (> 0.95) with requests waiting on one replica; another replica
            # is as full but nothing waits there: only the first fires
            "name": "KV cache near full while requests wait",
            "interval": "1m",
            "input_series": [
                series("kv_cache_usage", "0.97x20"),
                series("requests_waiting", "2x20"),
                {"series": sample("kv_cache_usage") + _labels(job, lab, instance="replica-1:8000"),
                 "values": "0.97x20"},
                {"series": sample("requests_waiting") + _labels(
                    job, lab, instance="replica-1:8000"), "values": "0x20"},
            ],
            "alert_rule_test": [
                {"eval_time": "3m", "alertname": "DockergenKVCacheNearFull", "exp_alerts": []},
                {"eval_time": "10m", "alertname": "DockergenKVCacheNearFull", "exp_alerts": [
                    fired("DockergenKVCacheNearFull",
                          f"KV cache of {INSTANCE} is 97% full while requests wait",
                          "warning", instance=INSTANCE)]},
            ],
        },
        {   # the target answers no scrape
            "name": "server down",
            "interval": "1m",
            "input_series": [{"series": "up" + _labels(job), "values": "0x20"}],
            "alert_rule_test": [
                {"eval_time": "1m", "alertname": "DockergenServerDown", "exp_alerts": []},
                {"eval_time": "5m", "alertname": "DockergenServerDown", "exp_alerts": [
                    fired("DockergenServerDown",
                          f"{INSTANCE} of {job} does not answer its metrics scrape",
                          "critical", instance=INSTANCE)]},
                {"eval_time": "5m", "alertname": "DockergenServerAbsent", "exp_alerts": []},
            ],
        },
        {   # no target of this job at all (only another job's)
            "name": "server absent",
            "interval": "1m",
            "input_series": [{"series": 'up{job="other", instance="x:1"}', "values": "1x20"}],
            "alert_rule_test": [
                {"eval_time": "1m", "alertname": "DockergenServerAbsent", "exp_alerts": []},
                {"eval_time": "5m", "alertname": "DockergenServerAbsent", "exp_alerts": [
                    {"exp_labels": {"severity": "critical", "profile": profile, "job": job},
                     "exp_annotations": {
                         "summary": f"No scrape target of job {job} exists",
                         "runbook": runbook["DockergenServerAbsent"]}}]},
            ],
        },
        {   # requests run, but the token counter is flat
            "name": "no tokens generated while requests run",
            "interval": "1m",
            "input_series": [series("generation_tokens", "100x20"),
                             series("requests_running", "4x20")],
            "alert_rule_test": [
                {"eval_time": "4m", "alertname": "DockergenNoTokensGenerated", "exp_alerts": []},
                {"eval_time": "15m", "alertname": "DockergenNoTokensGenerated", "exp_alerts": [
                    fired("DockergenNoTokensGenerated",
                          f"{INSTANCE} has running requests but generates no tokens",
                          "critical", instance=INSTANCE)]},
            ],
        },
    ]
    return {"rule_files": rule_files, "evaluation_interval": "1m", "tests": tests}


def covered(doc: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(recording rules checked with an expected value, alerts checked firing)."""
    records, alerts = set(), set()
    for test in doc["tests"]:
        for check in test.get("promql_expr_test", []):
            if check["exp_samples"]:
                records.add(check["expr"])
        for check in test.get("alert_rule_test", []):
            if check["exp_alerts"]:
                alerts.add(check["alertname"])
    return records, alerts
