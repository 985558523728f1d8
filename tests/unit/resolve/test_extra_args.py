"""serving.extra_args cannot bypass the profile: derived flags, removed flags, JSON values."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dockerfile
import pytest

from dockergen.knowledge.facts import facts as known_facts
from dockergen.parts.engines.vllm import ENGINE
from dockergen.pipeline import resolution
from tests.conftest import ROOT, run_cli, shipped_names
from tests.support.bad_profile_cases import VALID

KNOWN = known_facts()  # the shipped knowledge

DISAGREE = ("given here it would silently win over the profile's value (explain, labels and "
            "the lock file would disagree with the server)")


def _render(tmp_path: Path, extra: str, text: str = VALID) -> tuple[int, str, str]:
    (tmp_path / "profile.yaml").write_text(text.replace(
        "  max_model_len: 8192", f"  max_model_len: 8192\n  extra_args: {extra}"))
    result = run_cli("render", "-q", "profile.yaml", cwd=tmp_path)
    return result.rc, result.out, result.err


def test_a_derived_flag_is_an_error_at_the_field(tmp_path: Path) -> None:
    """Was: `--tensor-parallel-size 2` won over the derived 1 that explain/labels showed."""
    rc, _, err = _render(tmp_path, '[--tensor-parallel-size, "2", --max_model_len=4096, -q, awq]')
    assert rc == 2
    assert err.splitlines()[:3] == [
        f"profile.yaml:20:16: serving.extra_args[0]: --tensor-parallel-size is derived from "
        f"serving.tensor_parallel_size; {DISAGREE}; set serving.tensor_parallel_size instead "
        "and remove '--tensor-parallel-size' and its value '2'",
        f"profile.yaml:20:45: serving.extra_args[2]: --max-model-len is derived from "
        f"serving.max_model_len; {DISAGREE}; set serving.max_model_len instead and remove "
        "'--max_model_len=4096'",
        f"profile.yaml:20:67: serving.extra_args[3]: -q is derived from quantization.weights; "
        f"{DISAGREE}; set quantization.weights instead and remove '-q' and its value 'awq'"]


def test_a_removed_flag_is_an_error(tmp_path: Path) -> None:
    """Was: --swap-space passed although the knowledge records it removed in vLLM 0.18."""
    rc, _, err = _render(tmp_path, "[--swap-space, '4']")
    assert rc == 2
    assert err.splitlines()[0] == (
        "profile.yaml:20:16: serving.extra_args[0]: --swap-space was removed in vllm 0.18.0 "
        "(VLLM commit 00b814ba5, PR #36216); the server would refuse to start; remove "
        "'--swap-space' and its value '4'; the CPU swap space is gone; size the KV cache with "
        "serving.gpu_memory_utilization")


def test_trtllm_derived_flag_is_an_error() -> None:
    result = run_cli("render", "-q", "h100-trtllm-fp8", "--set",
                     "serving.extra_args=[--tp_size, '2']")
    assert result.rc == 2
    assert "--tp_size is derived from serving.tensor_parallel_size" in result.err


def test_json_valued_flags_reach_the_server_as_one_argument(tmp_path: Path) -> None:
    """`--speculative-config '{...}'` and `--limit-mm-per-prompt={...}` are expressible."""
    spec = {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}
    mm = '--limit-mm-per-prompt={"image": 2, "note": "a $HOME \\\\ b"}'
    extra = json.dumps(["--enforce-eager", "--speculative-config", json.dumps(spec), mm])
    rc, out, err = _render(tmp_path, extra)
    assert rc == 0, err
    commands = dockerfile.parse_string(out)  # BuildKit's own parser
    cmd = [c for c in commands if c.cmd == "CMD"][-1].value
    assert list(cmd[-4:]) == ["--enforce-eager", "--speculative-config", json.dumps(spec), mm]
    assert json.loads(cmd[-2]) == spec


def test_malformed_json_is_rejected(tmp_path: Path) -> None:
    rc, _, err = _render(tmp_path, "['{\"method\": ngram}']")
    assert rc == 2
    assert "is not a flag like" in err and "or a JSON object or array" in err


def test_shipped_profiles_still_render() -> None:
    result = run_cli("validate", "-q", *sorted(str(p) for p in (ROOT / "profiles").glob("*.yaml")))
    assert result.rc == 0, result.err


def test_an_unknown_flag_is_rejected_with_the_wheel_as_source(tmp_path: Path) -> None:
    """Flags are checked against the release's real list (tools/vllm_flags.py)."""
    rc, _, err = _render(tmp_path, "[--enforce-eager, --no-enable-prefix-caching, --bogus-flag=1]")
    assert rc == 2
    first = err.splitlines()[0]
    assert first.startswith("profile.yaml:20:61: serving.extra_args[2]: vllm 0.32.0 has no "
                            "--bogus-flag flag (its server would exit with 'unrecognized "
                            "arguments'; VLLM-WHEEL 0.32.0 vllm-0.32.0-")
    assert len(err.splitlines()) == 2  # the known flag and its --no- form pass


@pytest.mark.parametrize("name", [n for n in shipped_names() if "trtllm" not in n
                                  and "sglang" not in n])
def test_every_flag_dockergen_derives_exists_in_the_release(name: str) -> None:
    ctx = resolution(Path(name), ("serving.max_num_seqs=8", "serving.served_model_name=x",
                                      "serving.enable_chunked_prefill=false",
                                      "serving.max_num_batched_tokens=65536"))
    flags = ENGINE.flag_list(KNOWN, ctx.resolved.profile.engine.version)
    assert flags is not None
    cmd = list(ctx.resolved.runtime.cmd)
    assert [a for a in cmd if a.startswith("--") and a not in flags
            and "--" + a[5:] not in flags] == []


@pytest.mark.network
def test_the_vllm_flag_list_matches_the_real_wheel() -> None:
    """Re-extract the flags of vllm 0.33.0 from its wheel on PyPI."""
    cache = Path(os.environ.get("DOCKERGEN_CACHE", Path.home() / ".cache" / "dockergen"))
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                    "--only-binary=:all:", "-d", str(wheels), "vllm==0.33.0"], check=True)
    wheel = next(wheels.glob("vllm-0.33.0-*.whl"))
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "vllm_flags.py"), str(wheel)],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == sorted(ENGINE.flag_list(KNOWN, "0.33.0") or [])
    assert "--swap-space" not in out  # removed in 0.18.0, as vllm/facts.yaml records
