"""The build record is one typed value (dockergen/input/buildrecord.py) that build writes and deploy
reads: its file keeps the keys earlier builds wrote, reading it back gives the same record,
a value build never writes is named by its key, and deploy takes only a status build writes,
and only one past the smoke tests."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from dockergen.input.buildrecord import (
    BuildRecord,
    RecordProblem,
    SmokeCheck,
    Status,
    StepCounts,
    read_record,
)
from tests.conftest import PROFILES, run_cli
from tests.support.records import DIGEST, write_record


def _record(tmp: Path, status: object) -> Path:
    return write_record(tmp, status=status)  # None: no status at all


@pytest.mark.parametrize(("status", "words"), [
    *((s, "is not one `dockergen build` writes (started, failed, built") for s in
      ("bogus", "Pushed", 3)),
    (None, "status: missing (`dockergen build` writes it when it starts)")])
def test_deploy_refuses_a_status_build_never_writes(status: object, words: str,
                                                    tmp_path: Path) -> None:
    run = run_cli("deploy", str(PROFILES / "h100-fp8.yaml"), "--format", "compose", "-q",
                  "--record", str(_record(tmp_path, status)))
    assert run.rc == 2, run.err
    assert words in run.err
    assert run.out == "" and "Traceback" not in run.err


@pytest.mark.parametrize("status", list(Status))
def test_deploy_takes_exactly_the_deployable_statuses(status: Status, tmp_path: Path) -> None:
    run = run_cli("deploy", str(PROFILES / "h100-fp8.yaml"), "--format", "compose", "-q",
                  "--record", str(_record(tmp_path, status.value)))
    assert (run.rc == 0) == status.deployable, (status, run.err)
    assert status.deployable == (status in (Status.BUILT, Status.PUSH_FAILED, Status.PUSHED))
    if not status.deployable:
        assert f"the build ended with status {status.value!r}" in run.err


def _full_record() -> BuildRecord:
    repo = "registry.example.com/llm/vllm"
    return BuildRecord(
        "h100-fp8", "sha256:" + "0" * 64, "buildkit", (f"{repo}:x", f"{repo}:dg-0123456789ab"),
        f"{repo}:dg-0123456789ab", status=Status.PUSHED, image_id="sha256:" + "cd" * 32,
        seconds=61.5, counts=StepCounts(9, 2, 7, {"runtime": 1.5}, {"runtime": 2},
                                        {"runtime": 9}),
        smoke=(SmokeCheck("versions", True),), pushed={f"{repo}:x": DIGEST})


def test_the_file_keeps_the_keys_earlier_builds_wrote(tmp_path: Path) -> None:
    written = _full_record().as_json()
    spelled_out = json.loads(write_record(tmp_path).read_text())
    assert written.keys() == spelled_out.keys()
    assert written["target"] == "(final stage)" and written["status"] == "pushed"
    assert written["smoke"] == [{"name": "versions", "ok": True, "detail": ""}]


def test_reading_a_written_record_gives_the_record_deploy_needs(tmp_path: Path) -> None:
    record = _full_record()
    record.write(tmp_path / "r.json")
    back = read_record(json.loads((tmp_path / "r.json").read_text()))
    # the counts and smoke results are for people; deploy reads the rest
    assert back == replace(record, seconds=None, counts=None, smoke=None)
    stage = replace(record, stage="flash-attn", smoke=None, smoke_not_run="not run: a stage")
    assert read_record(stage.as_json()).stage == "flash-attn"


@pytest.mark.parametrize(("key", "value", "words"), [
    ("builder", None, "builder: missing (`dockergen build` writes it when it starts)"),
    ("profile_hash", 7, "profile_hash: '7' (int) is not a string"),
    ("tags", "r:x", "tags: str, not a list of references"),
    ("tags", ["r/x", "r/Y"], "tags (entry 2): 'r/Y' is not an image reference"),
    ("immutable_tag", None, "immutable_tag: missing"),
    ("immutable_tag", "r/x", "immutable_tag: 'r/x' is not an image reference"),  # no tag
    ("target", ["runtime"], "target: \"['runtime']\" (list) is not a string"),
])
def test_a_value_build_never_writes_is_named_by_its_key(key: str, value: object,
                                                        words: str) -> None:
    data = _full_record().as_json()
    if value is None:
        del data[key]
    else:
        data[key] = value
    with pytest.raises(RecordProblem) as exc:
        read_record(data)
    assert str(exc.value).startswith(words), str(exc.value)
    assert exc.value.key == words.split(":")[0]


def test_deploy_names_the_key_of_a_value_build_never_writes(tmp_path: Path) -> None:
    record = write_record(tmp_path, builder=None)
    run = run_cli("deploy", str(PROFILES / "h100-fp8.yaml"), "--format", "compose", "-q",
                  "--record", str(record))
    assert run.rc == 2 and run.out == "" and "Traceback" not in run.err
    assert f"{record}: builder: missing (`dockergen build` writes it when it starts); pass " \
        "the build-record.json" in run.err
