"""TensorRT-LLM and serving.served_model_name: refused, and the name it serves is in explain."""

from __future__ import annotations

from tests.conftest import run_cli


def test_served_model_name_is_refused_for_trtllm() -> None:
    """Before the fix: it was dropped silently, and the GPU smoke check then asked for that name."""
    result = run_cli("render", "-q", "h100-trtllm-fp8", "--set", "serving.served_model_name=llama")
    assert result.rc == 2
    assert result.err.splitlines()[0] == (
        "--set serving.served_model_name: serving.served_model_name: trtllm-serve (TensorRT-LLM "
        "1.1.0) has no verified flag for a served model name; the server names the model by "
        "its MODEL argument (serving.model); remove serving.served_model_name; clients use the "
        "serving.model value as the model name")


def test_explain_shows_the_name_trtllm_serves() -> None:
    result = run_cli("explain", "h100-trtllm-fp8")
    assert result.rc == 0, result.err
    lines = result.out.splitlines()
    i = next(i for i, line in enumerate(lines) if line.strip().startswith("served model name"))
    assert lines[i].split()[-1] == "/models/llama-3-8b-instruct-fp8"
    assert "no served-model-name flag" in lines[i + 1]


def test_vllm_still_maps_it() -> None:
    result = run_cli("render", "-q", "h100-fp8", "--set", "serving.served_model_name=llama")
    assert result.rc == 0, result.err
    assert '"--served-model-name", "llama"' in result.out
