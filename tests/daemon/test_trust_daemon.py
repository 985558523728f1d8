"""`dockergen build --push --sign` and `dockergen verify` with the real cosign against the
real local registry (distribution 2.8: no referrers API, so cosign's tag scheme
`sha256-<hex>.sig`/`.att` holds signatures and attestations).

One stand-in image is built, locked, pushed and signed for the module; each tampering test
works on its own copy (`cosign copy`: the image with its signature and attestations in
another repository), so no test depends on another's order.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker.errors
import pytest

from tests.conftest import ROOT, Run, run_cli
from tests.support.registries import ANON

pytestmark = [pytest.mark.daemon, pytest.mark.usefixtures("registries")]

PROFILE = ROOT / "tests" / "profiles" / "standin.yaml"
PASSWORD = "trust-test-key-password"  # the keys' password (COSIGN_PASSWORD), never printed
REPO = f"{ANON}/trust-test/standin-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Signed:
    """The module's signed image and what made it."""

    folder: Path
    profile: Path
    lock: Path
    record: Path
    ref: str  # the release tag's reference
    digest: str
    env: dict[str, str]
    good_key: Path
    good_pub: Path
    other_key: Path
    other_pub: Path
    sets: tuple[str, ...]


def _cosign(cosign: str, *args: str, env: dict[str, str], cwd: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([cosign, *args], capture_output=True, text=True, env=env, cwd=cwd,
                          stdin=subprocess.DEVNULL, check=False, timeout=300)


def _key_pair(cosign: str, folder: Path, prefix: str, env: dict[str, str]) -> None:
    made = _cosign(cosign, "generate-key-pair", "--output-key-prefix", prefix, env=env,
                   cwd=folder)
    assert made.returncode == 0, made.stderr


@pytest.fixture(scope="module")
def signed(index: str, cosign: str, docker_client, tmp_path_factory: pytest.TempPathFactory  # type: ignore[no-untyped-def]
           ) -> Iterator[Signed]:
    folder = tmp_path_factory.mktemp("trust")
    env = {**os.environ, "COSIGN_PASSWORD": PASSWORD, "DOCKERGEN_COSIGN": cosign}
    _key_pair(cosign, folder, "good", env)
    _key_pair(cosign, folder, "other", env)
    profile = folder / "trust.yaml"
    profile.write_text(PROFILE.read_text().replace(
        "name: localhost:5000/dockergen-test/standin", f"name: {REPO}"))
    sets = ("--set", f"build.pip_index_url={index}/simple", "--set",
            f"build.torch_index_url={index}")
    locked = run_cli("lock", "--python", str(profile), *sets)
    assert locked.rc == 0, locked.err
    built = run_cli("build", str(profile), "--network", "host", "-q", *sets, "--push",
                    "--sign", "--sign-key", str(folder / "good.key"), "-o",
                    str(folder / "ctx"), env=env)
    assert built.rc == 0, built.err
    assert PASSWORD not in built.out + built.err
    record = folder / "ctx" / "build-record.json"
    pushed = json.loads(record.read_text())["pushed"]
    ref = next(r for r in pushed if not r.split(":")[-1].startswith("dg-"))
    yield Signed(folder, profile, folder / "trust.python.lock", record, ref, pushed[ref], env,
                 folder / "good.key", folder / "good.pub", folder / "other.key",
                 folder / "other.pub", sets)
    for tag in pushed:  # the local tags this module made (the registry's data is the session's)
        with contextlib.suppress(docker.errors.APIError):  # gone already, or shared
            docker_client.api.remove_image(tag)


def _verify(s: Signed, image: str, *args: str, key: Path | None = None) -> Run:
    result = run_cli("verify", image, "--key", str(key or s.good_pub), *args, env=s.env)
    assert "Traceback" not in result.err
    return result


def _copy(cosign: str, s: Signed, case: str) -> str:
    """The signed image with its signature and attestations in a repository of its own."""
    target = f"{REPO}-{case}:copy"
    copied = _cosign(cosign, "copy", "--force", f"{s.ref.rsplit(':', 1)[0]}@{s.digest}",
                     target, env=s.env)
    assert copied.returncode == 0, copied.stderr
    return target


def _line(result: Run, name: str) -> str:
    return next(line for line in result.out.splitlines() if f" {name}: " in line)


def test_signed_build_writes_evidence_and_verifies(signed: Signed) -> None:
    s = signed
    record = json.loads(s.record.read_text())
    assert record["status"] == "pushed"
    assert sorted(record["signed"]) == sorted({f"{r.rsplit(':', 1)[0]}@{d}"
                                               for r, d in record["pushed"].items()})
    assert set(record["bases"]) == {"local/standin-devel:bookworm",
                                    "local/standin-runtime:bookworm"}
    bom = json.loads((s.record.parent / "sbom.cdx.json").read_text())
    by_source: dict[str, list[str]] = {}
    for comp in bom["components"]:
        source = next(p["value"] for p in comp["properties"] if p["name"] == "dockergen:source")
        by_source.setdefault(source, []).append(comp["purl"])
    assert sorted(p.split("@")[0] for p in by_source["python-lock"]) == [
        "pkg:pypi/flashinfer-python", "pkg:pypi/torch", "pkg:pypi/triton", "pkg:pypi/vllm"]
    # the runtime stage's dpkg status, read from the built image (Debian's libc is there)
    assert any(p.startswith("pkg:deb/debian/libc6@") for p in by_source["dpkg"])
    assert by_source["source-build"] == ["pkg:pypi/flash-attn@2.8.3"]
    assert len(by_source["base-image"]) == 2
    statement = json.loads((s.record.parent / "provenance.intoto.json").read_text())
    assert statement["subject"][0]["digest"] == {"sha256": s.digest.removeprefix("sha256:")}

    result = _verify(s, s.ref, "--lock", str(s.lock), "--record", str(s.record))
    assert result.rc == 0, result.out + result.err
    assert [line.split()[0] for line in result.out.splitlines()[1:]] == ["ok"] * 3
    assert "4 Python distribution(s), each as the lock pins it" in _line(result, "sbom")


def test_another_key_fails_naming_the_signature(signed: Signed) -> None:
    result = _verify(signed, signed.ref, key=signed.other_pub)
    assert result.rc == 10
    assert "FAILED signature: no signature verified by the key for " + signed.digest \
        in result.out
    assert "verification failed: signature, sbom, provenance" in result.err


def test_sbom_of_another_lock_fails_naming_the_sbom(signed: Signed, tmp_path: Path) -> None:
    """A lock with one hash changed: the signed SBOM no longer matches it."""
    text = signed.lock.read_text()
    first = text.index("--hash=sha256:") + len("--hash=sha256:")
    other = tmp_path / "other.python.lock"
    other.write_text(text[:first] + "0" * 64 + text[first + 64:])
    result = _verify(signed, signed.ref, "--lock", str(other))
    assert result.rc == 10
    assert _line(result, "sbom").startswith("  FAILED sbom: other sha256 hashes than the "
                                            "lock's: flashinfer-python")
    assert _line(result, "signature").startswith("  ok")


def test_a_changed_layer_fails_naming_signature_and_digest(cosign: str, signed: Signed,
                                                           docker_client) -> None:  # type: ignore[no-untyped-def]
    """(a) another image pushed to the signed tag."""
    target = _copy(cosign, signed, "layer")
    docker_client.api.tag("local/standin-runtime:bookworm", *target.rsplit(":", 1))
    try:
        for _ in docker_client.api.push(target.rsplit(":", 1)[0], tag="copy", stream=True,
                                        decode=True):
            pass
        result = _verify(signed, target)
    finally:
        docker_client.api.remove_image(target)
    assert result.rc == 10
    line = _line(result, "signature")
    assert line.startswith("  FAILED signature: no signature verified by the key for sha256:")
    assert signed.digest not in line  # it names the digest the tag now has


def test_replaced_sbom_attestation_fails_naming_the_sbom(cosign: str, signed: Signed,
                                                         tmp_path: Path) -> None:
    """(b) the SBOM attestation replaced by one for another lock, signed with another key."""
    target = _copy(cosign, signed, "sbom")
    bom = json.loads((signed.record.parent / "sbom.cdx.json").read_text())
    bom["components"] = [c for c in bom["components"] if c["name"] != "torch"]
    forged = tmp_path / "forged.cdx.json"
    forged.write_text(json.dumps(bom))
    attested = _cosign(cosign, "attest", "--key", str(signed.other_key), "--type", "cyclonedx",
                       "--predicate", str(forged), "--replace", "--tlog-upload=false", "--yes",
                       f"{target.rsplit(':', 1)[0]}@{signed.digest}", env=signed.env)
    assert attested.returncode == 0, attested.stderr
    result = _verify(signed, target, "--lock", str(signed.lock))
    assert result.rc == 10
    assert _line(result, "sbom").startswith("  FAILED sbom: no cyclonedx attestation verified "
                                            "by the key")
    assert _line(result, "signature").startswith("  ok")
    assert _line(result, "provenance").startswith("  ok")


def test_altered_provenance_fails_naming_the_provenance(cosign: str, signed: Signed,
                                                        tmp_path: Path) -> None:
    """(c) a provenance naming another profile, even signed with the right key."""
    target = _copy(cosign, signed, "provenance")
    statement = json.loads((signed.record.parent / "provenance.intoto.json").read_text())
    predicate = statement["predicate"]
    predicate["buildDefinition"]["externalParameters"]["profileHash"] = "sha256:" + "1" * 64
    altered = tmp_path / "altered.json"
    altered.write_text(json.dumps(predicate))
    attested = _cosign(cosign, "attest", "--key", str(signed.good_key), "--type",
                       "slsaprovenance1", "--predicate", str(altered), "--replace",
                       "--tlog-upload=false", "--yes",
                       f"{target.rsplit(':', 1)[0]}@{signed.digest}", env=signed.env)
    assert attested.returncode == 0, attested.stderr
    result = _verify(signed, target, "--record", str(signed.record))
    assert result.rc == 10
    assert _line(result, "provenance").startswith(
        "  FAILED provenance: names the profile hash sha256:" + "1" * 64)
    assert _line(result, "sbom").startswith("  ok")


def _registry(method: str, repo_ref: str, body: bytes | None = None,
              content_type: str = "") -> tuple[bytes, str]:
    name, tag = repo_ref.rsplit(":", 1)
    registry, repo = name.split("/", 1)
    request = urllib.request.Request(f"http://{registry}/v2/{repo}/manifests/{tag}",
                                     data=body, method=method)
    request.add_header("Accept", "application/vnd.oci.image.manifest.v1+json")
    if content_type:
        request.add_header("Content-Type", content_type)
    with urllib.request.urlopen(request, timeout=30) as resp:
        return resp.read(), resp.headers.get("Content-Type", "")


@pytest.mark.parametrize("how", ["replaced", "removed"])
def test_a_replaced_or_removed_signature_fails_naming_the_signature(cosign: str,
                                                                   signed: Signed,
                                                                   how: str) -> None:
    """(d) the signature in the `.sig` manifest replaced by another, or every signature
    layer taken out of it (distribution 2.8 refuses to delete a manifest by default)."""
    target = _copy(cosign, signed, f"sig-{how}")
    sig_tag = f"{target.rsplit(':', 1)[0]}:{signed.digest.replace(':', '-')}.sig"
    body, content_type = _registry("GET", sig_tag)
    manifest = json.loads(body)
    if how == "removed":
        manifest["layers"] = []
    for layer in manifest["layers"]:
        layer["annotations"]["dev.cosignproject.cosign/signature"] = base64.b64encode(
            b"\x30\x44" + os.urandom(68)).decode()
    _registry("PUT", sig_tag, json.dumps(manifest).encode(), content_type)
    result = _verify(signed, target)
    assert result.rc == 10
    assert _line(result, "signature").startswith(
        f"  FAILED signature: no signature verified by the key for {signed.digest}")
    assert _line(result, "sbom").startswith("  ok")
