"""`validate` refuses every profile another command refuses, with the same problem lines.

Each case is a profile (a shipped one with `--set` overrides) that one command refuses with
exit 2: observe (its settings check), plan (capacity and tensor parallelism), render -o
(the bake file's checks and the profile's fields), deploy (resolution). `validate` must
refuse it too and print the same problems: a profile that validates is one every command
takes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli

PROFILE = "h100-fp8"
CASES = [
    ("observe", ("observe.rate_window=15s",)),
    ("plan", ("serving.hf_config=llama-3.1-70b", "serving.tensor_parallel_size=3")),
    ("plan", ("serving.hf_config=deepseek-v3",)),
    ("plan", ("serving.hf_config=llama-3-8b", 'gpu.targets=["9.0"]')),
    ("bake", ("image.cache_ref=registry.example.com/cache/vllm:{nope}",)),
    ("bake", ("image.cache_ref=registry.example.com/cache/vllm",)),
    ("render", ("cuda.devel_image=my_registry:5000/cuda:13.0.2-devel-ubuntu22.04",)),
    ("deploy", ("serving.env.PATH=/x",)),
]


def _command(kind: str, out: Path) -> list[str]:
    return {"observe": ["observe", PROFILE, "-q", "-o", str(out)],
            "plan": ["plan", PROFILE],
            "bake": ["render", PROFILE, "-q", "-o", str(out)],
            "render": ["render", PROFILE, "-q"],
            "deploy": ["deploy", PROFILE, "--format", "k8s", "-q"]}[kind]


def _problems(err: str) -> list[str]:
    return [line for line in err.splitlines() if not line.startswith("dockergen:")]


@pytest.mark.parametrize(("kind", "overrides"), CASES,
                         ids=[f"{k}-{o[-1].split('=')[0]}" for k, o in CASES])
def test_validate_refuses_what_a_command_refuses(kind: str, overrides: tuple[str, ...],
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
