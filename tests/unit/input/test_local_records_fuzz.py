"""Locks, build records, METADATA, RECORD and token answers: bytes from a file anyone can
edit or from an index or registry. Each parser, fuzzed from a real seed, finishes within
its deadline and raises only dockergen's own errors; the commands that read them end with
the file, the field, the problem and the fix, their exit code and no traceback."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings

from dockergen.errors import DockergenError
from dockergen.files import inputs
from dockergen.input import buildrecord, pins, pylockfile
from dockergen.net import http as net
from dockergen.net import index as outdated_index
from dockergen.outputs import owners
from dockergen.outputs.fleet import digests
from dockergen.releases import derive as upgrade_derive
from tests.conftest import run_cli
from tests.support.bad_profile_cases import VALID
from tests.support.hostile import wheel
from tests.unit.knowledge.test_network_parsers_fuzz import _mutations

FUZZ = settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
DEEP = b"[" * 100_000
DIGEST = "sha256:" + "a" * 64
PY_LOCK = pylockfile.header(pylockfile.LockInputs(
    "vllm==0.33.0", "2.14.0", "https://download.pytorch.org/whl/cu130", "https://pypi.org/simple",
    None, "3.12", "x86_64-manylinux_2_28", ("pandas==2.3.0",))).encode() + b"\nvllm==0.33.0\n"
RECORD = json.dumps({"profile": "p.yaml", "profile_hash": "ab" * 6, "builder": "dockergen",
                     "status": "pushed", "tags": ["r.example/llm/vllm:dg-abababababab"],
                     "immutable_tag": "r.example/llm/vllm:dg-abababababab",
                     "target": "runtime",
                     "pushed": {"r.example/llm/vllm:dg-abababababab": DIGEST}}).encode()
BASE_LOCK = json.dumps({"lockfile": 1, "images": {"nvidia/cuda:13.0.2-base-ubuntu22.04": {
    "digest": DIGEST, "index_digest": DIGEST, "platform": "linux/amd64",
    "platform_digest": "sha256:" + "b" * 64,
    "media_type": "application/vnd.oci.image.index.v1+json", "mirror": None,
    "locked_at": "2026-11-30T23:00:00Z"}}}).encode()
METADATA = (b"Metadata-Version: 2.1\nName: vllm\nVersion: 0.35.0\nRequires-Python: >=3.11\n"
            b"Requires-Dist: torch==2.14.0\nRequires-Dist: nvidia-cublas-cu13==13.1.0\n"
            b"Requires-Dist: xformers==0.0.33; platform_system == 'Linux'\n")
RECORD_CSV = (b"vllm/__init__.py,sha256=abc,10\nvllm-0.35.0.dist-info/METADATA,,\n"
              b'"vllm/a,b.py",sha256=def,20\n')


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


@FUZZ
@given(_mutations(PY_LOCK))
@example(b"# dockergen-python-lock: " + DEEP)
@example(b'# dockergen-python-lock: {"engine": 5}')
@example(b'# dockergen-python-lock: {"extra": "abc"}')
def test_a_python_lock_header_is_read_or_refused(data: bytes) -> None:
    try:
        found = pylockfile.read_inputs(_text(data))
    except pylockfile.LockHeaderError:
        return
    assert found is None or all(isinstance(v, str) for v in found.extra)


@FUZZ
@given(_mutations(RECORD))
@example(DEEP)
def test_a_build_record_is_read_or_refused(data: bytes) -> None:
    try:
        buildrecord.read_record(inputs.loads_json(data))
    except (ValueError, buildrecord.RecordProblem):  # loads_json's, and the record's
        return


@FUZZ
@given(_mutations(BASE_LOCK))
@example(DEEP)
def test_a_base_image_lock_is_read_or_refused(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "p.lock.json"
        path.write_bytes(data)
        try:
            found = pins.read_lock(path)
        except DockergenError:
            return
    for entry in (found or {}).get("images", {}).values():
        assert pins._DIGEST.fullmatch(entry["digest"])
        assert entry.get("platform_digest") is None or pins._DIGEST.fullmatch(
            entry["platform_digest"])


@FUZZ
@given(_mutations(METADATA))
@example(b"Requires-Python: >=3\nRequires-Dist: torch==2.*\n")
@example(b"Requires-Python: >=3\nRequires-Dist: torch==2.14.0\nRequires-Dist: cuda-toolkit==1"
         + b"9" * 4301 + b"\n")
@example(b"Requires-Python: >=3\nRequires-Dist: torch==2.14.0\nRequires-Dist: x; "
         + b"(" * 5000 + b"python_version > '3'" + b")" * 5000 + b"\n")
def test_metadata_gives_a_row_or_a_refusal(data: bytes) -> None:
    try:
        row, _, _ = upgrade_derive.metadata_row("vllm", "w.whl", _text(data))
    except upgrade_derive.UpgradeError:
        return
    assert isinstance(row["cuda_major"], int)


@FUZZ
@given(_mutations(RECORD_CSV))
@example(b"a" * 200_000)
@example(b'a,b\r\n"c')
def test_a_record_gives_paths_or_a_refusal(data: bytes) -> None:
    try:
        paths = owners.record_paths(_text(data), "w.whl")
    except outdated_index.IndexReadError:
        return
    assert not any(p.split("/", 1)[0].endswith(".dist-info") for p in paths)


@FUZZ
@given(_mutations(b'{"token": "abc.def", "expires_in": 300}'))
@example(DEEP)
@example(b'{"token": "", "access_token": ["x"]}')
@example(b'{"token": "a\\r\\nX-Injected: 1"}')
def test_a_token_answer_gives_a_token_or_a_refusal(data: bytes) -> None:
    try:
        token = digests.token_of(data, "r.example/img")
        net.Credential.bearer(net.origin_of("https://r.example"), token, "the token")
    except (digests.RegistryError, net.NetError):
        return
    assert token and "\n" not in token


def test_the_seeds_parse() -> None:
    assert pylockfile.read_inputs(_text(PY_LOCK)) is not None
    assert buildrecord.read_record(json.loads(RECORD)).pushed
    row, _, _ = upgrade_derive.metadata_row("vllm", "w.whl", _text(METADATA))
    assert row["torch"] == "2.14.0" and row["cuda_major"] == 13
    assert owners.record_paths(_text(RECORD_CSV), "w") == ["vllm/__init__.py", "vllm/a,b.py"]
    assert digests.token_of(b'{"token": "t"}', "r") == "t"
    assert wheel("0.35.0")  # the hostile index's wheel carries the same METADATA shape


# --- the commands ------------------------------------------------------------------------
def _case(tmp_path: Path, files: dict[str, bytes]) -> Path:
    (tmp_path / "p.yaml").write_text(VALID)
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    return tmp_path / "p.yaml"


@pytest.mark.parametrize(("header", "said"), [
    (DEEP, "its first line: not JSON (JSON nested too deep)"),
    (b'{"engine": 5}', "its first line's engine: a JSON int, not text"),
    (b"[1]", "its first line: a JSON list, not an object"),
    (b'{"engine": "vllm==1", "surprise": 1}', "its first line's \"surprise\": not an input"),
])
def test_a_python_lock_with_a_bad_header_is_a_problem_of_render(
        tmp_path: Path, header: bytes, said: str) -> None:
    """A header nested too deep was a RecursionError traceback from `render`."""
    profile = _case(tmp_path, {"p.python.lock": b"# dockergen-python-lock: " + header + b"\n"})
    run = run_cli("render", "-q", str(profile), "-o", str(tmp_path / "out"))
    assert run.rc == 2, run.err
    assert f"engine.version: p.python.lock: {said}" in run.err
    assert "Traceback" not in run.err and not (tmp_path / "out").exists()


def test_a_build_record_nested_too_deep_is_a_deploy_error(tmp_path: Path) -> None:
    """It was a RecursionError traceback from `deploy --record`."""
    profile = _case(tmp_path, {"rec.json": DEEP})
    run = run_cli("deploy", "-q", str(profile), "--format", "compose", "--record",
                  str(tmp_path / "rec.json"))
    assert run.rc == 2, run.err
    assert "rec.json: not a dockergen build record (JSON nested too deep)" in run.err
    assert "Traceback" not in run.err and run.out == ""


@pytest.mark.parametrize(("field", "value"), [
    ("platform_digest", "sha256:xyz"), ("platform_digest", 7), ("index_digest", "md5:00"),
    ("platform", "linux/amd64\nFROM evil"), ("locked_at", "yesterday")])
def test_every_field_of_a_base_image_lock_is_checked(tmp_path: Path, field: str,
                                                     value: object) -> None:
    """platform_digest (and the other fields beside the digest) were taken as they came."""
    from dockergen.outputs.fleet.project import collect

    profile = _case(tmp_path, {})
    refs = sorted({i.ref for t in collect([profile], (), pin=False, render=False).members
                   for i in t.images})
    entry = json.loads(BASE_LOCK)["images"]["nvidia/cuda:13.0.2-base-ubuntu22.04"]
    (tmp_path / "p.lock.json").write_text(json.dumps(
        {"lockfile": 1, "images": {ref: {**entry, field: value} for ref in refs}}))
    run = run_cli("render", "-q", str(profile), "-o", str(tmp_path / "out"))
    assert run.rc == 2, run.err
    assert f"p.lock.json:1:1: images['{refs[0]}']: {field} is not " in run.err
    assert "regenerate it: dockergen lock --update" in run.err
    assert "Traceback" not in run.err and not (tmp_path / "out").exists()
