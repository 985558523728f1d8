"""The run side fits together: the monitoring `observe` writes finds the pods `deploy` writes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, run_cli


@pytest.mark.parametrize("stem", ["h100-fp8", "h100-sglang-fp8"])
def test_the_pod_monitor_selects_the_deployments_pods_and_port(tmp_path: Path, stem: str
                                                                ) -> None:
    profile = str(ROOT / "profiles" / f"{stem}.yaml")
    k8s = run_cli("deploy", profile, "--format", "k8s", "-q", "-o", str(tmp_path / "k8s.yaml"))
    assert k8s.rc == 0, k8s.err
    obs = run_cli("observe", profile, "--format", "k8s", "-q", "-o", str(tmp_path / "obs"))
    assert obs.rc == 0, obs.err
    docs = list(yaml.safe_load_all((tmp_path / "k8s.yaml").read_text()))
    deployment = next(d for d in docs if d and d["kind"] == "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    port_names = {p["name"] for c in deployment["spec"]["template"]["spec"]["containers"]
                  for p in c.get("ports", [])}
    monitors = [d for f in sorted((tmp_path / "obs").glob("*.yaml"))
                for d in yaml.safe_load_all(f.read_text())
                if isinstance(d, dict) and d.get("kind") == "PodMonitor"]
    assert len(monitors) == 1
    spec = monitors[0]["spec"]
    assert spec["selector"]["matchLabels"].items() <= pod_labels.items()
    assert {e["port"] for e in spec["podMetricsEndpoints"]} <= port_names


def _k8s_objects(folder: Path) -> list[dict[str, object]]:
    return [d for f in sorted(folder.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text())
            if isinstance(d, dict)]


@pytest.mark.parametrize("namespace", [None, "team-a"])
@pytest.mark.parametrize("monitor", ["PodMonitor", "ServiceMonitor"])
def test_the_monitoring_objects_live_in_and_select_the_deployments_namespace(
        tmp_path: Path, namespace: str | None, monitor: str) -> None:
    profile = str(ROOT / "profiles" / "h100-fp8.yaml")
    ns_args = ("--namespace", namespace) if namespace else ()
    k8s = run_cli("deploy", profile, "--format", "k8s", "-q", *ns_args, "-o",
                  str(tmp_path / "k8s.yaml"))
    assert k8s.rc == 0, k8s.err
    obs = run_cli("observe", profile, "--format", "k8s", "--monitor", monitor, "-q",
                  *ns_args, "-o", str(tmp_path / "obs"))
    assert obs.rc == 0, obs.err
    deployed = [d for d in yaml.safe_load_all((tmp_path / "k8s.yaml").read_text()) if d]
    namespaces = {d["metadata"]["namespace"] for d in deployed}
    assert len(namespaces) == 1  # the Deployment, Service and NetworkPolicy share one
    (deployed_ns,) = namespaces
    assert deployed_ns == (namespace or "llm-serving")
    objects = _k8s_objects(tmp_path / "obs")
    assert {o["kind"] for o in objects} == {monitor, "PrometheusRule"}
    for obj in objects:
        # a monitor selects in its own namespace unless told otherwise (Prometheus
        # Operator API: namespaceSelector); it is written into the deployment's and names it
        assert obj["metadata"]["namespace"] == deployed_ns, obj["kind"]  # type: ignore[index]
    mon = next(o for o in objects if o["kind"] == monitor)
    assert mon["spec"]["namespaceSelector"] == {"matchNames": [deployed_ns]}  # type: ignore[index]
    target = next(d for d in deployed
                  if d["kind"] == ("Deployment" if monitor == "PodMonitor" else "Service"))
    labels = (target["spec"]["template"]["metadata"]["labels"] if monitor == "PodMonitor"
              else target["metadata"]["labels"])
    assert mon["spec"]["selector"]["matchLabels"].items() <= labels.items()  # type: ignore[index]


def test_observe_refuses_a_namespace_deploy_refuses(tmp_path: Path) -> None:
    profile = str(ROOT / "profiles" / "h100-fp8.yaml")
    for cmd, extra in (("deploy", ("--format", "k8s", "-o", str(tmp_path / "k.yaml"))),
                       ("observe", ("--format", "k8s", "-o", str(tmp_path / "o")))):
        out = run_cli(cmd, profile, "--namespace", "Team_A", *extra)
        assert out.rc == 64, (cmd, out.err)
        assert "--namespace 'Team_A': not an RFC 1123 label" in out.err, out.err
        assert "Traceback" not in out.err
    assert not (tmp_path / "o").exists() and not (tmp_path / "k.yaml").exists()
    # the namespace is a Kubernetes choice: with Prometheus's own files it is wrong usage
    plain = run_cli("observe", profile, "--namespace", "team-a", "-o", str(tmp_path / "p"))
    assert plain.rc == 64 and "--format k8s" in plain.err, plain.err
