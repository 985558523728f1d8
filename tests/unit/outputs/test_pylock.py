"""The two-index trap: today's engine-stage command fails; the hashed lock passes.

Two real HTTP package indexes (tests/support/twoindex.py) shaped like PyPI and the PyTorch CUDA
index, the real uv (the version the images pin), and tiny real wheels.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from dockergen.api import shipped_single_images
from dockergen.knowledge.facts import facts as known_facts
from dockergen.outputs import pylock
from dockergen.parts import cuda
from dockergen.pipeline import resolution
from dockergen.resolve.model import MAIN_INDEX
from tests.conftest import PROFILES, ROOT, run_cli
from tests.support.twoindex import Indexes, two_indexes

KNOWN = known_facts()  # the shipped knowledge

PROFILE = PROFILES / "h100-fp8.yaml"  # vLLM 0.33.0, torch 2.14.0, CUDA 13.0 (cu130)


def _overrides(ix: Indexes) -> tuple[str, ...]:
    return (f"build.pip_index_url={ix.pypi}", f"build.torch_index_url={ix.pytorch_base}")


def _venv(tmp: Path) -> Path:
    subprocess.run([pylock.uv(), "venv", "-q", "--python", sys.executable, str(tmp / "venv")],
                   check=True)
    return tmp / "venv" / "bin" / "python"


def _uv_env(tmp: Path, ix: Indexes) -> dict[str, str]:
    # UV_DEFAULT_INDEX: what the rendered build-base stage sets from build.pip_index_url
    return {**os.environ, "UV_CACHE_DIR": str(tmp / "uv-cache"), "UV_NO_CONFIG": "1",
            "UV_DEFAULT_INDEX": ix.pypi}


def engine_stage_install(dockerfile: str) -> list[str]:
    """The engine stage's ``uv pip install`` command, exactly as rendered."""
    stage = dockerfile[dockerfile.index(" AS engine\n"):]
    stage = stage[:stage.index("\nFROM ")]
    run = next(block for block in stage.replace("\\\n", " ").splitlines()
               if block.startswith("RUN ") and "uv pip install" in block)
    command = run[run.index("uv pip install"):].split(" && ")[0]
    return shlex.split(command)


def test_the_engine_stage_resolves_on_two_indexes(tmp_path: Path) -> None:
    """Without a lock the rendered install passes where uv's first-index default fails.

    The PyTorch-like index carries older requests/pillow/certifi/setuptools and its own
    torch 2.14.0+cu130; PyPI carries the engine's newer pins and a torch 2.14.0 built for
    CUDA 12.8 (the stand-in torch reports the CUDA of the index that served it).
    """
    with two_indexes(tmp_path) as ix:
        rendered = run_cli("render", "-q", str(PROFILE), *sum((["--set", o] for o in
                                                               _overrides(ix)), []))
        assert rendered.rc == 0, rendered.err
        argv = engine_stage_install(rendered.out)
        assert f"--extra-index-url {ix.pytorch}" in " ".join(argv)
        assert "--index-strategy unsafe-best-match" in " ".join(argv)
        env = _uv_env(tmp_path, ix)

        # the constraints file the engine stage COPYs into the image (the build context's)
        constraints = tmp_path / "constraints.txt"
        constraints.write_text("".join(f"{c}\n" for c in cuda.major_constraints(KNOWN, "13.0.2")))

        def run(args: list[str], where: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
            python = _venv(where)
            args = [pylock.uv() if a == "uv" else str(python) if a == "/opt/venv/bin/python"
                    else str(constraints) if a == "/opt/dockergen/constraints.txt"
                    else a for a in args]
            return subprocess.run(args, capture_output=True, text=True, env=env,
                                  check=False), python

        # the command as it was rendered before: uv's default strategy
        i = argv.index("--index-strategy")
        old, _ = run(argv[:i] + argv[i + 2:], tmp_path / "old")
        assert old.returncode != 0
        assert f"`requests` was found on {ix.pytorch}, but not at the requested version" \
            in old.stderr
        new, python = run(argv, tmp_path / "new")
        assert new.returncode == 0, new.stderr
        got = subprocess.run([str(python), "-c", "import importlib.metadata as m, torch; "
                              "print(m.version('torch'), torch.version.cuda, "
                              "m.version('requests'))"],
                             capture_output=True, text=True, check=True).stdout.split()
    assert got == ["2.14.0+cu130", "13.0", "2.33.0"]


def test_the_hashed_lock_resolves_and_installs_on_two_indexes(tmp_path: Path) -> None:
    with two_indexes(tmp_path) as ix:
        inp = pylock.inputs_of(pylock.lock_resolution(PROFILE, _overrides(ix)))
        assert (inp.main_index, inp.torch_index) == (ix.pypi, ix.pytorch)
        text = pylock.compile_lock(inp)
        assert pylock.verify_sources(text, inp) == []
        pins = dict(re.findall(r"^([a-z0-9_.-]+)==(\S+)", text, re.M))
        assert pins == {"certifi": "2026.10.19", "pillow": "13.0.0", "requests": "2.33.0",
                        "setuptools": "78.1.1", "torch": "2.14.0+cu130", "vllm": "0.33.0"}
        # the lock beside a copy of the profile: resolution checks it and the engine stage
        # installs it with these arguments (the Dockerfile's own, not a copy of them)
        profiles = tmp_path / "profiles"
        profiles.mkdir()
        for name in ("h100-fp8.yaml", "base.yaml"):
            shutil.copy(PROFILES / name, profiles / name)
        lock = pylock.default_path(profiles / "h100-fp8.yaml")
        lock.write_text(text)
        stage = resolution(profiles / "h100-fp8.yaml", _overrides(ix)).resolved.engine
        assert stage.lock and stage.lock_args, "the lock was not taken"
        args = [*stage.lock_args, "-r"]
        python = _venv(tmp_path)
        proc = subprocess.run([pylock.uv(), "pip", "install", "--python", str(python),
                               *args, str(lock)],
                              capture_output=True, text=True, env=_uv_env(tmp_path, ix),
                              check=False)
        assert proc.returncode == 0, proc.stderr
        # the torch stand-in reports the CUDA of the index it was served from
        cuda = subprocess.run([str(python), "-c", "import torch; print(torch.version.cuda)"],
                              capture_output=True, text=True, check=True).stdout.strip()
        assert cuda == "13.0"
        # a lock whose torch hash is not the served file's is refused, whatever the index
        tampered = tmp_path / "tampered.lock"
        tampered.write_text(re.sub(r"(torch==\S+ \\\n\s+--hash=sha256:)[0-9a-f]{64}",
                                   r"\g<1>" + "0" * 64, text))
        python2 = _venv(tmp_path / "second")
        refused = subprocess.run([pylock.uv(), "pip", "install", "--python", str(python2),
                                  *args, str(tampered)],
                                 capture_output=True, text=True, env=_uv_env(tmp_path, ix),
                                 check=False)
    assert refused.returncode != 0
    assert "hash" in refused.stderr.lower()


def test_a_torch_family_package_from_the_main_index_is_refused(tmp_path: Path) -> None:
    with two_indexes(tmp_path) as ix:
        inp = pylock.inputs_of(pylock.lock_resolution(PROFILE, _overrides(ix)))
        text = pylock.compile_lock(inp)
    moved = text.replace(f"# from {ix.pytorch}", f"# from {ix.pypi}")
    assert pylock.verify_sources(moved, inp) == [f"torch comes from {ix.pypi}, not {ix.pytorch}"]


def test_lock_command_writes_and_checks(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text("extends: h100-fp8\nname: locked\n")
    with two_indexes(tmp_path / "idx") as ix:
        sets = sum((["--set", o] for o in _overrides(ix)), [])
        wrote = run_cli("lock", "--python", str(profile), *sets)
        assert wrote.rc == 0, wrote.err
        assert "wrote" in wrote.out and (tmp_path / "p.python.lock").is_file()
        assert run_cli("lock", "--python", "--check", str(profile), *sets).rc == 0
        stale = run_cli("lock", "--python", "--check", str(profile), *sets,
                        "--set", "engine.version=0.32.0")
    assert stale.rc == 2
    assert "the lock no longer matches the profile (engine: lock 'vllm==0.33.0', profile " \
           "'vllm==0.32.0'; torch: lock '2.14.0', profile '2.13.0')" in stale.err
    assert f"run `dockergen lock --python {profile}` to refresh it" in stale.err
    assert "Traceback" not in stale.err


def test_an_unreachable_index_is_exit_3_not_an_invalid_profile(tmp_path: Path) -> None:
    """uv's connect/DNS failures are the network's fault: exit 3, and no lock written."""
    profile = tmp_path / "p.yaml"
    profile.write_text("extends: h100-fp8\nname: locked\n")
    closed = "http://127.0.0.1:9"  # the discard port: nothing listens, connect is refused
    result = run_cli("lock", "--python", str(profile), "--set",
                     f"build.pip_index_url={closed}/simple", "--torch-index", f"{closed}/whl",
                     env={"UV_HTTP_RETRIES": "0"})
    assert result.rc == 3, result.err
    assert result.err.startswith("uv pip compile cannot reach the package index (Connection "
                                 "refused"), result.err
    assert not (tmp_path / "p.python.lock").exists()


@pytest.mark.parametrize(("args", "message"), [
    (("--python", "--python-platform", "bogus"), "--python-platform 'bogus': expected a Linux"),
    (("--python", "--python-platform", "x86_64-pc-windows-msvc"), "expected a Linux glibc"),
    (("--python", "--torch-index", "not a url"), "--torch-index 'not a url': expected an http"),
    (("--torch-index", "https://download.pytorch.org/whl/cu130"),
     "--python-platform and --torch-index go with --python"),
    (("--mirror", "nvidia/cuda=a b"), "--mirror 'nvidia/cuda=a b': expected SRC=DST"),
    (("--mirror", "nvidia/cuda=a\nb"), "expected SRC=DST repositories"),
    (("--mirror", "nvidia/cuda=https://registry.example.com/x"), "expected SRC=DST"),
    (("--mirror", "nvidia/cuda=registry.example.com/x:13"), "expected SRC=DST"),
])
def test_lock_options_are_checked_before_any_work(args: tuple[str, ...], message: str,
                                                  tmp_path: Path) -> None:
    """Before: uv or urllib met them (exit 2, or an InvalidURL traceback)."""
    profile = tmp_path / "p.yaml"
    profile.write_text("extends: h100-fp8\nname: locked\n")
    result = run_cli("lock", *args, str(profile))
    assert result.rc == 64, result.err
    assert message in result.err
    assert "Traceback" not in result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.yaml"]


def _pypi_shipped() -> list[str]:
    # TensorRT-LLM's wheels live on pypi.nvidia.com (PyPI has stub sdists), which these
    # machines cannot reach: its closure is not resolved here.
    # A matrix profile (fleet.yaml) is locked per variant, not as one closure.
    return [p.name for p in shipped_single_images() if p.stem != "h100-trtllm-fp8"]


@pytest.mark.network
@pytest.mark.parametrize("name", _pypi_shipped())
def test_shipped_profile_closure_resolves_on_pypi(name: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The real closure for the profile's machine (x86_64; aarch64 for gh200-vllm), from
    PyPI's metadata; the PyPI torch wheel of the same version stands in for the PyTorch
    index (download.pytorch.org is unreachable)."""
    monkeypatch.setenv("UV_CACHE_DIR", os.environ.get("UV_CACHE_DIR", str(pylock_cache())))
    inp = pylock.inputs_of(pylock.lock_resolution(PROFILES / name), torch_index=MAIN_INDEX)
    machine = "aarch64" if name == "gh200-vllm.yaml" else "x86_64"  # build.platform's
    assert inp.platform == f"{machine}-manylinux_2_35"  # ubuntu22.04's glibc
    text = pylock.compile_lock(inp)
    pins = dict(re.findall(r"^([a-z0-9_.-]+)==(\S+)", text, re.M))
    assert pins["torch"] == inp.torch
    assert f"{inp.engine.split('==')[0]}" in pins and len(pins) > 50
    hashed = re.findall(r"^([a-z0-9_.-]+)==\S+ \\\n\s+--hash=sha256:[0-9a-f]{64}", text, re.M)
    assert sorted(hashed) == sorted(pins)  # every artifact pinned by its sha256


def pylock_cache() -> Path:
    from dockergen.maint.pypi import cache_dir

    return cache_dir() / "uv"


def test_uv_of_the_lock_is_the_images_uv() -> None:
    out = subprocess.run([pylock.uv(), "--version"], capture_output=True, text=True,
                         check=True).stdout
    from dockergen.parts.python import tool

    assert out.split()[1] == tool(KNOWN, "uv")
    assert f'"uv=={tool(KNOWN, "uv")}"' in (ROOT / "pyproject.toml").read_text()


def test_the_rendered_engine_stage_installs_from_the_lock(tmp_path: Path) -> None:
    """The new engine stage, as rendered, passes where today's fails (same two indexes)."""
    profile = tmp_path / "p.yaml"
    profile.write_text("extends: h100-fp8\nname: locked\n")
    with two_indexes(tmp_path / "idx") as ix:
        sets = sum((["--set", o] for o in _overrides(ix)), [])
        assert run_cli("lock", "--python", str(profile), *sets).rc == 0
        ctx = tmp_path / "ctx"
        rendered = run_cli("render", "-q", str(profile), *sets, "-o", str(ctx))
        assert rendered.rc == 0, rendered.err
        dockerfile = (ctx / "Dockerfile").read_text()
        assert "COPY python.lock /opt/dockergen/python.lock" in dockerfile
        assert (ctx / "python.lock").read_bytes() == (tmp_path / "p.python.lock").read_bytes()
        argv = engine_stage_install(dockerfile)
        assert "--require-hashes" in argv and argv[-1] == "/opt/dockergen/python.lock"
        python = _venv(tmp_path)
        argv = [pylock.uv() if a == "uv" else str(python) if a == "/opt/venv/bin/python"
                else str(ctx / "python.lock") if a == "/opt/dockergen/python.lock" else a
                for a in argv]
        proc = subprocess.run(argv, capture_output=True, text=True,
                              env=_uv_env(tmp_path, ix), check=False)
        assert proc.returncode == 0, proc.stderr
        cuda = subprocess.run([str(python), "-c", "import torch; print(torch.version.cuda)"],
                              capture_output=True, text=True, check=True).stdout.strip()
        assert cuda == "13.0"
        # the profile moves on, the lock does not: render refuses, naming the fix
        stale = run_cli("render", str(profile), *sets, "--set", "engine.version=0.32.0")
    assert stale.rc == 2 and stale.out == ""
    assert "p.python.lock no longer matches the profile (engine: lock 'vllm==0.33.0', " \
           "profile 'vllm==0.32.0'; torch: lock '2.14.0', profile '2.13.0')" in stale.err
    assert f"run `dockergen lock --python {profile}` to refresh it, or delete it" in stale.err


def _lock_beside(tmp_path: Path) -> Path:
    """A profile with a lock whose header holds exactly the profile's inputs (no network)."""
    profile = tmp_path / "p.yaml"
    profile.write_text("extends: a100-bf16\nname: p\n")
    inputs = pylock.inputs_of(pylock.lock_resolution(profile))
    header = pylock.MARK + json.dumps(asdict(inputs), sort_keys=True)
    (tmp_path / "p.python.lock").write_text(header + "\ntorch==2.14.0 \\\n"
                                            "    --hash=sha256:" + "0" * 64 + "\n")
    return profile


def test_a_lock_for_another_glibc_is_stale(tmp_path: Path) -> None:
    """Review: the render accepted a lock resolved for ubuntu22.04's wheels in an ubuntu24.04
    image (and the other way round: wheels for a newer glibc fail at import)."""
    profile = _lock_beside(tmp_path)
    assert run_cli("render", "-q", str(profile)).rc == 0
    moved = run_cli("render", "-q", str(profile), "--set", "cuda.os=ubuntu24.04")
    assert moved.rc == 2
    assert ("platform: lock 'x86_64-manylinux_2_35', profile 'x86_64-manylinux_2_39'"
            in moved.err)
    assert "Traceback" not in moved.err


def test_a_lock_without_the_extra_packages_points_at_them(tmp_path: Path) -> None:
    profile = _lock_beside(tmp_path)
    result = run_cli("render", "-q", str(profile), "--set", "packages.pip=[einops==0.8.2]")
    assert result.rc == 2
    (line,) = [x for x in result.err.splitlines() if "no longer matches" in x]
    assert line.startswith("--set packages.pip: packages.pip: p.python.lock no longer matches "
                           "the profile (extra: lock [], profile ['einops==0.8.2'])")


@pytest.mark.network
def test_the_headline_profile_locks_on_pypi_with_the_engine_stages_constraints(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`lock --python` resolves under the constraints the engine stage installs under (the
    CUDA Python bindings at the CUDA major). Without them uv picked a cuda-python that
    carries cuda/bindings/* beside cuda-bindings, and the ownership check refused the
    shipped h100-fp8 profile's lock."""
    monkeypatch.setenv("UV_CACHE_DIR", os.environ.get("UV_CACHE_DIR", str(pylock_cache())))
    for name in ("h100-fp8.yaml", "base.yaml"):
        shutil.copy(PROFILES / name, tmp_path / name)
    result = run_cli("lock", "--python", str(tmp_path / "h100-fp8.yaml"),
                     "--torch-index", MAIN_INDEX)
    assert result.rc == 0, result.err
    text = (tmp_path / "h100-fp8.python.lock").read_text()
    assert '"constraints": ["cuda-bindings==13.*", "cuda-python==13.*"]' in text.splitlines()[0]
    versions = dict(re.findall(r"^(cuda-python|cuda-bindings)==(\S+)", text, re.M))
    assert {v.split(".")[0] for v in versions.values()} <= {"13"}, versions
