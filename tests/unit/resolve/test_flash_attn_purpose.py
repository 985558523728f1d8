"""A flash-attn build beside an engine with its own attention says what it is for.

The engine's note ("vLLM's own attention uses its bundled vllm-flash-attn") helps where a
profile builds FlashAttention-2 without saying why; a profile that says why in
``flash_attn.purpose`` is not warned on every render, and explain shows the purpose.
"""

from __future__ import annotations

from tests.conftest import PROFILES, run_cli

DESIGN_CARD = str(PROFILES / "a100-h100.yaml")


def test_an_unexplained_build_beside_vllm_warns() -> None:
    result = run_cli("validate", DESIGN_CARD, "--set", "flash_attn.purpose=")
    assert result.rc == 0, result.err
    (warning,) = [line for line in result.err.splitlines() if line.endswith("[warning]")]
    assert "a100-h100.yaml:12:10: flash_attn.build: vLLM's own attention uses its bundled " \
        "vllm-flash-attn, not this package" in warning
    assert "or say what uses it in flash_attn.purpose" in warning


def test_a_stated_purpose_silences_the_note_and_is_explained() -> None:
    quiet = run_cli("validate", DESIGN_CARD)
    assert quiet.rc == 0 and "[warning]" not in quiet.err, quiet.err
    explained = run_cli("explain", DESIGN_CARD).out.splitlines()
    (line,) = [x for x in explained if x.strip().startswith("flash-attn purpose")]
    assert 'transformers attn_implementation="flash_attention_2"' in line


def test_no_build_no_note() -> None:
    result = run_cli("validate", DESIGN_CARD, "--set", "flash_attn.purpose=",
                     "--set", "flash_attn.build=none")
    assert result.rc == 0 and "[warning]" not in result.err, result.err


def test_a_purpose_is_checked_like_any_text() -> None:
    result = run_cli("validate", DESIGN_CARD, "--set", "flash_attn.purpose=token hf_" + "a" * 34)
    assert result.rc == 2
    assert "looks like a credential" in result.err


def test_a_purpose_without_a_build_warns() -> None:
    result = run_cli("validate", DESIGN_CARD, "--set", "flash_attn.build=none")
    assert result.rc == 0
    # the warning of every field without effect (tests/unit/resolve/test_unused_fields.py)
    assert "flash_attn.purpose: has no effect with the rest of the profile" in result.err
    assert ("set flash_attn.build: source for it to count, or remove flash_attn.purpose "
            "[warning]") in result.err
