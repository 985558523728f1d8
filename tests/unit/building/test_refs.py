"""Image references: one grammar (dockergen/refs.py), and every reader of references agrees.

The table follows the distribution reference grammar (reference.go, regexp.go, normalize.go
of github.com/distribution/reference; digests as go-digest validates them). The second half
feeds the whole table to every place that reads a reference (the profile's fields, build's
--tag check, the daemon adapter, the registry client, bake's cache refs, deploy's record
check and its repository of a pushed reference) and requires the same answer as refs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from dockergen import refs
from dockergen.build.daemon import DaemonError, registry_of, split_reference
from dockergen.build.options import check_tags
from dockergen.errors import Location, ProfileError, UsageError
from dockergen.input.buildrecord import BuildRecord, RecordProblem, _reference
from dockergen.input.values import ImageRef, ImageRepo
from dockergen.outputs.deploy import _image_ref
from dockergen.outputs.fleet.bake import cache_ref
from dockergen.outputs.fleet.digests import RegistryError, parse_reference

H64 = "0123456789abcdef" * 4
D256 = f"sha256:{H64}"
D512 = "sha512:" + H64 * 2
LONG_NAME = "host:5000/" + "a" * 245  # 255 characters: the longest name
# (reference, (domain, path, tag, digest)) of valid references
VALID: list[tuple[str, tuple[str, str, str | None, str | None]]] = [
    ("ubuntu", ("", "ubuntu", None, None)),
    ("ubuntu:22.04", ("", "ubuntu", "22.04", None)),
    ("nvidia/cuda:13.0.2-devel-ubuntu22.04", ("", "nvidia/cuda", "13.0.2-devel-ubuntu22.04",
                                              None)),
    ("docker.io/library/ubuntu:latest", ("docker.io", "library/ubuntu", "latest", None)),
    ("localhost/x", ("localhost", "x", None, None)),
    ("localhost:5000/a/b:tag", ("localhost:5000", "a/b", "tag", None)),
    ("localhost:5000", ("", "localhost", "5000", None)),  # Docker Hub's localhost, tag 5000
    ("[::1]:5000/x", ("[::1]:5000", "x", None, None)),
    (f"host:5000/a:b@{D256}", ("host:5000", "a", "b", D256)),
    (f"nvidia/cuda@{D256}", ("", "nvidia/cuda", None, D256)),
    (f"x@{D512}", ("", "x", None, D512)),
    ("registry.example.com/llm/vllm:dg-0123456789ab",
     ("registry.example.com", "llm/vllm", "dg-0123456789ab", None)),
    ("my_registry/x", ("", "my_registry/x", None, None)),  # no '.', ':': a Hub path
    ("a__b/c-d---e/f.g_h", ("", "a__b/c-d---e/f.g_h", None, None)),
    ("Registry.Example.com/x", ("Registry.Example.com", "x", None, None)),
    ("x:_Tag.1-a", ("", "x", "_Tag.1-a", None)),
    ("x:" + "t" * 128, ("", "x", "t" * 128, None)),
    (LONG_NAME, ("host:5000", "a" * 245, None, None)),
]
INVALID = [
    "",
    "my_registry:5000/x",  # a host name has no '_'
    "Ubuntu",
    "nvidia/CUDA:13.0.2",
    "x:-tag",
    "x:.tag",
    "x:",
    "x:" + "t" * 129,
    LONG_NAME + "a",
    "a" * 240,  # docker.io/library/ + 240 > 255
    "x@sha256:abc",
    f"x@sha256:{H64.upper()}",
    "x@md5:" + "0" * 32,
    f"x@{D256}:tag",
    "a//b", "/a", "a/", "a..b", "a-", "-a", "a/.b",
    "host:port/x",
    "http://host/x",
    "user:pass@host/x",
    "x y", "x\n", "x;id", "x$y", "a/b c:d",
    H64,  # an image id
    "[::1/x",
]
VALID_REFS = [r for r, _ in VALID]
TABLE = VALID_REFS + INVALID


@pytest.mark.parametrize(("ref", "parts"), VALID)
def test_valid_references_parse_into_their_parts(
        ref: str, parts: tuple[str, str, str | None, str | None]) -> None:
    parsed = refs.parse(ref)
    assert (parsed.domain, parsed.path, parsed.tag, parsed.digest) == parts
    assert str(parsed) == ref


@pytest.mark.parametrize("ref", INVALID)
def test_invalid_references_are_refused_with_a_reason(ref: str) -> None:
    with pytest.raises(refs.InvalidReference) as exc:
        refs.parse(ref)
    assert str(exc.value)


def test_normalized_registry_and_repository() -> None:
    assert (refs.parse("ubuntu").registry, refs.parse("ubuntu").repository) == (
        "docker.io", "library/ubuntu")
    assert refs.parse("index.docker.io/nvidia/cuda").registry == "docker.io"
    assert refs.parse("docker.io/ubuntu").repository == "library/ubuntu"
    assert refs.parse("localhost:5000/ubuntu").repository == "ubuntu"
    with pytest.raises(refs.InvalidReference, match="must be lowercase"):
        refs.parse("nvidia/CUDA")


def test_tag_and_digest_requirements() -> None:
    assert refs.is_reference("x:1", tag=True, digest=False)
    assert not refs.is_reference("x", tag=True)
    assert not refs.is_reference(f"x:1@{D256}", digest=False)
    assert not refs.is_reference("x:1", tag=False)


# --- every reader of references agrees with refs on the whole table ---------------------
def _accepts(call: object, ref: str, errors: tuple[type[Exception], ...]) -> bool:
    try:
        call(ref)  # type: ignore[operator]
    except errors:
        return False
    return True


@pytest.mark.parametrize("ref", TABLE)
def test_every_reader_agrees_with_the_grammar(ref: str, tmp_path: Path) -> None:
    valid = refs.is_reference(ref)
    plain_tag = valid and refs.parse(ref).digest is None  # a reference build can tag
    tagged = plain_tag and refs.parse(ref).tag is not None
    # the profile's fields (cuda.*_image, --syntax) and repositories (image.name, --mirror)
    assert _accepts(TypeAdapter(ImageRef).validate_python, ref, (ValidationError,)) == valid
    assert _accepts(TypeAdapter(ImageRepo).validate_python, ref, (ValidationError,)) == (
        valid and refs.is_reference(ref, tag=False, digest=False))
    # build's --tag
    assert _accepts(lambda r: check_tags((r,)), ref, (UsageError,)) == plain_tag
    # bake's cache ref: a tag, no digest (an empty template is the default one)
    assert not ref or _accepts(lambda r: cache_ref(r, "registry.example.com/llm/vllm",
                                                   {"name": "t"}, Location("p.yaml", 1, 1)),
                               ref, (ProfileError,)) == tagged
    # deploy's record: references build wrote (the immutable tag needs its tag)
    assert _accepts(lambda r: _reference("k", r), ref, (RecordProblem,)) == plain_tag
    assert _accepts(lambda r: _reference("k", r, tag=True), ref, (RecordProblem,)) == tagged
    # the registry client and the daemon adapter: the same parts
    assert _accepts(parse_reference, ref, (RegistryError,)) == valid
    assert _accepts(split_reference, ref, (DaemonError,)) == valid
    if not valid:
        return
    parsed = refs.parse(ref)
    assert parse_reference(ref) == parsed
    assert split_reference(ref) == (parsed.name, parsed.digest or parsed.tag or "latest")
    assert registry_of(ref) == parsed.registry
    if plain_tag:
        record = BuildRecord("p", "h", "buildkit", (ref,), "x:dg-1", pushed={ref: D256})
        image, pinned = _image_ref(parsed.name, "dg-1", record, [])
        assert (image, pinned) == (f"{parsed.name}@{D256}", True)


def test_a_digest_reference_keeps_its_tag_everywhere() -> None:
    ref = f"host:5000/a:b@{D256}"
    assert parse_reference(ref).tag == "b"
    assert parse_reference(ref).digest == D256
    # the Engine API pulls the digest (the tag only names it), from the name without it
    assert split_reference(ref) == ("host:5000/a", D256)
