"""SGLang, the third serving engine: facts, server command, stand-in and a real build.

The flag list comes from the real wheel (tools/sglang_flags.py, re-checked live in the
network test); the stand-in `sglang serve` accepts exactly that list and, like Triton,
compiles a C launcher before serving, so both fail here where the real server would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dockergen.api import resolve_profile
from dockergen.errors import ProfileError
from dockergen.knowledge.facts import facts as known_facts
from dockergen.parts.engines.sglang import ENGINE
from dockergen.parts.python import jit_check
from tests.conftest import ROOT, run_cli
from tests.support.standin import SGLANG_CLI, SGLANG_STANDIN_MODULES

KNOWN = known_facts()  # the shipped knowledge

PROFILE = ROOT / "profiles" / "h100-sglang-fp8.yaml"
STANDIN = ROOT / "tests" / "profiles" / "standin-sglang.yaml"
VARIANTS = [(), ("serving.enable_chunked_prefill=false", "serving.max_num_batched_tokens=9000"),
            ("serving.max_num_batched_tokens=4096",), ("quantization.weights=bf16",),
            ("quantization.weights=int4-awq", "quantization.kv_cache=fp8"),
            ("serving.served_model_name=llama",), ("engine.version=0.5.21", "python=3.11")]


@pytest.mark.parametrize("overrides", VARIANTS, ids=lambda v: ",".join(v) or "shipped")
def test_the_server_command_uses_only_flags_of_the_real_release(overrides: tuple[str, ...]
                                                                ) -> None:
    r = resolve_profile(PROFILE, overrides)
    flags = ENGINE.flag_list(KNOWN, r.profile.engine.version)
    assert flags is not None
    used = [a for a in list(r.runtime.cmd) if a.startswith("--")]
    assert used and set(used) <= flags, set(used) - flags
    assert list(r.runtime.entrypoint) == ["sglang", "serve"]


def test_the_profile_maps_to_sglang_flags() -> None:
    r = resolve_profile(PROFILE)
    cmd = list(r.runtime.cmd)
    pairs = dict(zip(cmd[::2], cmd[1::2], strict=False))
    assert pairs["--model-path"] == "/models/llama-3-8b-instruct"
    assert pairs["--host"] == "0.0.0.0" and pairs["--port"] == "30000"
    assert pairs["--context-length"] == "8192" and pairs["--mem-fraction-static"] == "0.9"
    assert pairs["--tp-size"] == "1" and pairs["--quantization"] == "fp8"
    assert pairs["--max-running-requests"] == "256" and cmd[-1] == "--enable-metrics"
    # the kernels are installed in lockstep with the release's own pins
    assert r.engine.requirements == ("sglang==0.5.23", "sglang-kernel==0.4.10",
                                     "flashinfer-python[cu13]==0.7.2")
    assert r.engine.torch == "2.14.1" and r.flash_attn is None
    # Triton builds its launcher at run time: a C compiler and libc headers, no nvcc
    assert {"gcc", "libc6-dev"} <= set(r.runtime.apt) and r.runtime.jit_c_compiler
    assert "curl" not in r.runtime.apt and not r.profile.runtime.jit_toolchain


def test_kv_cache_and_chunked_prefill_mapping() -> None:
    r = resolve_profile(PROFILE, ("quantization.kv_cache=fp8",
                                  "serving.enable_chunked_prefill=false",
                                  "serving.max_num_batched_tokens=9000"))
    cmd = list(r.runtime.cmd)
    assert cmd[cmd.index("--kv-cache-dtype") + 1] == "fp8_e4m3"
    assert cmd[cmd.index("--chunked-prefill-size") + 1] == "-1"
    assert cmd[cmd.index("--max-prefill-tokens") + 1] == "9000"


def test_an_unknown_extra_flag_is_rejected_before_any_build(tmp_path: Path) -> None:
    with pytest.raises(ProfileError) as exc:
        resolve_profile(PROFILE, ('serving.extra_args=["--swap-space", "4"]',))
    assert exc.value.lines() == [
        "--set serving.extra_args: serving.extra_args[0]: sglang 0.5.23 has no --swap-space "
        "flag (its server would exit with 'unrecognized arguments'); remove it; see "
        "`sglang serve --help` of that release"]
    ok = resolve_profile(PROFILE, ('serving.extra_args=["--enable-torch-compile"]',))
    assert list(ok.runtime.cmd)[-1] == "--enable-torch-compile"


def test_a_flash_attn_build_for_sglang_says_it_is_unused() -> None:
    # 0.5.21 pins torch 2.13.0, whose headers accept flash-attn's C++17 (0.5.23: torch
    # 2.14.1 refuses it, an error of its own: tests/unit/knowledge/test_knowledge_pypi.py);
    # flash-attn 2.8.2, the last without flash_attn/cute, which flash-attn-4 (an SGLang
    # requirement) ships too (2.8.3 on: an error, tests/unit/knowledge/test_closure_files.py)
    r = resolve_profile(PROFILE, ("flash_attn.build=source", "engine.version=0.5.21",
                                  "flash_attn.version=2.8.2"))
    notes = [str(w) for w in r.warnings if "flash_attn.build" in str(w)]
    assert len(notes) == 1 and "SGLang does not use Dao-AILab flash-attn" in notes[0]


def test_python_outside_the_wheels_is_an_error() -> None:
    with pytest.raises(ProfileError) as exc:
        resolve_profile(PROFILE, ("python=3.10",))
    assert any("sglang 0.5.23 requires Python >=3.11,<3.14, but python is 3.10" in line
               for line in exc.value.lines())


def test_unverified_floors_only_warn() -> None:
    # the fp8 KV cache's 8.9 floor is vLLM's, not read from SGLang: warn, not error, on an
    # A100 (which runs sglang-kernel's sm_80 code)
    r = resolve_profile(PROFILE, ("gpu.targets=[a100]", "quantization.kv_cache=fp8"))
    assert any("unverified" in str(w) and "kv_cache" in str(w) for w in r.warnings)


def test_shipped_profile_renders_and_lists() -> None:
    result = run_cli("render", str(PROFILE))
    assert result.rc == 0 and "ENTRYPOINT [\"sglang\", \"serve\"]" in result.out
    assert "h100-sglang-fp8" in run_cli("profiles").out


# --- the stand-in fails where the real server fails -------------------------------------
def _standin_package(tmp_path: Path) -> Path:
    pkg = tmp_path / "sglang"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "cli_impl.py").write_text(SGLANG_CLI)
    for name, text in SGLANG_STANDIN_MODULES.items():  # sglang.cli.main -> run_server
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    flags = ENGINE.flag_list(KNOWN, "0.5.23")
    assert flags is not None
    (pkg / "flags.json").write_text(json.dumps(sorted(flags)))
    return tmp_path


def _serve(root: Path, *args: str, env: dict[str, str] | None = None
           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from sglang.cli_impl import main; main()",
                           "serve", *args], cwd=root, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(root),
                               "TRITON_CACHE_DIR": str(root / "triton"), **(env or {})},
                          check=False)


def test_standin_sglang_rejects_a_flag_the_release_lacks(tmp_path: Path) -> None:
    root = _standin_package(tmp_path)
    result = _serve(root, "--model-path", "m", "--swap-space", "4")
    assert result.returncode == 2
    assert "unrecognized arguments: --swap-space 4" in result.stderr


def test_standin_sglang_needs_a_c_compiler_like_triton(tmp_path: Path) -> None:
    root = _standin_package(tmp_path)
    result = _serve(root, "--model-path", "m", "--port", "1",
                    env={"PATH": str(tmp_path / "empty"), "CC": ""})
    assert result.returncode != 0
    assert "Failed to find C compiler" in result.stderr


# --- real builds (daemon) ----------------------------------------------------------------
@pytest.mark.daemon
def test_sglang_image_builds_passes_smoke_and_serves(index: str, docker_client,  # type: ignore[no-untyped-def]
                                                     tmp_path: Path) -> None:
    from dockergen.build.daemon.docker import DockerDaemon

    ctx = tmp_path / "ctx"
    result = run_cli("build", str(STANDIN), "--network", "host", "-q", "--progress", "plain",
                     "-o", str(ctx), "--set", f"build.pip_index_url={index}/simple",
                     "--set", f"build.torch_index_url={index}")
    assert result.rc == 0, result.err[-3000:]
    record = json.loads((ctx / "build-record.json").read_text())
    checks = {c["name"]: c for c in record["smoke"]}
    assert all(c["ok"] for c in checks.values()), record["smoke"]
    jit = checks["a C extension compiles and imports (what Triton does at its first kernel)"]
    assert "compiled and imported a C extension with /usr/bin/gcc" in jit["detail"]
    assert "no compilers in the runtime image" not in checks
    # SGLang JIT-builds kernels at start-up: g++ is its host compiler; nvcc stays off PATH
    assert checks["no compiler on PATH but gcc and g++ (the engine's JIT host compiler)"]["ok"]
    image = docker_client.api.inspect_image(record["image_id"])
    assert image["Config"]["Entrypoint"] == ["sglang", "serve"]
    # the image's own server: the real flag list, Triton's launcher build, /health, one token
    daemon = DockerDaemon()
    ok, detail = daemon.serve_check(record["image_id"], 30000, "standin-model", timeout=90,
                                    run_id="sglang-test")
    assert ok, detail


@pytest.mark.daemon
def test_the_jit_check_fails_in_an_image_without_a_compiler(docker_client) -> None:  # type: ignore[no-untyped-def]
    from dockergen.build.daemon.docker import DockerDaemon

    # the stand-in devel image has python3 but, like a runtime image without the engine's
    # toolchain, no C compiler
    check = jit_check("/usr")
    code, out = DockerDaemon().run("local/standin-devel:bookworm", list(check.command[1:]),
                                   entrypoint=["python3"], timeout=120, run_id="jit-test")
    ok, detail = check.verify(code, out)
    assert not ok and "Failed to find C compiler" in out, detail


@pytest.mark.network
def test_the_flag_list_matches_the_real_wheel(tmp_path: Path) -> None:
    """Re-extract the flags of the newest known release from its wheel on PyPI."""
    cache = Path(os.environ.get("DOCKERGEN_CACHE", Path.home() / ".cache" / "dockergen"))
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                    "--only-binary=:all:", "--python-version", "3.11", "--platform",
                    "manylinux_2_34_x86_64", "-d", str(wheels), "sglang==0.5.23"], check=True)
    wheel = next(wheels.glob("sglang-0.5.23-*.whl"))
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "sglang_flags.py"), str(wheel)],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == sorted(ENGINE.flag_list(KNOWN, "0.5.23") or [])


@pytest.mark.parametrize(("extra", "message"), [
    ('["--port", "9000"]', "--port is set by serving.port; here it would silently override "
                           "the profile; set serving.port instead"),
    ('["--tensor-parallel-size=2"]', "--tensor-parallel-size is set by "
                                     "serving.tensor_parallel_size; here it would silently "
                                     "override the profile; set serving.tensor_parallel_size "
                                     "instead"),
    ('["--enable-metrics"]', "--enable-metrics is always passed by dockergen; remove it from "
                             "serving.extra_args"),
])
def test_extra_args_cannot_override_derived_flags(extra: str, message: str) -> None:
    with pytest.raises(ProfileError) as exc:
        resolve_profile(PROFILE, (f"serving.extra_args={extra}",))
    assert exc.value.lines() == [
        f"--set serving.extra_args: serving.extra_args[0]: {message}"]


def test_a_derived_flag_missing_from_the_release_is_an_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from dockergen.parts.engines import sglang

    real = ENGINE.flag_list(KNOWN, "0.5.23")
    assert real is not None
    monkeypatch.setattr(sglang.Sglang, "flag_list",
                        lambda self, known, version: real - {"--context-length"})
    with pytest.raises(ProfileError) as exc:
        resolve_profile(PROFILE)
    assert any("sglang 0.5.23 has no --context-length flag, which dockergen derives from "
               "serving.max_model_len; use a release that has it, or unset that field" in line
               for line in exc.value.lines())


def test_a_credential_hint_fits_the_engine() -> None:
    with pytest.raises(ProfileError) as exc:
        resolve_profile(PROFILE, ('serving.extra_args=["--api-key", "abc"]',))
    assert any("pass it at run time (an environment variable or a mounted secret)" in line
               and "VLLM" not in line for line in exc.value.lines())


def test_an_unverified_gpu_free_import_checks_the_install_instead() -> None:
    r = resolve_profile(PROFILE)
    sglang_import = next(i for i in r.smoke_imports if i.module == "sglang")
    assert sglang_import.needs_gpu and sglang_import.version == "0.5.23"
