"""Every suggested fix, applied, gives a profile that the same rules accept.

A corpus of profiles spans every known engine release, CUDA version, GPU target (alone and
in pairs), quantization method, Python and flash-attn setting. Each error that offers a
fix must offer it as edits a machine can apply (:class:`~dockergen.errors.Edit`); each edit
is applied with ``--set`` and the profile validated again. The fix fails when the error it
fixes is still there, when an error appears that was not there before (a fix that
passes its own field but fails a later rule), or when a warning appears that was not there
before (a fix must pass every rule without a new warning: one that adds a warning is
offered only where every working fix does), and the first fix offered changes least.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from dockergen.api import resolve_profile
from dockergen.errors import Problem, ProfileError, Severity
from dockergen.knowledge.facts import facts as known_facts
from dockergen.parts import cuda
from dockergen.parts.engines import ENGINES
from dockergen.resolve.fold import NO_ONE_CHANGE
from tests.conftest import ROOT

KNOWN = known_facts()  # the shipped knowledge

PROFILES = {"vllm": "h100-fp8", "sglang": "h100-sglang-fp8",
            "tensorrt-llm": "h100-trtllm-fp8"}
GPUS = ["v100", "t4", "a10g", "a100", "l4", "l40s", "h100", "h200", "b200"]
WEIGHTS = ["auto", "fp16", "bf16", "fp8", "int8", "int4-awq", "gptq"]
KV = ["auto", "fp8", "int8"]
PYTHONS = ["3.9", "3.10", "3.11", "3.12", "3.13"]
OSES = ["ubuntu20.04", "ubuntu22.04", "ubuntu24.04"]
SAMPLED = 1500  # random profiles on top of the one-dimension sweeps


def _problems(engine: str, overrides: tuple[str, ...]) -> tuple[list[Problem], set[str]]:
    """(the errors, the fields warned about) of the profile. A warning is new where its
    field had none: the same rule warning with the values a fix changed (torch 2.13 ->
    2.14 "has no wheels for CUDA 13.1") is the warning the profile already had."""
    try:
        resolved = resolve_profile(ROOT / "profiles" / f"{PROFILES[engine]}.yaml", overrides)
    except ProfileError as exc:
        return ([p for p in exc.problems if p.severity is Severity.ERROR],
                {p.field for p in exc.problems if p.severity is Severity.WARNING})
    return [], {p.field for p in resolved.warnings}


def _unused_only(engine: str, overrides: tuple[str, ...], field: str) -> bool:
    """Every warning on ``field`` is the field-unused one."""
    from dockergen.resolve.context import UNUSED

    try:
        warnings = list(resolve_profile(ROOT / "profiles" / f"{PROFILES[engine]}.yaml",
                                        overrides).warnings)
    except ProfileError as exc:
        warnings = [p for p in exc.problems if p.severity is Severity.WARNING]
    return all(p.message.startswith(UNUSED) for p in warnings if p.field == field)


def _errors(engine: str, overrides: tuple[str, ...]) -> list[Problem]:
    return _problems(engine, overrides)[0]


Key = tuple[str, str]


def _key(p: Problem) -> Key:
    # the same rule failing on fewer or other targets after a change of gpu.targets is
    # the same problem (Problem.identity), not a new one
    return p.identity()


def _corpus() -> Iterator[tuple[str, tuple[str, ...]]]:
    """(engine, overrides): each release with every value of one dimension, then random
    combinations of all of them."""
    fa = list(KNOWN.flash_attn["releases"])
    dims = {"cuda.version": cuda.versions(KNOWN),
            "gpu.targets": [f"[{g}]" for g in GPUS],
            "quantization.weights": WEIGHTS, "quantization.kv_cache": KV,
            "python": PYTHONS, "flash_attn.build": ["none", "source"],
            "flash_attn.version": fa, "build.python_from": ["uv", "image"],
            "cuda.os": OSES}
    for engine in PROFILES:
        for release in ENGINES[engine].versions(KNOWN):
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
        yield engine, (f"engine.version={rng.choice(ENGINES[engine].versions(KNOWN))}",
                       f"cuda.version={rng.choice(cuda.versions(KNOWN))}",
                       f"gpu.targets=[{', '.join(targets)}]",
                       f"quantization.weights={rng.choice(WEIGHTS)}",
                       f"quantization.kv_cache={rng.choice(KV)}",
                       f"python={rng.choice(PYTHONS)}",
                       f"flash_attn.build={rng.choice(['none', 'source'])}",
                       f"flash_attn.version={rng.choice(fa)}",
                       f"build.python_from={rng.choice(['uv', 'uv', 'image'])}")


def test_every_fix_applied_gives_no_error_it_did_not_fix() -> None:
    profiles = checked = 0
    prose_only: dict[tuple[str, str], str] = {}
    no_fix: dict[tuple[str, str], str] = {}
    failed: dict[tuple[str, str, str], str] = {}
    new_warning: dict[tuple[str, str], str] = {}
    not_least: dict[tuple[str, str], str] = {}
    interlocked = 0
    warning_only = 0  # errors whose every working fix adds a warning
    for engine, overrides in _corpus():
        profiles += 1
        before, warned = _problems(engine, overrides)
        keys = {_key(p) for p in before}
        for problem in before:
            if not problem.fix:
                no_fix.setdefault((problem.field, problem.message), " ".join(overrides))
            if problem.fix == NO_ONE_CHANGE and len(before) >= 3:
                # several errors that interlock: every single change breaks another rule,
                # and the message says to fix the others first (resolve.NO_ONE_CHANGE)
                interlocked += 1
            elif problem.fix and not problem.edits:
                prose_only.setdefault((problem.field, problem.fix), " ".join(overrides))
            sizes = [len(e.overrides()) for e in problem.edits]
            if sizes and sizes[0] > min(sizes):  # the first fix offered changes least
                not_least.setdefault((problem.field, problem.fix), " ".join(overrides))
            adds: list[str] = []  # the new warnings of each fix offered, in order
            for edit in problem.edits:
                checked += 1
                after, warned_after = _problems(engine, (*overrides, *edit.overrides()))
                left = [p for p in after if _key(p) == _key(problem)]
                new = [p for p in after if _key(p) not in keys]
                if left or new:
                    failed.setdefault((problem.field, problem.fix, " ".join(edit.overrides())),
                                      f"{engine} {' '.join(overrides)} -> "
                                      + "; ".join(str(p) for p in left + new))
                # a fix that switches a feature off may leave its settings without effect
                # (the field-unused warning says to remove them): that is the fix itself
                added = {f for f in warned_after - warned if not _unused_only(
                    engine, (*overrides, *edit.overrides()), f)}
                adds.append(", ".join(sorted(added)))
            if any(adds) and not all(adds):  # a quiet fix existed: only quiet ones offered
                new_warning.setdefault((problem.field, problem.fix),
                                       f"{engine} {' '.join(overrides)} -> {adds}")
            warning_only += bool(adds) and all(adds)
    print(f"\n{profiles} profiles, {checked} fixes applied and validated again, "
          f"{interlocked} errors among 3 or more that no single change fixes, "
          f"{warning_only} whose every working fix adds a warning")
    assert not no_fix, "errors that offer no fix at all:\n" + "\n".join(
        f"{k}: {v}" for k, v in sorted(no_fix.items())[:40])
    assert not prose_only, "fixes offered in words only:\n" + "\n".join(
        f"{k}: {v}" for k, v in sorted(prose_only.items()))
    assert not failed, f"{len(failed)} fixes fail:\n" + "\n".join(
        f"{k}\n    {v}" for k, v in sorted(failed.items())[:40])
    assert not not_least, "a fix that changes more offered before one that changes less:\n" + (
        "\n".join(f"{k}: {v}" for k, v in sorted(not_least.items())[:40]))
    assert not new_warning, (
        f"{len(new_warning)} errors offer a fix that adds a warning beside one that does "
        "not:\n" + "\n".join(f"{k}\n    {v}" for k, v in sorted(new_warning.items())[:40]))
    assert profiles >= 2000 and checked >= 1000, (profiles, checked)


def test_an_error_whose_every_candidate_fails_says_so() -> None:
    """No error is left without something to do: when every candidate fix breaks another
    rule (here: a value no profile accepts), the fix says to fix the rest first."""
    from dockergen.errors import Edit, Location
    from dockergen.input.loader import load_profile
    from dockergen.parts.lineup import for_engine
    from dockergen.resolve import fold as resolve
    from dockergen.resolve.model import Inputs

    loaded = load_profile(ROOT / "profiles" / "h100-fp8.yaml")
    bad = Problem(Location("x"), "python", "a rule failed", edits=(
        Edit.set("python", "not-a-version"),))
    parts = for_engine(loaded.profile.engine.name, python_lock=False)
    (proven,) = resolve._proven([bad], loaded, parts, Inputs())
    assert proven.edits == () and proven.fix == resolve.NO_ONE_CHANGE
