"""dockergen observe: generated files pass the real promtool, rules are unit-tested over
synthetic series, the dashboard only queries recording rules, the release picks the names."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dockergen.errors import OutputError, ProfileError
from dockergen.input.profile import Observe
from dockergen.outputs.observe.generate import Monitored, generate, write_output
from tests.conftest import EXAMPLES, PROFILES, ROOT, run_cli, shipped_names
from tests.support.observe_promtool import build_tests, covered

RECORDS = {
    "job:dockergen_generation_tokens:rate", "job:dockergen_prompt_tokens:rate",
    "job:dockergen_requests:rate", "instance:dockergen_requests_waiting:sum",
    "instance:dockergen_requests_running:sum", "instance:dockergen_kv_cache_usage:ratio",
    *(f"job:dockergen_{stem}:{q}" for stem in ("ttft_seconds", "itl_seconds",
                                               "e2e_latency_seconds")
      for q in ("p50", "p90", "p99")),
}
ALERTS = {"DockergenE2ELatencyP99High", "DockergenKVCacheNearFull", "DockergenServerDown",
          "DockergenServerAbsent", "DockergenNoTokensGenerated"}


@pytest.fixture(scope="session")
def promtool() -> str:
    """Debian's promtool (tests/infra/provision.sh installs it); missing = failure."""
    found = shutil.which("promtool")
    if not found:
        pytest.fail("promtool is not installed: apt-get install prometheus (provision.sh)")
    return found


def sglang_target(release: str = "0.5.23", flags: tuple[str, ...] = ("--enable-metrics",)
                  ) -> Monitored:
    """An SGLang server target built directly (releases/commands no profile can have)."""
    return Monitored(source="sglang.yaml", name="h100-sglang", engine="sglang", release=release,
                  gpu_targets=("h100",), port=30000,
                  cmd=("--model-path", "/models/m", *flags), profile_hash="sha256:0",
                  observe=Observe())


def observe_dir(tmp_path: Path, *args: str) -> Path:
    out = tmp_path / "out"
    run = run_cli("observe", *args, "-o", str(out), "-q")
    assert run.rc == 0, run.err
    return out


def targets_under_test() -> list[str]:
    names = shipped_names()
    assert {"h100-fp8", "h100-sglang-fp8", "h100-trtllm-fp8"} <= set(names)  # every engine
    return names


def generated(name: str, tmp_path: Path, fmt: str = "prometheus") -> Path:
    return observe_dir(tmp_path, str(PROFILES / f"{name}.yaml"), "--format", fmt)


@pytest.mark.parametrize("name", targets_under_test())
def test_promtool_accepts_config_and_rules(name: str, tmp_path: Path, promtool: str) -> None:
    out = generated(name, tmp_path)
    cfg = subprocess.run([promtool, "check", "config", str(out / "prometheus.yml")],
                         capture_output=True, text=True, check=False)
    assert cfg.returncode == 0, cfg.stdout + cfg.stderr
    # check config also checks the rule files it names
    assert f"SUCCESS: {len(RECORDS)} rules found" in cfg.stdout
    assert f"SUCCESS: {len(ALERTS)} rules found" in cfg.stdout
    rules = subprocess.run([promtool, "check", "rules", str(out / "recording-rules.yaml"),
                            str(out / "alert-rules.yaml")], capture_output=True, text=True,
                           check=False)
    assert rules.returncode == 0, rules.stdout + rules.stderr


@pytest.mark.parametrize("name", targets_under_test())
def test_promtool_unit_tests_cover_every_rule(name: str, tmp_path: Path,
                                              promtool: str) -> None:
    out = generated(name, tmp_path)
    manifest = json.loads((out / "dockergen-observe.json").read_text())
    recorded = {r["record"] for r in yaml.safe_load(
        (out / "recording-rules.yaml").read_text())["groups"][0]["rules"]}
    alerts = yaml.safe_load((out / "alert-rules.yaml").read_text())["groups"][0]["rules"]
    assert recorded == RECORDS and {a["alert"] for a in alerts} == ALERTS
    doc = build_tests(manifest, alerts, ["recording-rules.yaml", "alert-rules.yaml"])
    records, fired = covered(doc)
    assert records == recorded, "every recording rule has an expected value"
    assert fired == ALERTS, "every alert is shown firing"
    (out / "rules.test.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    run = subprocess.run([promtool, "test", "rules", "rules.test.yaml"], cwd=out,
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout


def test_promtool_unit_tests_fail_on_wrong_metric_names(tmp_path: Path, promtool: str) -> None:
    """The unit tests can fail: rules for vLLM 0.33.0 over 0.9.1-named series do."""
    new = observe_dir(tmp_path / "new", str(PROFILES / "h100-fp8.yaml"))
    old = observe_dir(tmp_path / "old", str(PROFILES / "h100-fp8.yaml"), "--set",
                      "engine.version=0.9.1", "--set", "cuda.version=12.8.1")
    manifest = json.loads((old / "dockergen-observe.json").read_text())
    alerts = yaml.safe_load((new / "alert-rules.yaml").read_text())["groups"][0]["rules"]
    doc = build_tests(manifest, alerts, ["recording-rules.yaml", "alert-rules.yaml"])
    (new / "rules.test.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    run = subprocess.run([promtool, "test", "rules", "rules.test.yaml"], cwd=new,
                         capture_output=True, text=True, check=False)
    assert run.returncode != 0
    assert "instance:dockergen_kv_cache_usage:ratio" in run.stdout + run.stderr
    assert "job:dockergen_itl_seconds:p99" in run.stdout + run.stderr


def test_k8s_format(tmp_path: Path, promtool: str) -> None:
    out = observe_dir(tmp_path, str(PROFILES / "h100-fp8.yaml"), "--format", "k8s")
    assert sorted(p.name for p in out.iterdir()) == [
        ".dockergen-files", "dashboard.json", "dockergen-observe.json", "podmonitor.yaml",
        "prometheusrule.yaml"]
    pm = yaml.safe_load((out / "podmonitor.yaml").read_text())
    assert pm["kind"] == "PodMonitor" and pm["apiVersion"] == "monitoring.coreos.com/v1"
    endpoint = pm["spec"]["podMetricsEndpoints"][0]
    assert endpoint["path"] == "/metrics" and endpoint["port"] == "http"
    assert {"action": "replace", "targetLabel": "job",
            "replacement": "dockergen-h100-fp8"} in endpoint["relabelings"]
    rule = yaml.safe_load((out / "prometheusrule.yaml").read_text())
    assert rule["kind"] == "PrometheusRule"
    # the operator loads spec.groups as a rule file: promtool must accept it as one
    groups = tmp_path / "groups.yaml"
    groups.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    run = subprocess.run([promtool, "check", "rules", str(groups)], capture_output=True,
                         text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"SUCCESS: {len(RECORDS) + len(ALERTS)} rules found" in run.stdout
    svc = observe_dir(tmp_path / "svc", str(PROFILES / "h100-fp8.yaml"), "--format", "k8s",
                      "--monitor", "ServiceMonitor", "--port-name", "metrics")
    sm = yaml.safe_load((svc / "servicemonitor.yaml").read_text())
    assert sm["kind"] == "ServiceMonitor" and sm["spec"]["endpoints"][0]["port"] == "metrics"


def crd_problems(doc: dict[str, Any]) -> list[str]:
    """Check a Prometheus Operator object against the CRD schema (models generated from
    prometheus-operator v0.80.1's CRDs): types and enums by validation, unknown keys by
    round-trip (the models drop keys the CRD does not define)."""
    from cloudcoil.models.prometheus_operator import v1
    from pydantic import ValidationError

    model = {"PodMonitor": v1.PodMonitor, "ServiceMonitor": v1.ServiceMonitor,
             "PrometheusRule": v1.PrometheusRule}[doc["kind"]]
    try:
        obj = model.model_validate(doc)
    except ValidationError as exc:
        return [str(e["loc"]) + ": " + e["msg"] for e in exc.errors()]
    back = obj.model_dump(by_alias=True, exclude_unset=True, mode="json")
    return [] if back == doc else [f"not in the CRD schema: {doc} != {back}"]


@pytest.mark.parametrize("monitor", ["PodMonitor", "ServiceMonitor"])
def test_k8s_objects_match_the_operator_crds(monitor: str, tmp_path: Path) -> None:
    out = observe_dir(tmp_path, str(PROFILES / "h100-fp8.yaml"), "--format", "k8s",
                      "--monitor", monitor)
    for name in (f"{monitor.lower()}.yaml", "prometheusrule.yaml"):
        doc = yaml.safe_load((out / name).read_text())
        assert crd_problems(doc) == [], name
    # the check fails where the operator would reject the object
    doc = yaml.safe_load((out / f"{monitor.lower()}.yaml").read_text())
    key = "podMetricsEndpoints" if monitor == "PodMonitor" else "endpoints"
    doc["spec"][key][0]["relabelings"][0]["action"] = "rename"
    assert crd_problems(doc)
    doc = yaml.safe_load((out / f"{monitor.lower()}.yaml").read_text())
    doc["spec"][key][0]["metricsPath"] = "/metrics"
    assert crd_problems(doc)


def _exprs(out: Path) -> dict[str, str]:
    rules = yaml.safe_load((out / "recording-rules.yaml").read_text())["groups"][0]["rules"]
    return {r["record"]: r["expr"] for r in rules}


def test_engine_release_changes_the_queries(tmp_path: Path) -> None:
    """vLLM renamed its KV-cache gauge (0.9.2) and ITL histogram (0.10.2): a profile on
    0.9.1 must query the old names, one on 0.33.0 the new ones; nothing else changes."""
    new = _exprs(observe_dir(tmp_path / "new", str(PROFILES / "h100-fp8.yaml")))
    old = _exprs(observe_dir(tmp_path / "old", str(PROFILES / "h100-fp8.yaml"), "--set",
                             "engine.version=0.9.1", "--set", "cuda.version=12.8.1"))
    changed = {k for k in new if new[k] != old[k]}
    assert changed == {"instance:dockergen_kv_cache_usage:ratio", "job:dockergen_itl_seconds:p50",
                       "job:dockergen_itl_seconds:p90", "job:dockergen_itl_seconds:p99"}
    kv = "instance:dockergen_kv_cache_usage:ratio"
    assert "vllm:kv_cache_usage_perc{" in new[kv] and "gpu_cache" not in new[kv]
    assert "vllm:gpu_cache_usage_perc{" in old[kv]
    assert "vllm:inter_token_latency_seconds_bucket" in new["job:dockergen_itl_seconds:p99"]
    assert "vllm:time_per_output_token_seconds_bucket" in old["job:dockergen_itl_seconds:p99"]


def test_profile_overrides_alert_defaults(tmp_path: Path) -> None:
    out = observe_dir(tmp_path, str(PROFILES / "h100-fp8.yaml"),
                      "--set", "observe.e2e_p99_budget_s=2.5", "--set",
                      "observe.latency_for=30s", "--set", "observe.kv_cache_usage_threshold=0.8",
                      "--set", "observe.runbook_url=https://wiki.example.com/llm")
    alerts = {a["alert"]: a for a in yaml.safe_load(
        (out / "alert-rules.yaml").read_text())["groups"][0]["rules"]}
    latency = alerts["DockergenE2ELatencyP99High"]
    assert latency["expr"].endswith("> 2.5") and latency["for"] == "30s"
    assert "> 0.8 and on" in alerts["DockergenKVCacheNearFull"]["expr"]
    assert latency["annotations"]["runbook_url"] == (
        "https://wiki.example.com/llm#dockergene2elatencyp99high")
    defaults = {a["alert"]: a for a in yaml.safe_load(
        (observe_dir(tmp_path / "d", str(PROFILES / "h100-fp8.yaml")) / "alert-rules.yaml")
        .read_text())["groups"][0]["rules"]}
    assert defaults["DockergenE2ELatencyP99High"]["for"] == "10m"
    assert "runbook_url" not in defaults["DockergenE2ELatencyP99High"]["annotations"]
    for alert in defaults.values():
        assert alert["annotations"]["summary"] and alert["annotations"]["runbook"]


def test_observe_settings_do_not_change_the_image(tmp_path: Path) -> None:
    a = run_cli("render", str(PROFILES / "h100-fp8.yaml"), "-q")
    b = run_cli("render", str(PROFILES / "h100-fp8.yaml"), "-q", "--set",
                "observe.e2e_p99_budget_s=1")
    assert a.rc == b.rc == 0 and a.out == b.out


# --- dashboard ----------------------------------------------------------------------

def _panel_exprs(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in dashboard["panels"] if p["type"] != "row"
            for t in p["targets"]]


@pytest.mark.parametrize("name", targets_under_test())
def test_dashboard_queries_only_recording_rules(name: str, tmp_path: Path) -> None:
    out = generated(name, tmp_path)
    dashboard = json.loads((out / "dashboard.json").read_text())
    recorded = set(_exprs(out))
    exprs = _panel_exprs(dashboard)
    assert len(exprs) >= 12
    used = set()
    for title, expr in exprs:
        hits = {r for r in recorded if r + "{" in expr}
        assert hits, f"panel {title!r} queries no recording rule: {expr}"
        used |= hits
    assert used == recorded, "every recording rule is shown"
    rows = [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    assert rows == ["Throughput", "Latency", "Queue", "KV cache"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(set(ids)) == len(ids)


def test_dashboard_title_variables_and_determinism(tmp_path: Path) -> None:
    one = observe_dir(tmp_path / "1", str(PROFILES / "a100-h100.yaml"))
    two = observe_dir(tmp_path / "2", str(PROFILES / "a100-h100.yaml"))
    for f in sorted(p.name for p in one.iterdir()):
        assert (one / f).read_bytes() == (two / f).read_bytes(), f
    d = json.loads((one / "dashboard.json").read_text())
    assert d["title"] == "dockergen a100-h100: vllm 0.32.0 on a100,h100"
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert set(variables) == {"datasource", "job", "instance", "profile", "engine_release",
                              "gpu_targets"}
    assert variables["engine_release"]["query"] == "vllm 0.32.0"
    assert variables["gpu_targets"]["query"] == "a100,h100"
    assert variables["job"]["current"]["value"] == "dockergen-a100-h100"
    text = (one / "dashboard.json").read_text()
    assert text == json.dumps(d, indent=2, sort_keys=True) + "\n"


# --- errors and warnings ---------------------------------------------------------------

def test_unknown_metrics_release_is_an_error() -> None:
    t = sglang_target(release="0.4.0")
    with pytest.raises(ProfileError) as exc:
        generate(t)
    text = str(exc.value)
    assert "sglang.yaml: engine.version: no metrics knowledge for sglang 0.4.0" in text
    assert "releases read: 0.5.15, 0.5.16, 0.5.17, " in text and "extract_metrics.py" in text


def test_sglang_without_enable_metrics_warns() -> None:
    warned = generate(sglang_target(flags=())).warnings
    assert [w.field for w in warned] == ["serving.extra_args"]
    assert "--enable-metrics" in str(warned[0])
    assert generate(sglang_target()).warnings == []


def test_tensorrt_llm_rows_are_unverified_and_warn(tmp_path: Path) -> None:
    run = run_cli("observe", str(PROFILES / "h100-trtllm-fp8.yaml"), "-o", str(tmp_path / "o"))
    assert run.rc == 0
    assert "were not read from a released artefact" in run.err and "[warning]" in run.err
    quiet = run_cli("observe", str(PROFILES / "h100-fp8.yaml"), "-o", str(tmp_path / "p"))
    assert "warning" not in quiet.err.replace("flash_attn", "")


def test_short_rate_window_is_rejected_and_nothing_written(tmp_path: Path) -> None:
    out = tmp_path / "o"
    run = run_cli("observe", str(PROFILES / "h100-fp8.yaml"), "-o", str(out), "--set",
                  "observe.rate_window=30s")
    assert run.rc == 2
    assert ("observe.rate_window: 30s is shorter than 4 scrape intervals (15s)"
            in run.err) and "set observe.rate_window to at least 60s" in run.err
    assert "Traceback" not in run.err and not out.exists()


def test_bad_observe_values(tmp_path: Path) -> None:
    run = run_cli("observe", str(PROFILES / "h100-fp8.yaml"), "-o", str(tmp_path / "o"),
                  "--set", "observe.latency_for=10 minutes")
    assert run.rc == 2 and "observe.latency_for" in run.err and "duration" in run.err
    run = run_cli("observe", str(PROFILES / "h100-fp8.yaml"), "-o", str(tmp_path / "o"),
                  "--target", "http://x:1")
    assert run.rc == 64 and "--target" in run.err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("args", "message"), [
    (("--target", "vllm-0:99999"), "--target 'vllm-0:99999': expected a host:port scrape "
                                   "target (port 1-65535)"),
    (("--target", "vllm-0:0"), "(port 1-65535)"),
    (("--format", "k8s", "--port-name", "Bad Name"), "--port-name 'Bad Name': expected a "
                                                     "Kubernetes port name"),
    (("--format", "k8s", "--port-name", "http\nevil: x"), "expected a Kubernetes port name"),
    (("--format", "k8s", "--port-name", "metrics-port-0001"), "at most 15"),  # 17 long
    (("--format", "k8s", "--port-name", "8000"), "expected a Kubernetes port name"),
    (("--monitor", "ServiceMonitor"), "--monitor applies to --format k8s only; drop it, or "
                                      "use --format k8s"),
    (("--port-name", "metrics"), "--port-name applies to --format k8s only; drop it, or use "
                                 "--format k8s"),
])
def test_observe_options_are_checked_before_anything_is_written(
        args: tuple[str, ...], message: str, tmp_path: Path) -> None:
    """Before: a port of 99999, a port name with a space or a newline, and options of the
    other format were written (or dropped) with exit 0."""
    run = run_cli("observe", "h100-fp8", "-o", str(tmp_path / "o"), *args)
    assert run.rc == 64, run.err
    assert message in run.err
    assert "Traceback" not in run.err and not (tmp_path / "o").exists()


def test_observe_targets_in_the_profile_have_a_real_port(tmp_path: Path) -> None:
    run = run_cli("observe", "h100-fp8", "-o", str(tmp_path / "o"), "--set",
                  "observe.targets=[vllm-0:65536]")
    assert run.rc == 2, run.err
    assert "observe.targets[0]" in run.err and "(port 1-65535)" in run.err
    assert not (tmp_path / "o").exists()


def test_refuses_foreign_folder(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("keep")
    with pytest.raises(OutputError):
        write_output(tmp_path, {"a": b"b"})
    assert (tmp_path / "mine.txt").read_text() == "keep"


def test_examples_are_current(tmp_path: Path) -> None:
    """examples/observe is exactly what `dockergen observe --all` writes (CI runs it too)."""
    run = run_cli("observe", "--all", "-q", "-o", str(tmp_path))
    assert run.rc == 0, run.err
    committed = EXAMPLES / "observe"
    names = sorted(p.name for p in committed.iterdir() if p.is_dir())
    assert names == sorted(shipped_names())
    for name in names:
        for f in sorted((committed / name).iterdir()):
            assert (tmp_path / name / f.name).read_bytes() == f.read_bytes(), f
        assert sorted(p.name for p in (tmp_path / name).iterdir()) == sorted(
            p.name for p in (committed / name).iterdir())


def test_ci_regenerates_observe_examples() -> None:
    assert "dockergen observe --all -q -o examples/observe" in (ROOT / ".ci/run").read_text()


def test_grafana_sdk_is_imported_by_observe_only(tmp_path: Path) -> None:
    """Other commands stay fast: only `observe` loads grafana-foundation-sdk."""
    probe = (
        "import sys\n"
        "from dockergen.cli import main\n"
        "try:\n"
        "    main(['{cmd}', 'profiles/h100-fp8.yaml', '-q'{extra}])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "print('grafana_foundation_sdk' in sys.modules)\n")
    for cmd, extra, loaded in (("render", "", "False"), ("validate", "", "False"),
                               ("observe", ", '-o', sys.argv[1]", "True")):
        out = subprocess.run([sys.executable, "-c", probe.format(cmd=cmd, extra=extra),
                              str(tmp_path / cmd)], cwd=ROOT,
                             capture_output=True, text=True, check=False)
        assert out.stdout.strip().splitlines()[-1] == loaded, (cmd, out.stdout, out.stderr)


def test_a_rerun_never_deletes_files_added_to_the_folder(tmp_path: Path) -> None:
    """observe -o replaced the folder whole: a rules file the user added was gone, exit 0."""
    out = tmp_path / "o"
    assert run_cli("observe", "h100-fp8", "-o", str(out)).rc == 0
    (out / "my-extra-rules.yaml").write_text("mine\n")
    again = run_cli("observe", "h100-fp8", "-o", str(out))
    assert again.rc == 4, again.err
    assert "holds files dockergen did not write (my-extra-rules.yaml)" in again.err
    assert (out / "my-extra-rules.yaml").read_text() == "mine\n"
    every = tmp_path / "all"
    assert run_cli("observe", "--all", "-q", "-o", str(every)).rc == 0
    (every / "h100-fp8" / "custom.yaml").write_text("mine\n")
    before = {p: p.read_bytes() for p in every.rglob("*") if p.is_file()}
    result = run_cli("observe", "--all", "-q", "-o", str(every))
    assert result.rc == 4 and "custom.yaml" in result.err, result.err
    assert {p: p.read_bytes() for p in every.rglob("*") if p.is_file()} == before
