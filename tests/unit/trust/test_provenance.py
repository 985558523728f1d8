"""The provenance: an in-toto Statement v1 with a SLSA provenance v1 predicate, checked
against the required fields of the published specifications (no network), and what verify
compares with a build record."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dockergen import __version__
from dockergen.input.buildrecord import BuildRecord, Status
from dockergen.trust import provenance
from dockergen.trust.verify import record_problems

DIGEST = "sha256:" + "ab" * 32
BASE = "sha256:" + "cd" * 32
PROFILE_HASH = "sha256:" + "ef" * 32
BASES = {"local/standin-runtime:bookworm": BASE}


def _statement() -> dict[str, Any]:
    return provenance.statement(provenance.ProvenanceInputs(
        "localhost:5000/llm/vllm", DIGEST, "h100-fp8.yaml", "12" * 32, PROFILE_HASH,
        "localhost:5000/llm/vllm:dg-0123456789ab", BASES, "h100-fp8.python.lock", "34" * 32,
        {"builder": "buildkit"}))


def _record(**changes: object) -> BuildRecord:
    values: dict[str, Any] = dict(
        profile="h100-fp8", profile_hash=PROFILE_HASH, builder="buildkit",
        tags=("localhost:5000/llm/vllm:dg-0123456789ab",),
        immutable_tag="localhost:5000/llm/vllm:dg-0123456789ab", status=Status.PUSHED,
        pushed={"localhost:5000/llm/vllm:dg-0123456789ab": DIGEST}, bases=dict(BASES))
    values.update(changes)
    return BuildRecord(**values)


def test_the_statement_has_every_required_field() -> None:
    statement = _statement()
    assert provenance.shape_problems(statement) == []
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["subject"] == [{"name": "localhost:5000/llm/vllm",
                                     "digest": {"sha256": "ab" * 32}}]
    pred = statement["predicate"]
    assert pred["buildDefinition"]["externalParameters"]["profile"] == {
        "path": "h100-fp8.yaml", "digest": {"sha256": "12" * 32}}
    assert pred["buildDefinition"]["resolvedDependencies"] == [
        {"name": "h100-fp8.python.lock", "uri": "file:h100-fp8.python.lock",
         "digest": {"sha256": "34" * 32}},
        {"name": "local/standin-runtime:bookworm",
         "uri": f"pkg:docker/local/standin-runtime@{BASE}", "digest": {"sha256": "cd" * 32}}]
    assert pred["runDetails"]["builder"]["id"] == f"pkg:pypi/dockergen@{__version__}"


@pytest.mark.parametrize(("path", "problem"), [
    (("_type",), "_type: None, not https://in-toto.io/Statement/v1"),
    (("subject",), "subject: missing or empty (the image by digest)"),
    (("predicateType",), "predicateType: missing or not a str"),
    (("predicate", "buildDefinition", "buildType"),
     "buildDefinition.buildType: missing or not a str"),
    (("predicate", "buildDefinition", "externalParameters"),
     "buildDefinition.externalParameters: missing or not a dict"),
    (("predicate", "runDetails", "builder", "id"), "runDetails.builder.id: missing or not a str"),
    (("predicate", "runDetails"), "runDetails: missing or not a dict"),
])
def test_a_missing_required_field_is_named(path: tuple[str, ...], problem: str) -> None:
    statement = copy.deepcopy(_statement())
    parent = statement
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    assert problem in provenance.shape_problems(statement)


def test_a_subject_without_digest_and_a_dependency_without_uri_are_named() -> None:
    statement = copy.deepcopy(_statement())
    statement["subject"][0]["digest"] = {}
    statement["predicate"]["buildDefinition"]["resolvedDependencies"][0] = {"name": "x"}
    assert provenance.shape_problems(statement) == [
        "subject[0].digest: missing (a map of algorithm to hex)",
        "buildDefinition.resolvedDependencies[0]: a ResourceDescriptor needs uri, digest or "
        "content"]


def test_the_provenance_against_the_record() -> None:
    pred = _statement()["predicate"]
    assert record_problems(pred, _record(), DIGEST) == []
    other = "sha256:" + "99" * 32
    assert record_problems(pred, _record(profile_hash=other), DIGEST) == [
        f"names the profile hash {PROFILE_HASH}, the record {other}"]
    assert record_problems(pred, _record(bases={"local/standin-runtime:bookworm": other}),
                           DIGEST) == [f"does not name the base image "
                                       f"local/standin-runtime:bookworm as {other}"]
    assert record_problems(pred, _record(), other) == [
        f"the record's pushed digest is {DIGEST}, the image's is {other}"]
