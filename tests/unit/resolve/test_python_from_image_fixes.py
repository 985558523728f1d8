"""build.python_from: image with an OS whose python3 is not the profile's: the fixes offered
are another cuda.os whose python3 is the profile's, or python_from: uv, and a Python the
OS ships only where the engine release supports it; each is an edit, applied and valid."""

from __future__ import annotations

import pytest

from dockergen.errors import Severity
from dockergen.input.loader import load_profile
from dockergen.parts.lineup import for_engine
from dockergen.resolve.fold import check
from tests.conftest import PROFILES, run_cli


def _python_from_error(overrides: tuple[str, ...]):  # type: ignore[no-untyped-def]
    loaded = load_profile(PROFILES / "h100-fp8.yaml", overrides)
    ctx = check(loaded, for_engine(loaded.profile.engine.name))
    (problem,) = [p for p in ctx.problems if p.severity is Severity.ERROR
                  and p.field == "build.python_from"]
    return problem


def test_vllm_is_never_offered_a_python_it_does_not_support() -> None:
    # ubuntu22.04 ships 3.10; vLLM 0.33.0 needs >= 3.11
    problem = _python_from_error(("build.python_from=image",))
    offered = [e.overrides() for e in problem.edits]
    assert offered == [("build.python_from=uv",), ("cuda.os=ubuntu24.04",)], offered
    assert '"3.10"' not in problem.fix and "python=3.10" not in str(offered)


def test_an_os_python_the_engine_supports_is_offered_too() -> None:
    # TensorRT-LLM 1.1.0 supports 3.10 (and 3.12): the OS's python3 is a valid fix as well
    problem = _python_from_error(("engine.name=tensorrt-llm", "engine.version=1.1.0",
                                  "quantization.kv_cache=auto", "build.python_from=image"))
    offered = [e.overrides() for e in problem.edits]
    assert ("python=3.10",) in offered or ('python="3.10"',) in offered, offered


@pytest.mark.parametrize("extra", [(), ("engine.name=tensorrt-llm", "engine.version=1.1.0",
                                        "quantization.kv_cache=auto")])
def test_each_fix_offered_validates(extra: tuple[str, ...]) -> None:
    overrides = (*extra, "build.python_from=image")
    problem = _python_from_error(overrides)
    assert problem.edits
    for edit in problem.edits:
        sets = [a for o in (*overrides, *edit.overrides()) for a in ("--set", o)]
        out = run_cli("validate", str(PROFILES / "h100-fp8.yaml"), *sets)
        assert out.rc == 0, (edit.overrides(), out.err)


def test_the_error_is_raised_by_validate_with_file_line_and_fixes() -> None:
    out = run_cli("validate", "h100-fp8", "--set", "build.python_from=image")
    assert out.rc == 2 and "Traceback" not in out.err
    assert "ubuntu22.04 ships Python 3.10, but python is 3.12" in out.err
    assert "use build.python_from: uv" in out.err and "cuda.os: ubuntu24.04" in out.err
