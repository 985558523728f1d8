"""The Python lock per platform of a multi-platform image: each platform's closure is resolved
for its own CPU (the real uv, two real HTTP indexes), and a release without a wheel for a
platform is a verdict before any build, naming the distribution, version, platform and fix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dockergen import platforms
from dockergen.outputs import pylock
from tests.support.twoindex import two_indexes
from tests.unit.outputs.test_pylock import PROFILE, _overrides

X86_ONLY = "vllm-0.33.0-py3-none-manylinux_2_28_x86_64.whl"


def _x86_only_vllm(tmp: Path) -> None:
    """Serve vLLM as an x86_64 wheel only (as a release without aarch64 wheels is)."""
    files, page = tmp / "pypi/simple/files", tmp / "pypi/simple/vllm/index.html"
    (files / "vllm-0.33.0-py3-none-any.whl").rename(files / X86_ONLY)
    page.write_text(page.read_text().replace("vllm-0.33.0-py3-none-any.whl", X86_ONLY))


def test_each_platform_resolves_for_its_own_cpu(tmp_path: Path) -> None:
    with two_indexes(tmp_path) as ix:
        inp = pylock.inputs_of(pylock.lock_resolution(PROFILE, _overrides(ix)))
        both = pylock.platform_inputs(inp, ("linux/amd64", "linux/arm64"))
        assert [(p, i.platform.split("-")[0]) for p, i in both] == [
            ("linux/amd64", "x86_64"), ("linux/arm64", "aarch64")]
        assert {i.platform.split("-", 1)[1] for _, i in both} == {inp.platform.split("-", 1)[1]}
        locks = [pylock.compile_lock(i) for _, i in both]
        assert all(re.search(r"^vllm==0\.33\.0", t, re.M) for t in locks)
        assert ['"platform": "aarch64-' in t.splitlines()[0] for t in locks] == [False, True]
    own = platforms.platform_of(inp.platform)
    assert pylock.platform_path(PROFILE, own, own) == pylock.default_path(PROFILE)
    assert pylock.platform_path(PROFILE, "linux/arm64", own).name == (
        "h100-fp8.arm64.python.lock")


def test_a_platform_without_a_wheel_is_a_verdict_before_the_build(tmp_path: Path) -> None:
    with two_indexes(tmp_path) as ix:
        _x86_only_vllm(tmp_path)
        inp = pylock.inputs_of(pylock.lock_resolution(PROFILE, _overrides(ix)))
        (_, amd64), (_, arm64) = pylock.platform_inputs(inp, ("linux/amd64", "linux/arm64"))
        assert "vllm==0.33.0" in pylock.compile_lock(amd64)  # the x86_64 wheel serves amd64
        with pytest.raises(pylock.LockError) as caught:
            pylock.compile_lock(arm64)
    text = str(caught.value)
    assert f"vllm 0.33.0 has no wheel for {arm64.platform}" in text
    assert "manylinux_2_28_x86_64" in text  # where its wheels are
    assert "linux/arm64 image cannot install vllm==0.33.0" in text
    assert "fix: pin a release of vllm that publishes aarch64 wheels" in text


@pytest.mark.parametrize(("given", "problem"), [
    ("linux/amd64,linux/amd64", "named twice"),
    ("linux/amd64,windows/amd64", "an image index is built only for"),
    ("linux/amd64;linux/arm64", "not a platform"),
])
def test_platform_lists_refused_with_what_to_write(given: str, problem: str) -> None:
    with pytest.raises(platforms.PlatformError, match=problem):
        platforms.parse_list(given)
    assert platforms.parse_list("linux/amd64,linux/arm64") == ("linux/amd64", "linux/arm64")
