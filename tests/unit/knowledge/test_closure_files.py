"""Files two distributions of the image write, known before any lock: a source-built
FlashAttention-2 beside the engine's own requirements.

flash-attn 2.8.3 and later install the flash_attn.cute package (their sdists' SOURCES.txt);
SGLang requires flash-attn-4, which ships the same paths (its wheel's RECORD). Installed
together, the one written last silently replaces the other's files: `validate` refuses it
(rule fa2-file-clash) instead of leaving it to `lock --python` or the smoke test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dockergen.api import resolve_profile
from dockergen.errors import ProfileError
from dockergen.knowledge.facts import Facts
from dockergen.knowledge.facts import facts as known_facts
from tests.conftest import ROOT, run_cli

KNOWN = known_facts()  # the shipped knowledge

SOURCE = ("    git: https://github.com/Dao-AILab/flash-attention\n"
          f"    commit: \"{'a' * 40}\"\n    cxx_std: 20\n")


def _profile(tmp_path: Path, text: str) -> Path:
    for shipped in (ROOT / "profiles").glob("*.yaml"):
        (tmp_path / shipped.name).write_text(shipped.read_text())
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return path


def test_a_released_fa2_beside_sglangs_flash_attn_4_is_an_error(tmp_path: Path) -> None:
    path = _profile(tmp_path, "extends: h100-sglang-fp8\nname: c\nflash_attn:\n"
                              "  build: source\n  version: \"2.8.3.post2\"\n"
                              "  purpose: transformers flash_attention_2\n")
    run = run_cli("validate", str(path))
    assert run.rc == 2, run.err
    assert ("flash_attn.version: flash-attn 2.8.3.post2 (built from source) and flash-attn-4 "
            "(sglang 0.5.23 requires flash-attn-4>=4.0.0b18) both install "
            "flash_attn/cute/__init__.py, flash_attn/cute/ampere_helpers.py, "
            "flash_attn/cute/blackwell_helpers.py (and 17 more; PYPI flash_attn-2.8.3.tar.gz") \
        in run.err, run.err
    assert "the one installed last silently replaces the other's files" in run.err
    assert "set flash_attn.build: none" in run.err
    assert "Traceback" not in run.err


def test_a_fixed_source_beside_flash_attn_4_is_an_error_too(tmp_path: Path) -> None:
    """The fix of the C++ standard (a source of the repository after 2.8.3) carries the
    same package: the clash follows the fix, so it is refused as well."""
    path = _profile(tmp_path, "extends: h100-sglang-fp8\nname: c\nflash_attn:\n"
                              "  build: source\n  purpose: transformers flash_attention_2\n"
                              "  source:\n" + SOURCE)
    run = run_cli("validate", str(path))
    assert run.rc == 2, run.err
    assert "flash_attn.source: this flash-attn source (built from source) and flash-attn-4" \
        in run.err, run.err


def test_vllm_has_no_flash_attn_4_so_its_fixed_source_validates(tmp_path: Path) -> None:
    path = _profile(tmp_path, "extends: h100-fp8\nname: c\nflash_attn:\n  build: source\n"
                              "  purpose: transformers flash_attention_2\n  source:\n" + SOURCE)
    run = run_cli("validate", str(path))
    assert run.rc == 0, run.err
    assert "both install" not in run.err


def test_the_shared_paths_are_only_flash_attn_cute() -> None:
    share = KNOWN.flash_attn["shares_files"][0]
    assert share["dist"] == "flash-attn-4"
    assert len(share["paths"]) == 20
    assert all(p.startswith("flash_attn/cute/") for p in share["paths"])


def test_a_closure_member_without_a_wheel_for_the_python_is_an_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows tools/closure_wheels.py reads (uv's closure, then each member's files on the
    index) are judged offline: a member without a wheel for the profile's Python and wheel
    platform is an error naming it and the Pythons whose closure has every wheel. The row
    here stands for one such reading (the shipped rows have no member missing)."""
    from dockergen.parts.engines.base import ServingEngine

    shipped = ServingEngine.facts

    def facts(self: ServingEngine, known: Facts) -> dict[str, object]:
        data = dict(shipped(self, known))
        if self.name == "vllm":
            data["closure_wheels"] = {"0.33.0": {
                "aarch64-manylinux_2_35": {"3.12": [], "3.13": ["native-ext==2.0"]},
                "src": "a reading for this test"}}
        return data

    monkeypatch.setattr(ServingEngine, "facts", facts)
    path = _profile(tmp_path, "extends: gh200-vllm\nname: c\npython: \"3.13\"\n")
    with pytest.raises(ProfileError) as err:
        resolve_profile(path)
    text = str(err.value)
    assert ("python: the closure of vllm 0.33.0 has no wheel for Python 3.13 on "
            "aarch64-manylinux_2_35 of native-ext==2.0 (a reading for this test)") in text, text
    assert 'use python: "3.12"' in text
    resolve_profile(path.with_name("gh200-vllm.yaml"))  # 3.12: every member has a wheel


def test_sglang_on_python_3_13_names_the_closure_member_without_a_wheel(tmp_path: Path) -> None:
    """SGLang 0.5.23's own wheels cover 3.11-3.13, but its closure pins outlines-core
    0.1.26, whose wheels stop at cp312: on 3.13 the engine stage would compile its (Rust)
    sdist. Read from PyPI by tools/closure_wheels.py; before, this profile validated."""
    path = _profile(tmp_path, "extends: h100-sglang-fp8\nname: c\npython: \"3.13\"\n")
    run = run_cli("validate", str(path))
    assert run.rc == 2, run.err
    assert ("python: the closure of sglang 0.5.23 has no wheel for Python 3.13 on "
            "x86_64-manylinux_2_35 of outlines-core==0.1.26") in run.err, run.err
    assert 'use python: "3.12", or use python: "3.11"' in run.err
