"""`validate` refuses every profile another command refuses, with the same problem lines.

The cases come from the check registry (dockergen/checks.py): for every registered check,
each example here (a shipped profile with `--set` overrides that the check refuses) is run
through each command the registry says refuses on that check: observe (its settings),
plan (capacity and tensor parallelism), render -o (the bake file's checks), render and
deploy (resolution). Each exits 2, and `validate` must refuse it too and print the same
problems: a profile that validates is one every command takes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dockergen.checks import CHECKS, RESOLUTION, ProfileCheck
from tests.conftest import run_cli

PROFILE = "h100-fp8"
# check of the registry (dockergen/checks.py) -> overrides of PROFILE it refuses
EXAMPLES: dict[str, list[tuple[str, ...]]] = {
    "resolution": [("cuda.devel_image=my_registry:5000/cuda:13.0.2-devel-ubuntu22.04",),
                   ("serving.env.PATH=/x",)],
    "bake": [("image.cache_ref=registry.example.com/cache/vllm:{nope}",),
             ("image.cache_ref=registry.example.com/cache/vllm",)],
    "observe": [("observe.rate_window=15s",)],
    "capacity": [("serving.hf_config=llama-3.1-70b", "serving.tensor_parallel_size=3"),
                 ("serving.hf_config=deepseek-v3",),
                 ("serving.hf_config=llama-3-8b", 'gpu.targets=["9.0"]')],
}
CASES = [(check, command, overrides) for check in (RESOLUTION, *CHECKS)
         for command in check.commands if command in ("render", "render -o", "deploy",
                                                      "observe", "plan")
         for overrides in EXAMPLES.get(check.name, [])]


def test_every_registered_check_has_examples_and_runnable_commands() -> None:
    """A check added to the registry needs an example here, and a command this test runs."""
    assert set(EXAMPLES) == {c.name for c in (RESOLUTION, *CHECKS)}
    for check in CHECKS:
        assert {"render -o", "observe", "plan"} & set(check.commands), check.name


def _command(kind: str, out: Path) -> list[str]:
    return {"observe": ["observe", PROFILE, "-q", "-o", str(out)],
            "plan": ["plan", PROFILE],
            "render -o": ["render", PROFILE, "-q", "-o", str(out)],
            "render": ["render", PROFILE, "-q"],
            "deploy": ["deploy", PROFILE, "--format", "k8s", "-q"]}[kind]


def _problems(err: str) -> list[str]:
    return [line for line in err.splitlines() if not line.startswith("dockergen:")]


@pytest.mark.parametrize(("check", "kind", "overrides"), CASES,
                         ids=[f"{c.name}-{k.replace(' ', '')}-{o[-1].split('=')[0]}"
                              for c, k, o in CASES])
def test_validate_refuses_what_a_command_refuses(check: ProfileCheck, kind: str,
                                                 overrides: tuple[str, ...],
                                                 tmp_path: Path) -> None:
    sets = [arg for o in overrides for arg in ("--set", o)]
    refused = run_cli(*_command(kind, tmp_path / "out"), *sets)
    assert refused.rc == 2, (kind, refused.err)
    assert not (tmp_path / "out").exists()
    validated = run_cli("validate", PROFILE, *sets)
    assert validated.rc == refused.rc, validated.out + validated.err
    assert "ok" not in validated.out
    assert _problems(refused.err) and set(_problems(refused.err)) <= set(
        _problems(validated.err)), (refused.err, validated.err)


def test_validate_reports_the_problems_of_every_check_at_once() -> None:
    """Each registered check runs: a profile the bake file and observe both refuse gets both
    problems in one run, not the first one's only."""
    result = run_cli("validate", PROFILE, "--set", "observe.rate_window=15s", "--set",
                     "image.cache_ref=registry.example.com/cache/vllm")
    assert result.rc == 2
    assert "observe.rate_window" in result.err and "image.cache_ref" in result.err, result.err
