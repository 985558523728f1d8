"""The build record's status is one enum (dockergen/buildrecord.py) that build writes and
deploy reads: deploy takes only a status build writes, and only one past the smoke tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dockergen.buildrecord import Status
from tests.conftest import EXAMPLES, PROFILES, run_cli

DIGEST = "sha256:" + "ab" * 32


def _record(tmp: Path, status: object) -> Path:
    lock = json.loads((EXAMPLES / "h100-fp8" / "dockergen.resolved.json").read_text())
    record = {"profile": "h100-fp8", "profile_hash": lock["profile_hash"],
              "immutable_tag": "registry.example.com/llm/vllm:dg-0123456789ab",
              "pushed": {"registry.example.com/llm/vllm:x": DIGEST}}
    if status is not None:
        record["status"] = status
    path = tmp / "build-record.json"
    path.write_text(json.dumps(record))
    return path


@pytest.mark.parametrize("status", ["bogus", "Pushed", 3, None])
def test_deploy_refuses_a_status_build_never_writes(status: object, tmp_path: Path) -> None:
    run = run_cli("deploy", str(PROFILES / "h100-fp8.yaml"), "--format", "compose", "-q",
                  "--record", str(_record(tmp_path, status)))
    assert run.rc == 2, run.err
    assert "is not one `dockergen build` writes (started, failed, built" in run.err
    assert run.out == "" and "Traceback" not in run.err


@pytest.mark.parametrize("status", list(Status))
def test_deploy_takes_exactly_the_deployable_statuses(status: Status, tmp_path: Path) -> None:
    run = run_cli("deploy", str(PROFILES / "h100-fp8.yaml"), "--format", "compose", "-q",
                  "--record", str(_record(tmp_path, status.value)))
    assert (run.rc == 0) == status.deployable, (status, run.err)
    assert status.deployable == (status in (Status.BUILT, Status.PUSH_FAILED, Status.PUSHED))
    if not status.deployable:
        assert f"the build ended with status {status.value!r}" in run.err
