"""FlashInfer's precompiled kernels where a vLLM release leaves them out.

Read from the wheels (vllm/facts.yaml ``flashinfer``, checked by
tests/unit/knowledge/test_vllm_quant.py):
vLLM 0.19.1-0.24.0 pull flashinfer-cubin themselves; 0.12.0-0.17.1 and >= 0.27.1 pull only
flashinfer-python. PyPI carries the matching flashinfer-cubin for the former; for the latter only
FlashInfer's own index does, which the profile names in build.flashinfer_index_url.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dockergen.api import resolve_profile
from dockergen.outputs import pylock
from tests.conftest import PROFILES, ROOT, run_cli
from tests.support.standin import build_index

H100 = PROFILES / "h100-fp8.yaml"  # vLLM 0.33.0: flashinfer-python 0.7.2.post1
FI = "https://flashinfer.ai/whl"
STANDIN = ROOT / "tests" / "profiles" / "standin.yaml"  # vLLM 0.30.0: flashinfer 0.6.18.post1


def _engine(*sets: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    r = resolve_profile(H100, sets)
    return r.engine.requirements, r.engine.indexes


def test_without_an_index_the_image_has_no_kernels_and_explain_says_why() -> None:
    reqs, indexes = _engine()
    assert not any(q.startswith("flashinfer-cubin") for q in reqs)
    assert FI not in indexes
    out = run_cli("explain", str(H100)).out.splitlines()
    i = next(n for n, line in enumerate(out) if line.strip().startswith("FlashInfer kernels"))
    assert out[i].split() == ["FlashInfer", "kernels", "not", "installed"]
    assert "set build.flashinfer_index_url to install them" in out[i + 1]


def test_with_the_index_the_matching_cubin_is_pinned_from_it() -> None:
    reqs, indexes = _engine(f"build.flashinfer_index_url={FI}")
    assert reqs == ("vllm==0.33.0", "flashinfer-cubin==0.7.2.post1")
    assert indexes[-1] == FI
    rendered = run_cli("render", "-q", str(H100), "--set", f"build.flashinfer_index_url={FI}")
    assert rendered.rc == 0, rendered.err
    assert f"--extra-index-url {FI} \\" in rendered.out
    assert "vllm==0.33.0 flashinfer-cubin==0.7.2.post1 torch==2.14.0" in rendered.out


def test_releases_whose_cubin_is_on_pypi_get_it_without_an_index() -> None:
    # vLLM 0.14.1 (torch 2.9.1, CUDA 12 wheels) pulls flashinfer-python 0.5.3 only
    reqs, indexes = _engine("engine.version=0.14.1", "cuda.version=12.8.1",
                            "quantization.kv_cache=auto")
    assert reqs == ("vllm==0.14.1", "flashinfer-cubin==0.5.3")
    assert len(indexes) == 1  # the PyTorch index only; the cubin comes from the main index


def test_releases_that_pull_the_cubin_themselves_add_nothing() -> None:
    result = run_cli("validate", str(H100), "--set", "engine.version=0.21.0",
                     "--set", f"build.flashinfer_index_url={FI}")
    assert result.rc == 0, result.err
    assert ("build.flashinfer_index_url: unused: vllm 0.21.0 takes no FlashInfer kernels from "
            "an extra index; remove build.flashinfer_index_url [warning]") in result.err
    reqs, _ = _engine("engine.version=0.21.0")
    assert reqs == ("vllm==0.21.0",)


def test_the_cubin_cannot_be_repinned_in_packages_pip() -> None:
    result = run_cli("validate", str(H100), "--set", f"build.flashinfer_index_url={FI}",
                     "--set", "packages.pip=[flashinfer-cubin==0.7.0]")
    assert result.rc == 2
    assert "flashinfer-cubin is pinned by dockergen (flashinfer-cubin==0.7.2.post1" in result.err


def test_the_python_lock_binds_the_cubin_to_the_flashinfer_index(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text(f"extends: h100-fp8\nname: p\nbuild:\n  flashinfer_index_url: {FI}\n")
    inp = pylock.inputs_of(pylock.lock_resolution(profile))
    assert (inp.flashinfer_cubin, inp.flashinfer_index) == ("flashinfer-cubin==0.7.2.post1", FI)
    assert inp.engine_index is None  # vLLM itself stays on the main index
    project = pylock._pyproject(inp, ("torch",))
    assert 'flashinfer-cubin = { index = "flashinfer" }' in project
    assert '"flashinfer-cubin==0.7.2.post1"' in project


def _smoke(*sets: str) -> dict[str, tuple[str, str, bool]]:
    r = resolve_profile(H100, sets)
    return {i.module: (i.dist, i.version, i.needs_gpu) for i in r.smoke_imports}


def test_the_smoke_test_imports_the_kernels_the_image_installs() -> None:
    assert "flashinfer_cubin" not in _smoke() and "flashinfer" not in _smoke()
    smoke = _smoke(f"build.flashinfer_index_url={FI}")
    assert smoke["flashinfer_cubin"] == ("flashinfer-cubin", "0.7.2.post1", False)
    # import flashinfer reads the device on some releases: without a GPU, the install counts
    assert smoke["flashinfer"] == ("flashinfer-python", "0.7.2.post1", True)


# --- for real: the stand-in index serves vLLM 0.30.0's FlashInfer and its kernels ----------
def _fresh_venv(tmp_path: Path) -> Path:
    subprocess.run([pylock.uv(), "venv", "-q", "--python", sys.executable,
                    str(tmp_path / "venv")], check=True)
    return tmp_path / "venv" / "bin" / "python"


def test_the_standin_refuses_kernels_of_another_version(tmp_path: Path) -> None:
    """flashinfer-python checks the flashinfer-cubin version (flashinfer/jit/env.py)."""
    files = build_index(tmp_path / "index")
    python = _fresh_venv(tmp_path)

    def install_and_import(cubin: str) -> subprocess.CompletedProcess[str]:
        wheels = [str(files / "flashinfer_python-0.6.18.post1-py3-none-any.whl"),
                  str(files / f"flashinfer_cubin-{cubin}-py3-none-any.whl")]
        subprocess.run([pylock.uv(), "pip", "install", "-q", "--python", str(python),
                        "--no-deps", "--reinstall", *wheels], check=True)
        return subprocess.run([str(python), "-c", "import flashinfer"], capture_output=True,
                              text=True, check=False)

    assert install_and_import("0.6.18.post1").returncode == 0
    wrong = install_and_import("0.6.13")
    assert wrong.returncode != 0
    assert ("flashinfer-cubin version (0.6.13) does not match flashinfer version "
            "(0.6.18.post1)") in wrong.stderr


@pytest.mark.daemon
def test_the_image_gets_the_matching_kernels_from_the_flashinfer_index(
        index: str, docker_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from dockergen.build.daemon.docker import DockerDaemon

    ctx = tmp_path / "ctx"
    result = run_cli("build", str(STANDIN), "--network", "host", "-q", "-o", str(ctx),
                     "--set", f"build.pip_index_url={index}/simple",
                     "--set", f"build.torch_index_url={index}",
                     "--set", f"build.flashinfer_index_url={index}/simple")
    assert result.rc == 0, result.err[-3000:]
    image = json.loads((ctx / "build-record.json").read_text())["image_id"]
    probe = ("import importlib.metadata as m, flashinfer; "
             "print(m.version('flashinfer-python'), m.version('flashinfer-cubin'))")
    code, out = DockerDaemon().run(image, ["-c", probe], entrypoint=["/opt/venv/bin/python"],
                                   timeout=120, run_id="flashinfer-test")
    assert code == 0, out
    assert out.split()[-2:] == ["0.6.18.post1", "0.6.18.post1"]


def test_the_smoke_version_check_fails_on_kernels_of_another_version(tmp_path: Path) -> None:
    """The product's own check (smoke.default_checks), run by a real Python against the
    stand-in wheels, passes with the matching kernels and fails with another version."""
    from dockergen.build.smoke import SmokeReport, default_checks

    files = build_index(tmp_path / "index")
    python = _fresh_venv(tmp_path)
    r = resolve_profile(STANDIN, (f"build.flashinfer_index_url={FI}",))
    name, command, verify = next(c for c in default_checks(r, {}, [], SmokeReport())
                                 if "import at the profile's versions" in c[0])
    assert command[0] == "/opt/venv/bin/python"

    def check(cubin: str) -> tuple[bool, str]:
        wheels = [str(files / "flashinfer_python-0.6.18.post1-py3-none-any.whl"),
                  str(files / f"flashinfer_cubin-{cubin}-py3-none-any.whl")]
        subprocess.run([pylock.uv(), "pip", "install", "-q", "--python", str(python),
                        "--no-deps", "--reinstall", *wheels], check=True)
        run = subprocess.run([str(python), *command[1:]], capture_output=True, text=True,
                             check=False)
        return verify(run.returncode, run.stdout)

    ok, detail = check("0.6.18.post1")
    assert "flashinfer" not in detail, detail  # torch and vllm are absent from this venv
    ok, detail = check("0.6.13")
    assert not ok
    assert "flashinfer_cubin is '0.6.13', expected 0.6.18.post1" in detail


SGLANG = PROFILES / "h100-sglang-fp8.yaml"  # SGLang 0.5.23: flashinfer-python[cu13] 0.7.2


def test_sglang_by_the_same_rule_has_no_kernels_and_explain_says_why() -> None:
    """SGLang pins flashinfer-python without its kernels, as vLLM 0.33.0 does: explain said
    nothing, and build.flashinfer_index_url was called unused."""
    r = resolve_profile(SGLANG)
    assert not any(q.startswith("flashinfer-cubin") for q in r.engine.requirements)
    out = run_cli("explain", str(SGLANG)).out.splitlines()
    i = next(n for n, line in enumerate(out) if line.strip().startswith("FlashInfer kernels"))
    assert out[i].split() == ["FlashInfer", "kernels", "not", "installed"]
    assert "sglang 0.5.23 pulls flashinfer-python 0.7.2 without" in out[i + 1]


def test_sglang_with_the_index_gets_the_matching_cubin_and_checks_it() -> None:
    result = run_cli("validate", str(SGLANG), "--set", f"build.flashinfer_index_url={FI}")
    assert result.rc == 0, result.err
    assert "unused" not in result.err
    r = resolve_profile(SGLANG, (f"build.flashinfer_index_url={FI}",))
    assert r.engine.requirements == ("sglang==0.5.23", "sglang-kernel==0.4.10",
                                     "flashinfer-python[cu13]==0.7.2", "flashinfer-cubin==0.7.2")
    assert r.engine.indexes[-1] == FI
    assert [(s.dist, s.version) for s in r.smoke_imports if s.dist.startswith("flashinfer")] == [
        ("flashinfer-cubin", "0.7.2"), ("flashinfer-python", "0.7.2")]


# --- a flashinfer-python pin PyPI never carried (vLLM 0.34.0: 0.7.3) ---------------------

def test_a_release_pinning_what_pypi_lacks_is_refused_from_pypi_with_a_release_that_installs(
        ) -> None:
    result = run_cli("validate", str(H100), "--set", "engine.version=0.34.0")
    assert result.rc == 2, result.err
    assert ("engine.version: vllm 0.34.0 requires flashinfer-python==0.7.3, which PyPI does "
            "not carry" in result.err)
    assert "the engine cannot be installed from PyPI; use vllm 0.33.0" in result.err
    fixed = run_cli("validate", str(H100), "--set", "engine.version=0.33.0")
    assert fixed.rc == 0, fixed.err


def test_from_a_mirror_it_is_a_warning_naming_the_mirror() -> None:
    mirror = "https://pypi.mirror.example/simple"
    result = run_cli("validate", str(H100), "--set", "engine.version=0.34.0",
                     "--set", f"build.pip_index_url={mirror}")
    assert result.rc == 0, result.err
    assert (f"which PyPI does not carry (VLLM-WHEEL 0.34.0 METADATA; PYPI flashinfer-python "
            f"and flashinfer-cubin (no 0.7.3: 0.7.2.post1, then 0.7.4; read 2026-12-03)); the "
            f"build must find it on {mirror}" in result.err)
    assert result.err.rstrip().endswith("[warning]")


@pytest.mark.network
def test_python_on_pypi_says_what_pypi_lists() -> None:
    """Every vLLM flashinfer row's flashinfer-python version is on PyPI unless the row says
    it is not (`python_on_pypi: false`), and then it really is not."""
    from dockergen.knowledge.facts import builtin_facts
    from dockergen.maint import pypi

    listed = set(pypi.project("flashinfer-python").get("versions", []))
    assert listed, "PyPI's flashinfer-python page lists no versions"
    for release, row in builtin_facts("serving/vllm")["flashinfer"].items():
        assert (row["python"] in listed) is row.get("python_on_pypi", True), release
