"""`explain`, the labels, the lock file and the server command agree on every field set.

For every shipped profile, and variants that set every serving field, the server command
is read back with BuildKit's own Dockerfile parser and compared with the lock file, the
derivations `explain` prints, and the labels.
"""

from __future__ import annotations

import json
from pathlib import Path

import dockerfile
import pytest

from dockergen.api import render_context
from tests.conftest import run_cli, shipped_names

SET_ALL = ("serving.max_model_len=4096", "serving.gpu_memory_utilization=0.85",
           "serving.max_num_batched_tokens=8192", "serving.max_num_seqs=64",
           "serving.tensor_parallel_size=2", "serving.enable_chunked_prefill=true",
           "serving.port=9000")
CASES = [(name, ()) for name in shipped_names()] + [
    ("h100-fp8", (*SET_ALL, "serving.served_model_name=llama")),
    ("h100-trtllm-fp8", SET_ALL),
    ("h100-sglang-fp8", (*SET_ALL, "serving.served_model_name=llama")),
    ("a100-bf16", ("serving.enable_chunked_prefill=false", "serving.max_num_batched_tokens=16384",
                   "serving.max_model_len=8192", "quantization.kv_cache=fp8")),
]
# the serving fields a profile can set, and the words `explain` uses for them
FIELDS = ("max_model_len", "gpu_memory_utilization", "max_num_batched_tokens", "max_num_seqs",
          "tensor_parallel_size", "served_model_name", "enable_chunked_prefill", "port", "host")


def _runtime(text: str) -> tuple[list[str], dict[str, str]]:
    commands = dockerfile.parse_string(text)
    last_from = max(i for i, c in enumerate(commands) if c.cmd == "FROM")
    runtime = commands[last_from:]
    cmd = list([c for c in runtime if c.cmd == "CMD"][-1].value)
    labels: dict[str, str] = {}
    for c in runtime:
        if c.cmd == "LABEL":
            labels.update({k: json.loads(v) for k, v in zip(c.value[::2], c.value[1::2],
                                                             strict=True)})
    return cmd, labels


@pytest.mark.parametrize(("name", "overrides"), CASES,
                         ids=[f"{n}{'+' + str(len(o)) if o else ''}" for n, o in CASES])
def test_explain_labels_lock_and_command_agree(name: str, overrides: tuple[str, ...],
                                               tmp_path: Path) -> None:
    ctx = render_context(Path(name), overrides)
    r = ctx.resolved
    lock = json.loads(ctx.files["dockergen.lock.json"])
    cmd, labels = _runtime(ctx.files["Dockerfile"].decode())
    # 1. the server command: Dockerfile == lock == resolved
    assert cmd == lock["resolved"]["cmd"] == list(json.loads(r.runtime.cmd))
    assert json.loads(r.runtime.entrypoint) == lock["resolved"]["entrypoint"]
    # 2. every `serve` derivation explain shows is in the command, once, with its value
    options = json.loads(next((d.value for d in r.derivations
                               if d.key == "serve --extra_llm_api_options"), "{}"))
    for d in r.derivations:
        if not d.key.startswith("serve ") or d.value == "(from the checkpoint)":
            continue
        flag = d.key.split(" ", 1)[1]
        assert cmd.count(flag) == 1, (flag, cmd)
        if d.value and flag != "--extra_llm_api_options":
            assert cmd[cmd.index(flag) + 1] == d.value, (flag, d.value, cmd)
    # 3. every serving field the profile sets is explained, and the explained value is it
    p = r.profile
    explained = " ".join(f"{d.key} {d.value} {d.reason}" for d in r.derivations)
    for field in FIELDS:
        value = getattr(p.serving, field)
        if value is None:
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if field in ("port", "host"):  # the address: in the command as given
            assert text in cmd, (field, cmd)
        elif field == "enable_chunked_prefill" and options:
            assert options["enable_chunked_prefill"] is value
        else:
            assert f"serving.{field}" in explained, (field, explained)
            assert text in cmd or (field == "enable_chunked_prefill"), (field, text, cmd)
    if p.quantization.kv_cache != "auto" and options:
        assert options["kv_cache_config"]["dtype"] == p.quantization.kv_cache
    # 4. labels say what the lock says
    assert labels["dockergen.profile.name"] == p.name == lock["profile"]["name"]
    assert labels["dockergen.profile.hash"] == lock["profile_hash"] == r.profile_hash
    assert labels["dockergen.quantization"] == (
        f"weights={p.quantization.weights},kv_cache={p.quantization.kv_cache}")
    assert labels["dockergen.engine"] == lock["resolved"]["engine"]
    assert labels["dockergen.torch"] == lock["resolved"]["torch"]
    assert labels["org.opencontainers.image.description"] == p.description
    for key, value in json.loads(p.serving.model_dump_json()).items():
        assert lock["profile"]["serving"].get(key) == value, key  # None: left out or null
    # 5. the CLI's explain prints the same derivations
    args = [a for o in overrides for a in ("--set", o)]
    out = run_cli("explain", name, *args).out
    for d in r.derivations:
        if d.key.startswith("serve "):
            shown = d.value.split() or ["(flag)"]
            assert any(line.split() == [*d.key.split(), *shown]
                       for line in out.splitlines()), (d.key, d.value)
