"""The per-machine facts checked against the wheels on PyPI (aarch64's own builds).

`python -m dockergen.maint.knowledge platforms` reads every engine release's file list (which
machines, at which glibc) and the aarch64 kernel packages' libraries (their fatbin entries,
through range requests: ~60 MiB per vLLM wheel, ~10 MiB per sglang-kernel one) and fails on
any difference; a changed row is shown failing against the same wheels.
"""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest

from dockergen.maint import platforms
from tests.conftest import ROOT

pytestmark = [pytest.mark.network, pytest.mark.slow]


def test_the_per_machine_facts_equal_pypis_wheels() -> None:
    out = subprocess.run([sys.executable, "-m", "dockergen.maint.knowledge", "platforms"],
                         capture_output=True, text=True, check=False, timeout=1500, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 difference(s) between the per-machine facts and PyPI's wheels" in out.stdout


def test_a_changed_aarch64_row_is_a_difference() -> None:
    """The checker reads the wheels, not the facts: sass_75 added to sglang-kernel 0.4.10's
    aarch64 row, and an aarch64 wheel claimed for vLLM 0.9.1, are both found."""
    facts = copy.deepcopy(platforms.engines())
    sglang = facts["serving/sglang"]
    sglang["kernels_aarch64"] = {"0.4.10": sglang["kernels_aarch64"]["0.4.10"]}
    member = "sgl_kernel/sm90/common_ops.abi3.so"
    sglang["kernels_aarch64"]["0.4.10"]["code"][member].append("sass_75")
    sglang["wheel_platforms"] = {}
    vllm = facts["serving/vllm"]
    vllm["kernels_aarch64"] = {}
    vllm["wheel_platforms"] = {"0.9.1": {**vllm["wheel_platforms"]["0.9.1"], "aarch64": "2.28"}}
    found = platforms.differences(facts_of={k: facts[k] for k in ("serving/sglang",
                                                                  "serving/vllm")})
    assert len(found) == 2, found
    assert found[0].startswith("serving/sglang kernels_aarch64 0.4.10: the facts have")
    assert "sglang_kernel-0.4.10-cp310-abi3-manylinux2014_aarch64.whl" in found[0]
    assert found[1] == ("serving/vllm wheel_platforms 0.9.1: the facts have {'x86_64': '2.5', "
                        "'aarch64': '2.28'}, PyPI's wheels {'x86_64': '2.5'}")
