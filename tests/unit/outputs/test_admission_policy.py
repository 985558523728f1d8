"""The admission policy of ``deploy --format k8s --require-signature``, checked offline.

The ClusterImagePolicy is validated against the real CRD's OpenAPI schema (vendored in
tests/data/ from sigstore/policy-controller, its source in the file's header) with
``jsonschema``, the way the API server with strict field validation (kubectl's default since
1.27) reads it: an unknown field is an error. The CRD schema requires no field, so the
webhook's own required fields (policy-controller's clusterimagepolicy_validation.go: images
with a glob, authorities, each with exactly one of key/keyless/static) are checked beside
it. Broken policies show that both checks bite. The policy's globs are matched as
policy-controller's pkg/apis/glob/glob.go compiles them, against the Deployment's image.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.conftest import ROOT, run_cli

CRD = ROOT / "tests" / "data" / "policy-controller-clusterimagepolicy-crd.yaml"
PROFILE = ROOT / "tests" / "profiles" / "standin.yaml"
# an ECDSA P-256 SubjectPublicKeyInfo as `cosign generate-key-pair` writes cosign.pub
PUBLIC_KEY = """-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEWqJ8Q3vXn9TF3ZQ0lHk8X2rNqk7s
cG0b2cT3m3R2dY7l6pP1xk1GQ0G0Yw7F5V8pUuY4H0Q2s9fJ4h8x1kqX3A==
-----END PUBLIC KEY-----
"""
PRIVATE_KEY = """-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----
eyJrZGYiOnsibmFtZSI6InNjcnlwdCJ9LCJjaXBoZXIiOnsibmFtZSI6Im5hY2wv
-----END ENCRYPTED SIGSTORE PRIVATE KEY-----
"""


def _strict(schema: Any) -> Any:
    """The CRD schema with unknown fields refused (additionalProperties false on every
    object that lists its properties and does not preserve unknown fields)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if ("properties" in out and "additionalProperties" not in out
                and not out.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def _schema(api_version: str) -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    group, version = api_version.split("/")
    assert crd["spec"]["group"] == group
    served = {v["name"]: v for v in crd["spec"]["versions"] if v["served"]}
    schema = dict(_strict(served[version]["schema"]["openAPIV3Schema"]))
    # every object has these (the API server's ObjectMeta; not in a CRD's own schema)
    schema["properties"] = {**schema["properties"], "apiVersion": {"type": "string"},
                            "kind": {"type": "string"}, "metadata": {"type": "object"}}
    return schema


def _webhook_problems(policy: dict[str, Any]) -> list[str]:
    """The fields policy-controller's validating webhook requires (not in the CRD schema)."""
    spec, problems = policy.get("spec", {}), []
    if not spec.get("images") or any(not i.get("glob") for i in spec["images"]):
        problems.append("images: each needs a glob")
    if not spec.get("authorities"):
        problems.append("authorities: missing")
    for i, auth in enumerate(spec.get("authorities") or []):
        if sum(k in auth for k in ("key", "keyless", "static")) != 1:
            problems.append(f"authorities[{i}]: expected exactly one of key, keyless, static")
        key = auth.get("key")
        if key is not None and sum(k in key for k in ("data", "secretRef", "kms")) != 1:
            problems.append(f"authorities[{i}].key: expected exactly one of data, secretRef, kms")
    return problems


def check_policy(policy: dict[str, Any]) -> None:
    """Raise if the policy fails the CRD schema or the webhook's required fields."""
    jsonschema.validate(policy, _schema(policy["apiVersion"]))
    problems = _webhook_problems(policy)
    if problems:
        raise AssertionError("; ".join(problems))


def glob_matches(glob: str, image: str) -> bool:
    """policy-controller's glob.Compile: ``**`` any characters, ``*`` any but ``/``."""
    pattern = glob.replace(".", r"\.").replace("**", "#").replace("*", "[^/]*")
    return re.fullmatch(pattern.replace("#", ".*"), image) is not None


def _manifest(tmp_path: Path, *args: str) -> list[dict[str, Any]]:
    key = tmp_path / "cosign.pub"
    key.write_text(PUBLIC_KEY)
    result = run_cli("deploy", str(PROFILE), "--format", "k8s", "-q",
                     "--require-signature", str(key), *args)
    assert result.rc == 0, result.err
    return [d for d in yaml.safe_load_all(result.out) if d]


def _policy(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == "ClusterImagePolicy")


def test_the_policy_is_valid_against_the_real_crd_and_names_the_deployments_image(
        tmp_path: Path) -> None:
    docs = _manifest(tmp_path)
    policy = _policy(docs)
    check_policy(policy)
    assert policy["spec"]["authorities"][0]["key"]["data"] == PUBLIC_KEY
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    globs = [i["glob"] for i in policy["spec"]["images"]]
    assert any(glob_matches(g, image) for g in globs), (image, globs)
    repo = image.split("@")[0].rsplit(":", 1)[0]
    pinned = f"{repo}@sha256:{'a' * 64}"
    assert any(glob_matches(g, pinned) for g in globs)  # the digest-pinned Deployment too
    for other in (f"{repo}-other:1", f"{repo}/sub:1", "localhost:5000/elsewhere:1"):
        assert not any(glob_matches(g, other) for g in globs), other


def test_docker_hub_images_are_matched_by_their_qualified_name(tmp_path: Path) -> None:
    policy = _policy(_manifest(tmp_path, "--set", "image.name=acme/vllm"))
    globs = [i["glob"] for i in policy["spec"]["images"]]
    assert globs == ["index.docker.io/acme/vllm:**", "index.docker.io/acme/vllm@**"]
    check_policy(policy)


@pytest.mark.parametrize(("breakage", "expected"), [
    (lambda p: p["spec"]["authorities"][0].pop("key"), "exactly one of key"),
    (lambda p: p["spec"]["authorities"][0].update(keys=p["spec"]["authorities"][0].pop("key")),
     "Additional properties"),
    (lambda p: p["spec"]["authorities"][0].update(key="-----BEGIN PUBLIC KEY-----"),
     "is not of type 'object'"),
    (lambda p: p["spec"].update(images="localhost:5000/x:**"), "is not of type 'array'"),
    (lambda p: p["spec"].pop("images"), "images: each needs a glob"),
])
def test_the_validator_fails_a_broken_policy(tmp_path: Path, breakage: Any,
                                             expected: str) -> None:
    broken = copy.deepcopy(_policy(_manifest(tmp_path)))
    breakage(broken)
    with pytest.raises((jsonschema.ValidationError, AssertionError), match=re.escape(expected)):
        check_policy(broken)


def test_a_private_key_is_refused_and_never_shown(tmp_path: Path) -> None:
    key = tmp_path / "cosign.key"
    key.write_text(PRIVATE_KEY)
    out = tmp_path / "k8s.yaml"
    result = run_cli("deploy", str(PROFILE), "--format", "k8s", "-q",
                     "--require-signature", str(key), "-o", str(out))
    assert result.rc == 64, result.err
    assert "this is a private key" in result.err and "public-key --key" in result.err
    assert "eyJrZGYi" not in result.err + result.out
    assert "Traceback" not in result.err
    assert not out.exists()


@pytest.mark.parametrize(("content", "expected"), [
    (None, "no such file"),
    ("just text\n", "no PEM public key"),
    ("-----BEGIN PUBLIC KEY-----\nnot base64!\n-----END PUBLIC KEY-----\n", "no PEM public key"),
])
def test_a_missing_or_malformed_key_is_a_clear_error(tmp_path: Path, content: str | None,
                                                    expected: str) -> None:
    key = tmp_path / "cosign.pub"
    if content is not None:
        key.write_text(content)
    result = run_cli("deploy", str(PROFILE), "--format", "k8s", "-q",
                     "--require-signature", str(key))
    assert result.rc == 64, result.err
    assert expected in result.err and "--require-signature" in result.err
    assert result.out == ""


def test_a_kms_reference_is_written_as_the_keys_kms(tmp_path: Path) -> None:
    result = run_cli("deploy", str(PROFILE), "--format", "k8s", "-q",
                     "--require-signature", "gcpkms://projects/p/locations/l/keyRings/r/"
                     "cryptoKeys/k")
    assert result.rc == 0, result.err
    policy = _policy([d for d in yaml.safe_load_all(result.out) if d])
    assert policy["spec"]["authorities"][0]["key"]["kms"].startswith("gcpkms://")
    check_policy(policy)


def test_compose_takes_no_signature_policy(tmp_path: Path) -> None:
    key = tmp_path / "cosign.pub"
    key.write_text(PUBLIC_KEY)
    result = run_cli("deploy", str(PROFILE), "--format", "compose",
                     "--require-signature", str(key))
    assert result.rc == 64
    assert "--require-signature applies to --format k8s only" in result.err


def test_without_the_option_no_policy_is_written() -> None:
    result = run_cli("deploy", str(PROFILE), "--format", "k8s", "-q")
    assert result.rc == 0, result.err
    assert "ClusterImagePolicy" not in result.out
