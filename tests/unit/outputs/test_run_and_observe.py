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
