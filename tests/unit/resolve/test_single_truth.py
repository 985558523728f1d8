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

from dockergen.pipeline import resolution
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
    ctx = resolution(Path(name), overrides)
    r = ctx.resolved
    lock = json.loads(ctx.files()["dockergen.resolved.json"])
    cmd, labels = _runtime(ctx.files()["Dockerfile"].decode())
    # 1. the server command: Dockerfile == lock == resolved
    assert cmd == lock["resolved"]["cmd"] == list(r.runtime.cmd)
    assert list(r.runtime.entrypoint) == lock["resolved"]["entrypoint"]
    # 2. every `serve` derivation explain shows is in the command, once, with its value
    options = json.loads(next((d.value for d in r.derivations
                               if d.key == "serve --extra_llm_api_options"), "{}"))
    for d in r.derivations:
        if not d.key.startswith("serve ") or d.value == "(from the checkpoint)":
            continue
        flag = d.key.split(" ", 1)[1]
        if flag == "MODEL":  # the positional model argument comes first
            assert cmd[0] == d.value, (d.value, cmd)
        elif flag == "ARG":  # a plain argument of serving.extra_args
            assert d.value in cmd, (d.value, cmd)
        elif d.value and f"{flag}={d.value}" in cmd:  # an extra argument given as --a=1
            assert not any(a == flag or a.startswith(flag + "=") for a in cmd
                           if a != f"{flag}={d.value}"), (flag, cmd)
        else:
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
        if field == "enable_chunked_prefill" and options:
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
        if key == "hf_config":  # no image input itself: what it seeds is resolved.engine_jit
            assert (lock["resolved"].get("engine_jit") is not None) == (
                r.engine_jit is not None)
            continue
        assert lock["profile"]["serving"].get(key) == value, key  # None: left out or null
    # 5. the CLI's explain prints the same derivations
    args = [a for o in overrides for a in ("--set", o)]
    out = run_cli("explain", name, *args).out
    for d in r.derivations:
        if d.key.startswith("serve "):
            shown = d.value.split() or ["(flag)"]
            assert any(line.split() == [*d.key.split(), *shown]
                       for line in out.splitlines()), (d.key, d.value)


# Every other field a profile can set that reaches the image, per engine; the extra server
# arguments are real flags of each release (a flag, --a=1, a flag with its value, JSON).
EXTRA_ARGS = {
    "vllm": ["--enforce-eager", "--seed=7", "--speculative-config",
             '{"method": "ngram", "num_speculative_tokens": 4}'],
    "sglang": ["--disable-cuda-graph", "--random-seed=7", "--json-model-override-args",
               '{"rope_scaling": {"type": "linear", "factor": 2.0}}'],
    "tensorrt-llm": ["--trust_remote_code", "--log_level=info", "--num_postprocess_workers",
                     "2"],
}
PIP_INDEX = "https://pypi.mirror.example.com/simple"
ENGINE_INDEX = "https://wheels.mirror.example.com/engine"
ENV = {"APP_LOG_LEVEL": "debug", "OMP_NUM_THREADS": "8"}
LABELS = {"com.example.team": "inference", "com.example.cost-center": "llm-42"}


def _set_all(engine: str) -> tuple[str, ...]:
    return ("serving.extra_args=" + json.dumps(EXTRA_ARGS[engine]),
            "serving.env=" + json.dumps(ENV), "image.labels=" + json.dumps(LABELS),
            "runtime.uid=2345", "serving.health_start_period_s=1200",
            'packages.apt=["curl", "numactl"]', 'packages.pip=["hf-transfer==0.1.9"]',
            f"build.pip_index_url={PIP_INDEX}", f"build.engine_index_url={ENGINE_INDEX}",
            "serving.host=127.0.0.1", "serving.port=9100", "serving.model=/models/m")


def _pairs(values: tuple[str, ...]) -> dict[str, str]:
    return {k: (json.loads(v) if v.startswith('"') else v)
            for k, v in zip(values[::2], values[1::2], strict=True)}


def _explained(lines: list[str]) -> dict[str, list[tuple[str, str]]]:
    """`dockergen explain` output parsed by its columns: key -> [(value, why)]."""
    out: dict[str, list[tuple[str, str]]] = {}
    for line, why in zip(lines, lines[1:], strict=False):
        if line.startswith("  ") and not line.startswith("   ") and why.lstrip().startswith(
                "why: "):
            column = len(why) - len(why.lstrip()) - 2  # the value column (cli.explain)
            out.setdefault(line[2:column].strip(), []).append(
                (line[column:], why.lstrip()[len("why: "):]))
    return out


@pytest.mark.parametrize("name", ["h100-fp8", "h100-sglang-fp8", "h100-trtllm-fp8"])
def test_every_field_the_profile_sets_is_in_explain_the_dockerfile_and_the_lock(
        name: str) -> None:
    """Before the fix: explain left out extra_args, env, labels, uid, the health start period,
    packages.apt, both index URLs and vLLM's model/host/port; the lock left out the main
    index. Each value is read back from the parsed Dockerfile, the lock and explain."""
    engine = resolution(Path(name)).resolved.profile.engine.name
    overrides = _set_all(engine)
    ctx = resolution(Path(name), overrides)
    lock = json.loads(ctx.files()["dockergen.resolved.json"])
    commands = dockerfile.parse_string(ctx.files()["Dockerfile"].decode())
    last_from = max(i for i, c in enumerate(commands) if c.cmd == "FROM")
    build, runtime = commands[:last_from], commands[last_from:]
    cmd, labels = _runtime(ctx.files()["Dockerfile"].decode())
    env = {k: v for c in runtime if c.cmd == "ENV" for k, v in _pairs(c.value).items()}
    build_env = {k: v for c in build if c.cmd == "ENV" for k, v in _pairs(c.value).items()}
    runtime_run = " ".join(c.value[0] for c in runtime if c.cmd == "RUN").split()
    engine_run = next(c.value[0] for c in build if c.cmd == "RUN"
                      and "--index-strategy" in c.value[0]).split()
    health = next(c for c in runtime if c.cmd == "HEALTHCHECK")
    out = _explained(run_cli("explain", name, *[a for o in overrides
                                                  for a in ("--set", o)]).out.splitlines())

    def explains(key: str, value: str, field: str) -> None:
        assert any(v == value and f"from {field}" in why for v, why in out.get(key, [])), (
            key, value, field, out.get(key))

    # the server command: everything in the Dockerfile, the lock, and explain, in order
    extra = EXTRA_ARGS[engine]
    assert cmd == lock["resolved"]["cmd"]
    assert cmd[-len(extra):] == extra, cmd
    first = {"vllm": "MODEL", "tensorrt-llm": "MODEL", "sglang": "--model-path"}[engine]
    explains(f"serve {first}", "/models/m", "serving.model")
    assert cmd[cmd.index("--model-path") + 1 if first != "MODEL" else 0] == "/models/m"
    for flag, value in (("--host", "127.0.0.1"), ("--port", "9100")):
        explains(f"serve {flag}", value, f"serving.{flag[2:]}")
        assert cmd[cmd.index(flag) + 1] == value
    i = 0
    while i < len(extra):  # each extra flag with its value: --a, --a=1, or --a 1
        name_, _, value = extra[i].partition("=")
        if not value and i + 1 < len(extra) and not extra[i + 1].startswith("-"):
            value, i = extra[i + 1], i + 1
        explains(f"serve {name_}", value or "(flag)", "serving.extra_args")
        i += 1
    # serving.env and image.labels: the runtime stage's ENV and LABEL, and the lock
    for key, value in ENV.items():
        assert env[key] == value
        explains(f"env {key}", value, "serving.env")
    assert lock["profile"]["serving"]["env"] == ENV
    for key, value in LABELS.items():
        assert labels[key] == value
        explains(f"label {key}", value, "image.labels")
    assert lock["profile"]["image"]["labels"] == LABELS
    # runtime.uid: USER, the user the image creates, the label; the health start period
    assert [c.value for c in runtime if c.cmd == "USER"] == [("2345:2345",)]
    assert "2345" in runtime_run[runtime_run.index("--uid") + 1]
    assert labels["dockergen.runtime.uid"] == "2345" == str(lock["profile"]["runtime"]["uid"])
    explains("USER", "2345:2345", "runtime.uid")
    assert "--start-period=1200s" in health.flags
    explains("HEALTHCHECK --start-period", "1200s", "serving.health_start_period_s")
    # packages: apt in the runtime image, pip with the engine
    apt = runtime_run[runtime_run.index("--no-install-recommends") + 1:runtime_run.index("&&",
                      runtime_run.index("--no-install-recommends"))]
    for pkg in ("curl", "numactl"):
        assert pkg in apt
        explains("extra apt", pkg, "packages.apt")
    assert "hf-transfer==0.1.9" in engine_run
    explains("extra pip", "hf-transfer==0.1.9", "packages.pip")
    # the indexes: the build stages' main index and the engine's extra index
    assert build_env["PIP_INDEX_URL"] == build_env["UV_DEFAULT_INDEX"] == PIP_INDEX
    assert lock["resolved"]["main_index"] == PIP_INDEX
    explains("pip index", PIP_INDEX, "build.pip_index_url")
    assert engine_run[engine_run.index(ENGINE_INDEX) - 1] == "--extra-index-url"
    assert ENGINE_INDEX in lock["resolved"]["package_indexes"]
    explains("engine index", ENGINE_INDEX, "build.engine_index_url")


def test_the_lock_names_pypi_as_the_main_index_by_default() -> None:
    lock = json.loads(resolution(Path("h100-fp8")).files()["dockergen.resolved.json"])
    assert lock["resolved"]["main_index"] == "https://pypi.org/simple"
