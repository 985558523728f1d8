"""Failure paths of build, smoke and push against a fake daemon: fast, and on demand.

The same paths run against the real engine and registries in tests/daemon/test_build_daemon.py;
here each failure is provoked directly (see tests/support/fake_daemon.py) and the orchestration's
answer is checked: exit code, message, build record, and what was left behind.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from dockergen.build.daemon import PushError
from dockergen.build.options import BuildOptions
from dockergen.build.orchestrate import build_profile
from dockergen.build.run import BuildFailed, BuildTimeout
from dockergen.build.smoke import SmokeFailed
from dockergen.errors import ExitCode
from dockergen.input.buildrecord import BuildRecord, Status
from tests.conftest import ROOT, run_cli
from tests.support.fake_daemon import FakeDaemon

PROFILE = ROOT / "tests" / "profiles" / "standin.yaml"
# one explicit smoke command, so that the fake's containers decide the smoke outcome
ONE_CHECK = ("smoke.defaults=false",
             "smoke.commands=[{name: python runs, command: [python3, -c, pass]}]")


def _build(tmp_path: Path, daemon: FakeDaemon, **options: object) -> BuildRecord | None:
    return build_profile(PROFILE, ONE_CHECK, BuildOptions(progress="plain", **options),
                         output=tmp_path / "ctx", echo=lambda _: None, out=lambda _: None,
                         daemon=daemon)


def _record(tmp_path: Path) -> dict[str, object]:
    return json.loads((tmp_path / "ctx" / "build-record.json").read_text())


def test_a_refused_push_is_recorded_and_exits_7(tmp_path: Path) -> None:
    daemon = FakeDaemon(refuse_push="denied: requested access to the resource is denied")
    with pytest.raises(PushError, match="denied") as exc:
        _build(tmp_path, daemon, push=True)
    assert exc.value.exit_code == ExitCode.PUSH_FAILED
    record = _record(tmp_path)
    assert record["status"] == "push-failed" and record["pushed"] == {}
    assert daemon.pushed == []


def test_a_successful_push_records_every_digest(tmp_path: Path) -> None:
    daemon = FakeDaemon()
    record = _build(tmp_path, daemon, push=True)
    assert record is not None and record.status == Status.PUSHED and record.pushed
    assert sorted(record.pushed) == sorted(daemon.pushed)
    assert _record(tmp_path)["pushed"] == record.pushed  # what deploy --record reads
    assert len(daemon.pushed) == 2  # the release tag and the content tag


def test_deploy_pins_the_digest_the_build_recorded(tmp_path: Path) -> None:
    """The record build writes is the one deploy reads: the same keys, the same image."""
    daemon = FakeDaemon()
    record = _build(tmp_path, daemon, push=True)
    assert record is not None and record.pushed
    sets = [arg for pair in ONE_CHECK for arg in ("--set", pair)]
    run = run_cli("deploy", str(PROFILE), "--format", "compose", "-q", *sets,
                  "--record", str(tmp_path / "ctx" / "build-record.json"))
    assert run.rc == 0, run.err
    image = yaml.safe_load(run.out)["services"]["standin"]["image"]
    assert image == record.pinned_image(record.immutable_tag.rsplit(":", 1)[0])
    assert image.split("@")[1] in record.pushed.values()


def test_a_refused_tag_leaves_no_tag_of_ours(tmp_path: Path) -> None:
    daemon = FakeDaemon(refuse_tag=":dg-")  # the engine rejects the second tag
    with pytest.raises(BuildFailed, match="could not be tagged") as exc:
        _build(tmp_path, daemon)
    assert exc.value.exit_code == ExitCode.BUILD_FAILED
    assert all(ref in daemon.removed for ref in daemon.tags) and not daemon.tags
    assert _record(tmp_path)["status"] == "failed"


def test_a_container_that_cannot_start_fails_the_smoke_test(tmp_path: Path) -> None:
    daemon = FakeDaemon(start_error='exec: "python3": executable file not found in $PATH')
    with pytest.raises(SmokeFailed, match="python runs") as exc:
        _build(tmp_path, daemon, push=True)
    assert exc.value.exit_code == ExitCode.SMOKE_FAILED
    record = _record(tmp_path)
    assert record["status"] == "smoke-failed"
    assert "executable file not found" in record["smoke"][0]["detail"]  # type: ignore[index]
    assert daemon.pushed == []


def test_a_silent_build_step_is_cancelled_by_the_timeout(tmp_path: Path) -> None:
    daemon = FakeDaemon(silent_build=True)
    started = time.monotonic()
    with pytest.raises(BuildTimeout) as exc:
        _build(tmp_path, daemon, timeout=0.3)
    assert exc.value.exit_code == ExitCode.TIMEOUT
    assert daemon.cancelled.is_set() and time.monotonic() - started < 5
    assert _record(tmp_path)["status"] == "failed" and not daemon.tags


def test_a_container_the_engine_cannot_create_is_a_daemon_error_not_a_traceback() -> None:
    """With the containerd store, creating a container unpacks the image: on a full disk
    the engine refuses ("no space left on device"); the smoke test then ended in a
    docker-py traceback (exit 1) instead of the engine's reason."""
    import docker.errors

    from dockergen.build.daemon import DaemonError
    from dockergen.build.daemon.docker import DockerDaemon

    class Containers:
        def create(self, *args: object, **kwargs: object) -> None:
            raise docker.errors.APIError("500 Server Error",
                                         explanation="failed to extract layer: write "
                                                     "/x/lib.so: no space left on device")

    class Client:
        containers = Containers()

    daemon = object.__new__(DockerDaemon)
    daemon.client = Client()  # type: ignore[assignment]
    for call in (lambda: daemon.run("img:1", ["true"]),
                 lambda: daemon.read_file("img:1", "/etc/os-release", 1024)):
        with pytest.raises(DaemonError, match="no space left on device"):
            call()
