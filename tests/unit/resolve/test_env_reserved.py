"""serving.env cannot replace the environment the image depends on."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.bad_profile_cases import VALID

FIX = "from serving.env (docker run -e {0}=... still overrides it at run time, on purpose)"


@pytest.mark.parametrize(("name", "why"), [
    ("PATH", "PATH is set by the runtime stage (the venv's bin first, where the server lives)"),
    ("NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_DRIVER_CAPABILITIES is set by dockergen to "
                                   "'compute,utility', which the image depends on"),
    ("HOME", "HOME is set by dockergen to '/home/app', which the image depends on"),
    ("VIRTUAL_ENV", "VIRTUAL_ENV is set by dockergen to '/opt/venv', which the image depends on"),
    ("LD_LIBRARY_PATH", "LD_LIBRARY_PATH is set by the CUDA base image so that libcuda is found"),
])
def test_reserved_env_name_is_an_error(name: str, why: str, tmp_path: Path) -> None:
    """Before the fix: serving.env PATH silently replaced dockergen's, and `vllm` was not found."""
    (tmp_path / "profile.yaml").write_text(VALID.replace(
        "  max_model_len: 8192", f"  max_model_len: 8192\n  env:\n    {name}: /usr/bin"))
    result = run_cli("render", "profile.yaml", cwd=tmp_path)
    assert result.rc == 2
    assert result.err.splitlines()[0] == (
        f"profile.yaml:21:{7 + len(name)}: serving.env.{name}: {why}; it cannot be overridden "
        f"here; remove {name} " + FIX.format(name))


def test_other_env_names_are_fine(tmp_path: Path) -> None:
    (tmp_path / "profile.yaml").write_text(VALID.replace(
        "  max_model_len: 8192", "  max_model_len: 8192\n  env:\n    VLLM_LOGGING_LEVEL: DEBUG"))
    result = run_cli("render", "-q", "profile.yaml", cwd=tmp_path)
    assert result.rc == 0, result.err
    assert 'VLLM_LOGGING_LEVEL="DEBUG"' in result.out
