"""Suggested fixes never point at the failing value, and following them fixes the problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from dockergen.api import resolve_profile
from dockergen.errors import Problem, ProfileError
from tests.conftest import run_cli

WEIGHTS = ["auto", "fp16", "bf16", "fp8", "int8", "int4-awq", "gptq"]
KV = ["auto", "fp8", "int8"]
GPUS = ["v100", "t4", "a100", "l40s", "h100"]


def _field_problems(profile: str, overrides: tuple[str, ...], field: str) -> list[Problem]:
    try:
        resolve_profile(Path(profile), overrides)
    except ProfileError as exc:
        return [p for p in exc.problems if p.field == field and p.severity == "error"]
    return []


@pytest.mark.parametrize("profile", ["h100-fp8", "h100-trtllm-fp8"])
@pytest.mark.parametrize("gpu", GPUS)
def test_quantization_fixes_are_other_values_that_work(profile: str, gpu: str) -> None:
    """Before the fix: "fp16 needs cc >= 8.0 ... use fp16", "use kv_cache: auto" when auto failed,
    "use bf16 or int8" on V100 where both are invalid. (tests/unit/resolve/test_fix_property.py
    applies every fix of every rule; this keeps the cases the issue named.)"""
    base = (f"gpu.targets=[{gpu}]", "flash_attn.build=none")
    checked = 0
    for kind, values in (("weights", WEIGHTS), ("kv_cache", KV)):
        field = f"quantization.{kind}"
        for value in values:
            for problem in _field_problems(profile, (*base, f"{field}={value}"), field):
                if "needs compute capability" not in problem.message:
                    continue  # e.g. "has no int8 KV cache": not a capability problem
                checked += 1
                assert problem.fix, problem
                suggested = [v for e in problem.edits for k, v in e.sets if k == field]
                assert value not in suggested, problem
                # a single GPU cannot be dropped: the fix never says so
                assert f"drop {gpu}" not in problem.fix, problem
                for alt in suggested:
                    assert not [p for p in _field_problems(profile, (*base, f"{field}={alt}"),
                                                           field)
                                if "needs compute capability" in p.message], (value, alt,
                                                                               problem)
    if gpu in ("v100", "t4"):
        assert checked, "no capability problem provoked; the test proves nothing"


@pytest.mark.parametrize(("given", "hint"), [("rtx3090", None), ("b30", "b300"), ("h10", "h100"),
                                             ("l40", "l40s"), ("rtx409", "rtx4090")])
def test_gpu_name_guesses_stay_in_the_product_line(given: str, hint: str | None) -> None:
    """Before the fix: `rtx3090` got "did you mean rtx5090", another architecture."""
    result = run_cli("render", "-q", "h100-fp8", "--set", f"gpu.targets=[{given}]")
    assert result.rc == 2
    first = result.err.splitlines()[0]
    if hint is None:
        assert "did you mean" not in first
    else:
        assert f"did you mean {hint!r}?" in first


@pytest.mark.parametrize(("line", "field", "form"), [
    ("observe: {scrape_interval: 15}", "observe.scrape_interval", "Prometheus duration"),
    ("cuda: {version: 13.0}", "cuda.version", 'CUDA version like "13.0.2"'),
])
def test_quote_it_is_offered_only_when_quoting_is_enough(line: str, field: str, form: str,
                                                         tmp_path: Path) -> None:
    """`quote it: "15"` was refused next as not a duration: the fix names the form."""
    (tmp_path / "p.yaml").write_text(f"extends: h100-fp8\nname: p\n{line}\n")
    result = run_cli("validate", "p.yaml", cwd=tmp_path)
    assert result.rc == 2
    assert f"{field}: " in result.err and "write it as quoted text of the field's form" \
        in result.err and form in result.err
    assert "quote it:" not in result.err
