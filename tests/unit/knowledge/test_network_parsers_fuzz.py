"""Parsers of bytes from the network, fuzzed: each finishes within its deadline and raises
only dockergen's own errors, whatever an index or registry sends. Seeds are real answers:
a PEP 691 page and a PEP 503 page as PyPI serves them, a wheel built as the tests' index
serves them, an OCI image index."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dockergen.errors import DockergenError
from dockergen.net import index as outdated_index
from dockergen.net.ranges import RangeReader
from dockergen.outputs.fleet import digests
from tests.support.hostile import wheel

FUZZ = settings(max_examples=150, deadline=2000,
                suppress_health_check=[HealthCheck.too_slow])
URL = "https://index.example/simple/vllm/"
JSON_PAGE = json.dumps({"meta": {"api-version": "1.1"}, "name": "vllm", "files": [
    {"filename": "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl",
     "url": "../../files/vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl",
     "hashes": {"sha256": "ab" * 32}, "requires-python": ">=3.9", "yanked": False}]}).encode()
HTML_PAGE = (b'<!DOCTYPE html><html><body><a href="../../f/vllm-0.33.0.tar.gz#sha256='
             + b"cd" * 32 + b'" data-requires-python="&gt;=3.9">vllm-0.33.0.tar.gz</a><br/>'
             b"</body></html>")
WHEEL = wheel("0.35.0")
IMAGE_INDEX = json.dumps({"schemaVersion": 2, "mediaType": digests.INDEX_TYPES[0],
                          "manifests": [{"digest": "sha256:" + "e" * 64, "size": 1,
                                         "platform": {"os": "linux",
                                                      "architecture": "amd64"}}]}).encode()


def _mutations(seed: bytes) -> st.SearchStrategy[bytes]:
    """The seed with bytes changed, cut, or repeated (and arbitrary bytes)."""
    cut = st.integers(0, len(seed))
    return st.one_of(
        st.binary(max_size=2048),
        st.builds(lambda i, b: seed[:i] + b + seed[i + len(b):], cut, st.binary(max_size=16)),
        st.builds(lambda i: seed[:i], cut),
        st.builds(lambda i, n: seed[:i] + seed[i:i + 8] * n + seed[i:], cut,
                  st.integers(0, 64)),
    )


@FUZZ
@given(_mutations(JSON_PAGE), st.sampled_from(["application/vnd.pypi.simple.v1+json",
                                               "text/html"]))
@example(b"[" * 100_000, "application/vnd.pypi.simple.v1+json")
@example(b'{"files": [{"filename": "vllm-' + b"9" * 4301 + b'.tar.gz", "url": "x"}]}',
         "application/vnd.pypi.simple.v1+json")
def test_a_json_page_parses_or_is_refused(body: bytes, kind: str) -> None:
    try:
        found = outdated_index.parse_page(body, kind, URL, "vllm")
    except outdated_index.IndexReadError:
        return
    assert all(f.url.startswith(("http://", "https://")) for f in found)


@FUZZ
@given(_mutations(HTML_PAGE))
@example(b'<a href="file:///etc/passwd">vllm-0.34.0.tar.gz</a>')
def test_an_html_page_parses_or_is_refused(body: bytes) -> None:
    try:
        found = outdated_index.parse_page(body, "text/html", URL, "vllm")
    except outdated_index.IndexReadError:
        return
    assert all(f.url.startswith(("http://", "https://")) for f in found)


@FUZZ
@given(_mutations(WHEEL))
def test_a_wheel_is_read_through_ranges_or_refused(data: bytes) -> None:
    """zip directories and members, read as over range requests: only IndexReadError."""
    reader = RangeReader(len(data), lambda lo, hi: data[lo:hi], budget=1 << 20)
    try:
        text = outdated_index.member_text(outdated_index.open_zip(reader, "w.whl"),
                                    r"[^/]+\.dist-info/METADATA", "w.whl", 1 << 16)
    except outdated_index.IndexReadError:
        return
    assert len(text) <= 1 << 16


@FUZZ
@given(st.binary(max_size=64), st.integers(0, 4096))
def test_a_short_range_answer_is_an_error_never_a_loop(answer: bytes, size: int) -> None:
    reader = RangeReader(size, lambda lo, hi: answer[: hi - lo])
    try:
        data = io.BufferedReader(reader).read()
    except DockergenError:
        return
    assert len(data) == size


@FUZZ
@given(_mutations(IMAGE_INDEX))
@example(b"[" * 100_000)
@example(b'{"manifests": [{"platform": {"os": "linux", "architecture": "amd64"}}]}')
def test_a_manifest_parses_or_is_refused(body: bytes) -> None:
    try:
        manifest = digests._json_object(body, "refused")
        digest = digests._platform_entry(manifest, "img", "linux/amd64")
    except digests.RegistryError:
        return
    assert digest.startswith("sha256:")


def test_the_seeds_parse() -> None:
    """The fuzzers start from answers the parsers accept (so mutations test the edges)."""
    assert [f.name for f in outdated_index.parse_page(
        JSON_PAGE, "application/vnd.pypi.simple.v1+json", URL, "vllm")] == [
        "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl"]
    assert [f.sha256 for f in outdated_index.parse_page(HTML_PAGE, "text/html", URL, "vllm")] == [
        "cd" * 32]
    reader = RangeReader(len(WHEEL), lambda lo, hi: WHEEL[lo:hi])
    assert "Version: 0.35.0" in outdated_index.member_text(
        zipfile.ZipFile(reader), r"[^/]+\.dist-info/METADATA", "w")
    assert digests._platform_entry(json.loads(IMAGE_INDEX), "i", "linux/amd64") == (
        "sha256:" + "e" * 64)


@pytest.mark.parametrize("bad", ["tok\r\nX-A: b", "tok\x00", "t\u0100k"])
def test_header_values_with_control_characters_are_refused_unsaid(bad: str) -> None:
    from dockergen.net import http as net

    with pytest.raises(net.NetError) as caught:
        net.Credential.bearer(net.origin_of("https://r.example"), bad, "the token")
    assert bad not in str(caught.value) and "X-A" not in str(caught.value)
