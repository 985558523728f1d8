"""The CycloneDX SBOM: what each source becomes, validity against the CycloneDX 1.6 JSON
schema (cyclonedx-python-lib's strict validator), and that the validator refuses a broken
document, so a valid verdict means something."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from dockergen.trust import sbom
from dockergen.trust.verify import lock_problems

H1, H2, H3, H4 = ("1" * 64, "2" * 64, "3" * 64, "4" * 64)
# as `uv pip compile --generate-hashes` writes a lock (dockergen lock --python)
LOCK = f"""# dockergen-python-lock: {{"engine": "vllm==0.30.0"}}
nvidia-cublas==13.1.0.3 \\
    --hash=sha256:{H1} \\
    --hash=sha256:{H2}
    # via torch
    # from https://pypi.org/simple
torch==2.13.0+cu130 \\
    --hash=sha256:{H3}
    # via vllm
    # from https://download.pytorch.org/whl/cu130
Vllm[audio]==0.30.0 \\
    --hash=sha256:{H4}
    # via the profile
"""
DPKG = """Package: libc6
Status: install ok installed
Architecture: amd64
Source: glibc
Version: 2.36-9+deb12u10

Package: cuda-cudart-13-0
Status: install ok installed
Architecture: amd64
Version: 13.0.96-1

Package: removed-one
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0
"""
DIGEST = "sha256:" + "ab" * 32
BASES = {"nvidia/cuda:13.0.2-runtime-ubuntu22.04": "sha256:" + "cd" * 32}


def _inputs(**changes: object) -> sbom.SbomInputs:
    values: dict[str, Any] = dict(
        image="registry.example.com/llm/vllm", digest=DIGEST,
        lock=sbom.read_lock(LOCK, {}, "https://main.example.com/simple"), dpkg_status=DPKG,
        os_release='PRETTY_NAME="Ubuntu 22.04"\nID=ubuntu\n',
        source_builds=(sbom.SourceBuild("flash-attn", "2.8.3",
                                        "https://pypi.org/simple/flash-attn/", "80;90"),),
        bases=BASES)
    values.update(changes)
    return sbom.SbomInputs(**values)


def _by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in doc["components"]}


def _props(comp: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p["value"] for p in comp["properties"]}


def test_the_lock_is_read_with_hashes_and_indexes() -> None:
    dists = {d.name: d for d in sbom.read_lock(LOCK, {}, "https://main.example.com/simple")}
    assert dists["nvidia-cublas"].hashes == (H1, H2)
    assert dists["torch"].index == "https://download.pytorch.org/whl/cu130"
    # no `# from` comment: the index the caller names, here the default
    assert dists["vllm"] == sbom.LockedDist("vllm", "0.30.0", (H4,),
                                            "https://main.example.com/simple")


def test_every_source_becomes_components_and_the_document_is_valid() -> None:
    doc = sbom.sbom(_inputs())
    assert sbom.problems(doc) is None
    comps = _by_name(doc)
    assert comps["torch"]["purl"] == ("pkg:pypi/torch@2.13.0%2Bcu130?repository_url="
                                      "https://download.pytorch.org/whl/cu130")
    assert comps["nvidia-cublas"]["hashes"] == [{"alg": "SHA-256", "content": H1},
                                                {"alg": "SHA-256", "content": H2}]
    assert comps["libc6"]["purl"] == ("pkg:deb/ubuntu/libc6@2.36-9%2Bdeb12u10?arch=amd64"
                                      "&upstream=glibc")
    assert "removed-one" not in comps  # only what dpkg lists as installed
    # the CUDA libraries: which come from the lock and which from the base image
    assert _props(comps["nvidia-cublas"])["dockergen:cuda"] == "python-lock"
    assert _props(comps["cuda-cudart-13-0"])["dockergen:cuda"] == "base-image"
    assert "dockergen:cuda" not in _props(comps["libc6"])
    assert _props(comps["flash-attn"]) == {"dockergen:source": "source-build",
                                           "dockergen:cuda-archs": "80;90"}
    base = comps["nvidia/cuda"]
    assert base["purl"] == ("pkg:docker/nvidia/cuda@sha256:" + "cd" * 32
                            + "?tag=13.0.2-runtime-ubuntu22.04")
    assert doc["metadata"]["component"]["version"] == DIGEST


def test_the_document_is_deterministic() -> None:
    first, second = sbom.dumps(sbom.sbom(_inputs())), sbom.dumps(sbom.sbom(_inputs()))
    assert first == second and "timestamp" not in first
    other = sbom.sbom(_inputs(digest="sha256:" + "ef" * 32))
    assert other["serialNumber"] != json.loads(first)["serialNumber"]
    stamped = sbom.sbom(_inputs(epoch=0))
    assert stamped["metadata"]["timestamp"] == "1970-01-01T00:00:00Z"
    assert sbom.problems(stamped) is None


def _torch(doc: dict[str, Any]) -> dict[str, Any]:
    return _by_name(doc)["torch"]


@pytest.mark.parametrize(("break_it", "message"), [
    (lambda d: d["components"][0].pop("type"), "'type' is a required property"),
    (lambda d: d.update(surprise=1), "Additional properties are not allowed"),
    (lambda d: _torch(d)["hashes"].append({"alg": "SHA-256", "content": "xyz"}),
     "does not match"),
    (lambda d: _torch(d).update(purl=7), "7 is not of type 'string'"),
    (lambda d: d.update(specVersion="1.5"), "specVersion is '1.5', not '1.6'"),
])
def test_the_validator_rejects_a_broken_document(break_it: Any, message: str) -> None:
    doc = copy.deepcopy(sbom.sbom(_inputs()))
    break_it(doc)
    problem = sbom.problems(doc)
    assert problem is not None and message in problem


def test_the_sbom_against_a_lock_names_each_difference() -> None:
    doc = sbom.sbom(_inputs())
    assert lock_problems(doc, LOCK) == []
    other = (LOCK.replace(H3, "9" * 64).replace("nvidia-cublas==13.1.0.3", "nvidia-cublas==13.1.1")
             .replace("Vllm[audio]==0.30.0", "sglang==0.5.23"))
    assert lock_problems(doc, other) == [
        "1 locked distribution(s) missing: sglang",
        "other versions: nvidia-cublas (13.1.0.3 in the SBOM, 13.1.1 locked)",
        "other sha256 hashes than the lock's: torch",
        "1 distribution(s) the lock does not have: vllm"]
    # a hash the lock does not pin is a difference too, not only a missing one
    extra_hash = LOCK.replace(f"    --hash=sha256:{H2}\n", "")
    assert lock_problems(doc, extra_hash) == [
        "other sha256 hashes than the lock's: nvidia-cublas"]
