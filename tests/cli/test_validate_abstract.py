"""`dockergen validate profiles/*.yaml` (what compat.yaml tells maintainers to run) passes."""

from __future__ import annotations

import glob
from pathlib import Path

from tests.conftest import ROOT, run_cli


def test_validate_every_shipped_profile_with_the_glob() -> None:
    """Before the fix: the abstract base.yaml made this exit 2."""
    files = sorted(glob.glob("profiles/*.yaml", root_dir=ROOT))
    assert "profiles/base.yaml" in files
    result = run_cli("validate", "-q", *files)
    assert result.rc == 0, result.err
    lines = result.out.splitlines()
    assert len(lines) == len(files)
    for f, line in zip(files, lines, strict=True):
        if f.endswith("base.yaml"):
            assert line == (f"{f}: ok (abstract: its fields are checked; the compatibility "
                            "rules run on the profiles that extend it)")
        else:  # a matrix profile lists its variants after "ok"
            assert line == f"{f}: ok" or line.startswith(f"{f}: ok: "), line
    facts = ROOT / "dockergen" / "parts" / "engines" / "vllm" / "facts.yaml"
    assert "validate profiles/*.yaml" in facts.read_text()  # what maintainers are told to run


def test_an_abstract_profile_is_checked_as_far_as_it_goes(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(
        "abstract: true\npython: 3.10\nserving: {prot: 1}\nengine: {version: \"0.33.0\"}\n")
    result = run_cli("validate", "base.yaml", cwd=tmp_path)
    assert result.rc == 2
    assert result.err.splitlines() == [
        'base.yaml:2:9: python: 3.10 is a number in YAML (read as 3.1), not text; '
        'quote it: python: "3.10"',
        "base.yaml:3:11: serving.prot: unknown key 'prot' (did you mean 'port'?); allowed keys "
        "here: model, served_model_name, host, port, max_model_len, gpu_memory_utilization, "
        "max_num_batched_tokens, max_num_seqs, enable_chunked_prefill, tensor_parallel_size, "
        "extra_args, env, health_start_period_s, hf_config",
        "dockergen: 2 problem(s); nothing was written"]  # missing fields are not problems


def test_an_abstract_profile_is_still_not_rendered() -> None:
    result = run_cli("render", "profiles/base.yaml")
    assert result.rc == 2
    assert "this profile only provides defaults for others" in result.err
