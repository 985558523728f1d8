"""The step after a push (SBOM and provenance beside the build record, signatures with
--sign) against the fake daemon; the real registry and cosign: tests/daemon/test_trust_daemon.py."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from dockergen.build.options import BuildOptions
from dockergen.build.orchestrate import build_profile
from dockergen.errors import ExitCode
from dockergen.input.buildrecord import BuildRecord
from dockergen.trust import provenance, sbom
from dockergen.trust.cosign import SigningFailed
from tests.support.fake_daemon import FakeDaemon
from tests.unit.building.test_daemon_fake import ONE_CHECK, PROFILE

DPKG = b"""Package: libc6
Status: install ok installed
Architecture: amd64
Version: 2.36-9+deb12u10
"""


def _build(tmp_path: Path, daemon: FakeDaemon, **options: object) -> BuildRecord | None:
    return build_profile(PROFILE, ONE_CHECK, BuildOptions(progress="plain", **options),
                         output=tmp_path / "ctx", echo=lambda _: None, out=lambda _: None,
                         daemon=daemon)


def test_a_push_writes_sbom_and_provenance_beside_the_record(tmp_path: Path) -> None:
    daemon = FakeDaemon(files={"/var/lib/dpkg/status": DPKG,
                               "/usr/lib/os-release": b"ID=debian\n"})
    record = _build(tmp_path, daemon, push=True)
    assert record is not None and record.pushed and record.signed is None
    digest = record.pushed[record.immutable_tag]
    bom = json.loads((tmp_path / "ctx" / "sbom.cdx.json").read_text())
    assert sbom.problems(bom) is None
    purls = sorted(c["purl"] for c in bom["components"])
    assert "pkg:deb/debian/libc6@2.36-9%2Bdeb12u10?arch=amd64" in purls
    assert "pkg:pypi/flash-attn@2.8.3" in purls  # the stand-in profile builds it from source
    assert bom["metadata"]["component"]["version"] == digest
    statement = json.loads((tmp_path / "ctx" / "provenance.intoto.json").read_text())
    assert provenance.shape_problems(statement) == []
    params = statement["predicate"]["buildDefinition"]["externalParameters"]
    assert params["profileHash"] == record.profile_hash
    assert params["profile"]["path"] == "standin.yaml"
    written = json.loads((tmp_path / "ctx" / "build-record.json").read_text())
    assert written["bases"] == record.bases and set(written["bases"]) == {
        "local/standin-devel:bookworm", "local/standin-runtime:bookworm"}


def test_a_build_without_push_writes_neither(tmp_path: Path) -> None:
    _build(tmp_path, FakeDaemon())
    assert not (tmp_path / "ctx" / "sbom.cdx.json").exists()
    assert not (tmp_path / "ctx" / "provenance.intoto.json").exists()


def test_a_failed_signature_is_exit_7_without_the_password(tmp_path: Path, cosign: str,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """The real cosign with a real key and the wrong password: the pushed image stays
    recorded as pushed, unsigned, and no message carries the password."""
    monkeypatch.setenv("DOCKERGEN_COSIGN", cosign)
    monkeypatch.setenv("COSIGN_PASSWORD", "the-right-password-1")
    made = subprocess.run([cosign, "generate-key-pair", "--output-key-prefix", "k"],
                          cwd=tmp_path, capture_output=True, text=True, check=False,
                          env=os.environ, stdin=subprocess.DEVNULL)
    assert made.returncode == 0, made.stderr
    monkeypatch.setenv("COSIGN_PASSWORD", "a-wrong-password-7")
    with pytest.raises(SigningFailed) as exc:
        _build(tmp_path, FakeDaemon(), push=True, sign_key=str(tmp_path / "k.key"))
    assert exc.value.exit_code == ExitCode.PUSH_FAILED
    assert str(exc.value).startswith("cosign could not sign localhost:5000/dockergen-test/"
                                     "standin@sha256:")
    assert "a-wrong-password-7" not in str(exc.value)
    record = json.loads((tmp_path / "ctx" / "build-record.json").read_text())
    assert record["status"] == "pushed" and "signed" not in record
    assert (tmp_path / "ctx" / "sbom.cdx.json").is_file()


def test_a_second_push_into_the_same_folder_replaces_the_evidence(tmp_path: Path) -> None:
    """The folder's manifest lists both documents: a rebuild replaces them with the folder,
    as it does the build record."""
    _build(tmp_path, FakeDaemon(), push=True)
    (tmp_path / "ctx" / "sbom.cdx.json").write_text(
        (tmp_path / "ctx" / "sbom.cdx.json").read_text().replace("libc6", "stale"))
    record = _build(tmp_path, FakeDaemon(files={"/var/lib/dpkg/status": DPKG}), push=True)
    assert record is not None and record.pushed
    assert "libc6" in (tmp_path / "ctx" / "sbom.cdx.json").read_text()

