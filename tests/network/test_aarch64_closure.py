"""The real aarch64 closure of the shipped vLLM profile, resolved by the lock's own function
against PyPI: every release the lock pins has an aarch64 or pure-Python wheel among its
hashes (never only an sdist or another CPU's wheels), torch, vLLM and Triton aarch64 ones.

Network-marked: CI reaches PyPI. The PyTorch index is not reachable from these machines;
torch 2.14.0 on PyPI is the CUDA 13.0 build, so PyPI serves the torch family here too.
"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from dockergen.outputs import pylock
from dockergen.resolve.model import MAIN_INDEX

pytestmark = pytest.mark.network

ROOT = Path(__file__).resolve().parents[2]
PYPI = MAIN_INDEX


def _files(name: str) -> dict[str, str]:
    """sha256 -> file name of every file of a project on PyPI (the simple API, PEP 691)."""
    request = urllib.request.Request(f"{PYPI}/{name}/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as resp:
        page = json.load(resp)
    return {f["hashes"]["sha256"]: f["filename"] for f in page["files"]
            if "sha256" in f.get("hashes", {})}


def test_vllm_arm64_closure_is_aarch64_wheels_only() -> None:
    res = pylock.lock_resolution(ROOT / "profiles/h100-fp8.yaml")
    inp = pylock.inputs_of(res, torch_index=PYPI)
    [(platform, arm)] = pylock.platform_inputs(inp, ("linux/arm64",))
    assert (platform, arm.platform.split("-")[0]) == ("linux/arm64", "aarch64")
    text = pylock.compile_lock(arm)
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\\n((?:\s+--hash=sha256:\S+(?: \\)?\n)+)",
                      text, re.M)
    assert len(pins) > 50, text[:2000]
    chosen: dict[str, list[str]] = {}
    for name, _version, hashes in pins:
        files = _files(name)
        chosen[name.lower()] = [files[h] for h in re.findall(r"sha256:([0-9a-f]{64})", hashes)
                                if h in files]
    # uv pins every file of a release (sdist and all wheels); what an aarch64 install can
    # take is a wheel for aarch64 or for any CPU: every pinned release must have one, never
    # only an sdist (a compile in the image) or another CPU's wheels
    installable = {n: [f for f in fs if re.search(r"(aarch64|-none-any)\.whl$", f)]
                   for n, fs in chosen.items()}
    assert {n: chosen[n] for n, fs in installable.items() if not fs} == {}
    for name in ("torch", "vllm", "triton"):
        assert installable[name] and all("aarch64" in f for f in installable[name]), (
            chosen.get(name))
