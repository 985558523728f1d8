"""Every suggested fix, applied, gives a profile that the same rules accept.

A corpus of profiles spans every known engine release, CUDA version, GPU target (alone and
in pairs), quantization method, Python and flash-attn setting. Each error that offers a
fix must offer it as edits a machine can apply (:class:`~dockergen.errors.Edit`); each edit
is applied with ``--set`` and the profile validated again. The fix fails when the error it
fixes is still there, or when an error appears that was not there before (a fix that
passes its own field but fails a later rule).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from dockergen.api import resolve_profile
from dockergen.components import cuda, flash_attn
from dockergen.components.serving import ENGINES
from dockergen.errors import Problem, ProfileError, Severity
from tests.conftest import ROOT

PROFILES = {"vllm": "h100-fp8", "sglang": "h100-sglang-fp8",
            "tensorrt-llm": "h100-trtllm-fp8"}
GPUS = ["v100", "t4", "a10g", "a100", "l4", "l40s", "h100", "h200", "b200"]
WEIGHTS = ["auto", "fp16", "bf16", "fp8", "int8", "int4-awq", "gptq"]
KV = ["auto", "fp8", "int8"]
PYTHONS = ["3.9", "3.10", "3.11", "3.12", "3.13"]
SAMPLED = 1500  # random profiles on top of the one-dimension sweeps


def _errors(engine: str, overrides: tuple[str, ...]) -> list[Problem]:
    try:
        resolve_profile(ROOT / "profiles" / f"{PROFILES[engine]}.yaml", overrides)
    except ProfileError as exc:
        return [p for p in exc.problems if p.severity is Severity.ERROR]
    return []


def _key(p: Problem) -> tuple[str, str]:
    # the same rule failing on fewer or other targets after a change of gpu.targets is
    # the same problem (Problem.identity), not a new one
    return p.identity()


def _corpus() -> Iterator[tuple[str, tuple[str, ...]]]:
    """(engine, overrides): each release with every value of one dimension, then random
    combinations of all of them."""
    fa = list(flash_attn.facts()["releases"])
    dims = {"cuda.version": cuda.versions(),
            "gpu.targets": [f"[{g}]" for g in GPUS],
            "quantization.weights": WEIGHTS, "quantization.kv_cache": KV,
            "python": PYTHONS, "flash_attn.build": ["none", "source"],
            "flash_attn.version": fa}
    for engine in PROFILES:
        for release in ENGINES[engine].versions():
            base = (f"engine.version={release}",)
            yield engine, base
            for field, values in dims.items():
                for value in values:
                    extra = ("flash_attn.build=source",) if field == "flash_attn.version" \
                        else ()
                    yield engine, (*base, *extra, f"{field}={value}")
    rng = random.Random(20261203)
    for _ in range(SAMPLED):
        engine = rng.choice(list(PROFILES))
        targets = rng.sample(GPUS, rng.choice([1, 1, 2]))
        yield engine, (f"engine.version={rng.choice(ENGINES[engine].versions())}",
                       f"cuda.version={rng.choice(cuda.versions())}",
                       f"gpu.targets=[{', '.join(targets)}]",
                       f"quantization.weights={rng.choice(WEIGHTS)}",
                       f"quantization.kv_cache={rng.choice(KV)}",
                       f"python={rng.choice(PYTHONS)}",
                       f"flash_attn.build={rng.choice(['none', 'source'])}",
                       f"flash_attn.version={rng.choice(fa)}")


def test_every_fix_applied_gives_no_error_it_did_not_fix() -> None:
    profiles = checked = 0
    prose_only: dict[tuple[str, str], str] = {}
    no_fix: dict[tuple[str, str], str] = {}
    failed: dict[tuple[str, str, str], str] = {}
    for engine, overrides in _corpus():
        profiles += 1
        before = _errors(engine, overrides)
        keys = {_key(p) for p in before}
        for problem in before:
            if not problem.fix:
                no_fix.setdefault((problem.field, problem.message), " ".join(overrides))
            if problem.fix and not problem.edits:
                prose_only.setdefault((problem.field, problem.fix), " ".join(overrides))
            for edit in problem.edits:
                checked += 1
                after = _errors(engine, (*overrides, *edit.overrides()))
                left = [p for p in after if _key(p) == _key(problem)]
                new = [p for p in after if _key(p) not in keys]
                if left or new:
                    failed.setdefault((problem.field, problem.fix, " ".join(edit.overrides())),
                                      f"{engine} {' '.join(overrides)} -> "
                                      + "; ".join(str(p) for p in left + new))
    print(f"\n{profiles} profiles, {checked} fixes applied and validated again")
    assert not no_fix, "errors that offer no fix at all:\n" + "\n".join(
        f"{k}: {v}" for k, v in sorted(no_fix.items())[:40])
    assert not prose_only, "fixes offered in words only:\n" + "\n".join(
        f"{k}: {v}" for k, v in sorted(prose_only.items()))
    assert not failed, f"{len(failed)} fixes fail:\n" + "\n".join(
        f"{k}\n    {v}" for k, v in sorted(failed.items())[:40])
    assert profiles >= 2000 and checked >= 1000, (profiles, checked)


def test_an_error_whose_every_candidate_fails_says_so() -> None:
    """No error is left without something to do: when every candidate fix breaks another
    rule (here: a value no profile accepts), the fix says to fix the rest first."""
    from dockergen import resolve
    from dockergen.errors import Edit, Location
    from dockergen.loader import load_profile
    from dockergen.model import Inputs

    loaded = load_profile(ROOT / "profiles" / "h100-fp8.yaml")
    bad = Problem(Location("x"), "python", "a rule failed", edits=(
        Edit.set("python", "not-a-version"),))
    (proven,) = resolve._proven([bad], loaded, Inputs(python_lock=False))
    assert proven.edits == () and proven.fix == resolve.NO_ONE_CHANGE
