"""File ownership before the build: `dockergen lock --python` reads the RECORD of every locked
wheel from its index and refuses a closure in which two distributions write one path.

Real: uv's resolution, the lock, the RECORD files of real (tiny) wheels served over HTTP by
two local indexes shaped like PyPI and the PyTorch index (tests/support/twoindex.py), read whole
because http.server answers no range requests; the network test reads PyPI's wheels by
range requests.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dockergen.outputs import owners, pylock
from dockergen.resolve.model import MAIN_INDEX
from tests.conftest import PROFILES, run_cli
from tests.support.twoindex import PYPI_LIKE, PYTORCH_LIKE, build_index, serve

PROFILE = PROFILES / "h100-fp8.yaml"


def _lock(tmp_path: Path, extra: list[tuple[str, str, list[str], dict[str, str]]]
          ) -> tuple[int, str, Path]:
    needs = [e[0].replace("_", "-") for e in extra]  # vllm requires each extra package
    engine = [(n, v, [*r, *needs], f) if n == "vllm" else (n, v, r, f)
              for n, v, r, f in PYPI_LIKE]
    build_index(tmp_path / "idx" / "pypi" / "simple", [*engine, *extra])
    build_index(tmp_path / "idx" / "whl" / "cu130", PYTORCH_LIKE)
    profile = tmp_path / "p.yaml"
    profile.write_text("extends: h100-fp8\nname: owners\n")
    with serve(tmp_path / "idx") as base:
        result = run_cli("lock", "--python", str(profile),
                         "--set", f"build.pip_index_url={base}/pypi/simple",
                         "--set", f"build.torch_index_url={base}/whl",
                         env={"UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_NO_CONFIG": "1"})
    return result.rc, result.err, tmp_path / "p.python.lock"


def test_two_wheels_writing_one_file_are_refused_naming_both(tmp_path: Path) -> None:
    clash = [("colliding_a", "1.0", [], {"colliding_a/__init__.py": "A = 1\n",
                                         "shared_helpers/util.py": "WHO = 'a'\n"}),
             ("colliding_b", "2.0", [], {"colliding_b/__init__.py": "B = 1\n",
                                         "shared_helpers/util.py": "WHO = 'b'\n"})]
    rc, err, lock = _lock(tmp_path, clash)
    assert rc == 2, err
    assert ("colliding-a and colliding-b both write shared_helpers/util.py" in err), err
    assert "Traceback" not in err
    assert not lock.exists()  # nothing written


def test_a_known_harmless_shared_file_passes(tmp_path: Path) -> None:
    """python.yaml shared_files: flashinfer-python and torch-c-dlpack-ext both ship their
    build backend at the top of site-packages (read from the real wheels)."""
    shared = [("flashinfer_python", "0.7.2", [], {"flashinfer/__init__.py": "",
                                                  "build_backend.py": "# one\n"}),
              ("torch_c_dlpack_ext", "0.1.5", [], {"torch_c_dlpack_ext/__init__.py": "",
                                                   "build_backend.py": "# two\n"})]
    rc, err, lock = _lock(tmp_path, shared)
    assert rc == 0, err
    assert lock.is_file()


def test_a_closure_without_shared_files_is_locked(tmp_path: Path) -> None:
    rc, err, lock = _lock(tmp_path, [])
    assert rc == 0, err
    assert "not checked" not in err  # every artifact is a wheel whose RECORD was read
    text = lock.read_text()
    # every locked artifact is one the check looked up (by its sha256, on its index)
    assert len(owners.locked(text)) == len([line for line in text.splitlines()
                                             if "==" in line and not line.startswith("#")])


@pytest.mark.network
def test_pypi_closure_of_the_shipped_vllm_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM 0.33.0's real closure (PyPI's torch wheel standing in for the PyTorch index):
    every one of its ~200 wheels' RECORD is read by range requests. On 2026-12-03 uv resolves
    flashinfer-python's `cuda-python>=12.0` to cuda-python 12.6.2.post1, which carries its
    own cuda/bindings, next to cuda-bindings 13.5.0: the check names exactly that pair; with
    cuda-python pinned to a release that depends on cuda-bindings, nothing is shared."""
    monkeypatch.setenv("UV_CACHE_DIR", os.environ.get(
        "UV_CACHE_DIR", str(Path.home() / ".cache" / "dockergen" / "uv")))
    text = pylock.compile_lock(pylock.inputs_of(pylock.lock_resolution(PROFILE),
                                                torch_index=MAIN_INDEX))
    assert len(owners.locked(text)) > 100
    shared = owners.read(text).shared
    pairs = {tuple(names) for names in shared.values()}
    assert pairs <= {("cuda-bindings", "cuda-python")}, pairs
    if pairs:
        assert all(path.startswith("cuda/bindings/") for path in shared)
        pinned = pylock.compile_lock(pylock.inputs_of(pylock.lock_resolution(
            PROFILE, ('packages.pip=["cuda-python==13.0.3"]',)), torch_index=MAIN_INDEX))
        assert owners.read(pinned).shared == {}


def test_an_artifact_without_a_wheel_is_reported_unchecked_not_refused(tmp_path: Path) -> None:
    """An sdist's files are known only once it is built: the lock is not refused for it,
    and the artifact is named as not checked (the image's smoke check reads it later)."""
    build_index(tmp_path / "idx" / "pypi" / "simple", PYPI_LIKE)
    with serve(tmp_path / "idx") as base:
        index = f"{base}/pypi/simple"
        text = (f"certifi==2026.10.19 \\\n    --hash=sha256:{'0' * 64}\n    # from {index}\n"
                f"requests==2.33.0 \\\n    --hash=sha256:{'1' * 64}\n    # from {index}\n")
        found = owners.read(text)
    assert found.shared == {}
    assert found.unchecked == ["certifi==2026.10.19", "requests==2.33.0"]
