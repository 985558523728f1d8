"""metrics.yaml agrees with what scripts/extract_metrics.py read from the real wheels.

Offline: ``dockergen/data/metrics_snapshot.json`` is the script's output for the wheels
(re-create it with ``python scripts/extract_metrics.py --update ... vllm==X``). Every release
of compat.yaml must be covered, and every row must name a family the release defines.
"""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from dockergen.outputs.observe.metrics import (
    ROLES,
    SNAPSHOT_FILE,
    UnknownRelease,
    engine_metrics,
    load_table,
)
from tests.conftest import ROOT

SNAPSHOT: dict[str, dict[str, Any]] = json.loads(SNAPSHOT_FILE.read_text())
# The serving components' facts files: engine (package name) -> releases dockergen knows.
ENGINE_FACTS = {
    facts["package"]: facts for facts in (
        yaml.safe_load(p.read_text()) for p in sorted(
            (ROOT / "dockergen/parts/engines").glob("*/facts.yaml")))
}


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("extract_metrics",
                                                  ROOT / "scripts/extract_metrics.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_releases() -> list[tuple[str, str]]:
    table = load_table()["engines"]
    return [(engine, r) for engine, spec in table.items() if not spec.get("unverified")
            for r in spec["releases"]]


@pytest.mark.parametrize(("engine", "release"), read_releases())
def test_rows_match_the_wheel_snapshot(engine: str, release: str) -> None:
    assert release in SNAPSHOT[engine], f"{engine} {release}: no snapshot; run the script"
    defined = SNAPSHOT[engine][release]["metrics"]
    m = engine_metrics(engine, release)
    assert set(m.roles) == set(ROLES)
    for role, metric in m.roles.items():
        assert metric.name in defined, f"{engine} {release} does not define {metric.name}"
        assert defined[metric.name]["type"] == metric.type, (role, metric.name)
        assert defined[metric.name]["labels"] == list(metric.labels), (role, metric.name)
        assert not metric.unverified


def test_every_known_release_has_metrics() -> None:
    """Every engine release a profile may name (parts/engines/*.yaml) is covered."""
    table = load_table()["engines"]
    assert {"vllm", "tensorrt-llm"} <= set(ENGINE_FACTS)
    for engine, spec in ENGINE_FACTS.items():
        assert engine in table, f"{engine}: no metrics knowledge"
        missing = set(spec["releases"]) - set(table[engine]["releases"])
        assert not missing, f"{engine}: releases without metrics rows: {sorted(missing)}"


def test_tensorrt_llm_rows_are_marked_unverified() -> None:
    """No TensorRT-LLM release artefact is readable here (PyPI has a wheel-stub sdist only)."""
    m = engine_metrics("tensorrt-llm", "1.1.0")
    assert len(m.unverified) == len(ROLES)


def test_renames_where_the_wheels_say() -> None:
    """The release boundaries in metrics.yaml's comments, checked against the snapshot."""
    v = SNAPSHOT["vllm"]

    def has(release: str, name: str) -> bool:
        return name in v[release]["metrics"]

    assert not has("0.9.1", "vllm:kv_cache_usage_perc") and has("0.9.1",
                                                                 "vllm:gpu_cache_usage_perc")
    assert has("0.9.2", "vllm:kv_cache_usage_perc") and has("0.9.2", "vllm:gpu_cache_usage_perc")
    assert has("0.11.0", "vllm:gpu_cache_usage_perc")
    assert not has("0.12.0", "vllm:gpu_cache_usage_perc")
    assert not has("0.10.1.1", "vllm:inter_token_latency_seconds")
    assert has("0.10.2", "vllm:inter_token_latency_seconds")
    assert has("0.14.1", "vllm:time_per_output_token_seconds")
    assert not has("0.17.1", "vllm:time_per_output_token_seconds")
    assert engine_metrics("vllm", "0.9.1").roles["kv_cache_usage"].name == (
        "vllm:gpu_cache_usage_perc")
    assert engine_metrics("vllm", "0.9.2" if "0.9.2" in load_table()["engines"]["vllm"][
        "releases"] else "0.10.2").roles["kv_cache_usage"].name == "vllm:kv_cache_usage_perc"


def test_unread_release_is_refused() -> None:
    with pytest.raises(UnknownRelease) as exc:
        engine_metrics("vllm", "0.10.0")
    assert "0.33.0" in exc.value.known


def test_snapshot_is_what_the_script_extracts(tmp_path: Path) -> None:
    """The script's extraction, run on a wheel built from a snapshot module's shapes."""
    script = _script()
    source = '''
import prometheus_client
class PrometheusStatLogger:
    _gauge_cls = prometheus_client.Gauge
    _counter_cls = prometheus_client.Counter
    _histogram_cls = prometheus_client.Histogram
    def __init__(self):
        labelnames = ["model_name", "engine"]
        self._gauge_cls(name="vllm:kv_cache_usage_perc", documentation="x",
                        labelnames=labelnames)
        self._counter_cls(name="vllm:prompt_tokens_total", documentation="x",
                          labelnames=labelnames)
        self._counter_cls(name="vllm:request_success", documentation="x",
                          labelnames=labelnames + ["finished_reason"])
        self._histogram_cls(name="vllm:e2e_request_latency_seconds", documentation="x",
                            buckets=[1.0], labelnames=labelnames)
        prometheus_client.Gauge("not_vllm_metric", "x")
'''
    wheel = tmp_path / "vllm-9.9.9-cp38-abi3-manylinux1_x86_64.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("vllm/v1/metrics/loggers.py", source)
    wheel.write_bytes(buf.getvalue())
    entry = script.extract_wheel(wheel)
    assert entry["version"] == "9.9.9" and entry["module"] == "vllm/v1/metrics/loggers.py"
    assert entry["metrics"] == {
        "vllm:e2e_request_latency_seconds": {"type": "histogram",
                                             "labels": ["model_name", "engine"]},
        "vllm:kv_cache_usage_perc": {"type": "gauge", "labels": ["model_name", "engine"]},
        # prometheus_client strips _total from counter names: family vllm:prompt_tokens
        "vllm:prompt_tokens": {"type": "counter", "labels": ["model_name", "engine"]},
        "vllm:request_success": {"type": "counter",
                                 "labels": ["model_name", "engine", "finished_reason"]},
    }


def test_snapshot_entries_are_script_output() -> None:
    """Each snapshot entry has the script's shape and names its wheel and module hash."""
    for engine, releases in SNAPSHOT.items():
        for version, entry in releases.items():
            assert entry["engine"] == engine and entry["version"] == version
            assert entry["wheel"].startswith(f"{engine}-{version}-")
            assert len(entry["module_sha256"]) == 64
            assert entry["metrics"], f"{engine} {version}: nothing extracted"


def test_snapshot_matches_a_fresh_extraction_from_pypi() -> None:
    """The machine check, online: the script downloads a real wheel from PyPI (pip, no
    deps) and extracts the same families, module hash and wheel the snapshot holds. SGLang's
    wheel (~40 MB) keeps this quick; vLLM's (250-500 MB) are re-checked the same way by
    `python scripts/extract_metrics.py vllm==X` when a release is added."""
    run = subprocess.run([sys.executable, str(ROOT / "scripts/extract_metrics.py"),
                          "sglang==0.5.23"], capture_output=True, text=True, check=False,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    fresh = json.loads(run.stdout)["sglang"]["0.5.23"]
    assert fresh == SNAPSHOT["sglang"]["0.5.23"]
