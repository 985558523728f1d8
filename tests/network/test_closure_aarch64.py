"""The real aarch64 closure of vLLM 0.33.0 (profiles/gh200-vllm.yaml), resolved by uv from
PyPI for aarch64-manylinux_2_35 and CPython 3.12, has a wheel for every distribution on
the index; judged for a glibc older than its wheels need, the same closure is refused
naming torch and the wheels it has.

torch comes from PyPI here (build.torch_from: main-index: download.pytorch.org is not
reachable from CI; PyPI's torch 2.14.0 is the CUDA 13.0 build).
"""

from __future__ import annotations

import pytest

from dockergen.outputs import closure, pylock
from tests.conftest import PROFILES

pytestmark = [pytest.mark.network, pytest.mark.slow]


@pytest.fixture(scope="module")
def lock_text() -> str:
    res = pylock.lock_resolution(PROFILES / "gh200-vllm.yaml", ("build.torch_from=main-index",))
    inp = pylock.inputs_of(res)
    assert inp.platform == "aarch64-manylinux_2_35"
    return pylock.compile_lock(inp)


def test_every_distribution_of_the_aarch64_closure_has_a_wheel(lock_text: str) -> None:
    found = closure.verdicts(lock_text, "3.12", "aarch64-manylinux_2_35")
    assert len(found) > 100, len(found)
    assert [v for v in found if v.kind == "missing"] == []
    assert any(v.name == "vllm" and v.kind == "wheel" for v in found)
    assert any(v.name == "torch" and v.kind == "wheel" for v in found)


def test_the_same_closure_on_an_older_glibc_names_what_has_no_wheel(lock_text: str) -> None:
    with pytest.raises(closure.ClosureError) as err:
        closure.check(lock_text, "3.12", "aarch64-manylinux_2_17")
    message = str(err.value)
    assert "torch==2.14.0 (its wheels are for " in message, message
    assert "manylinux_2_28_aarch64" in message
    assert "vllm==0.33.0 (its wheels are for cp38 on manylinux_2_28_aarch64, " \
        "manylinux_2_28_x86_64" in message
