"""A user knowledge file adds releases without editing site-packages; its facts are the user's."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli

FACTS = """\
serving/vllm:
  releases:
    "0.32.0": {torch: "2.14.0", python: ">=3.11,<3.15", cuda_major: 13,
               src: "vllm-0.32.0 wheel METADATA, Requires-Dist torch==2.14.0"}
flash_attn:
  releases:
    "2.8.3.post2": {src: "flash-attn 2.8.3.post2 sdist setup.py, arch handling as 2.8.3"}
serving/tensorrt_llm:
  releases:
    "1.2.1": {torch: "2.9.0", python: ">=3.10,<3.13", cuda_major: 13, src: "trt wheel METADATA"}
"""
PROFILE = """\
extends: h100-fp8
name: mine
knowledge: [facts.yaml]
engine:
  version: "0.32.0"
flash_attn:
  version: "2.8.3.post2"
"""


def test_releases_dockergen_lacks_can_be_added(tmp_path: Path) -> None:
    """Issue 7: vLLM 0.32.0 and flash-attn 2.8.3.post2 were rejected, with no way around."""
    (tmp_path / "facts.yaml").write_text(FACTS)
    (tmp_path / "p.yaml").write_text(PROFILE)
    rendered = run_cli("render", "-q", "p.yaml", cwd=tmp_path)
    assert rendered.rc == 0, rendered.err
    assert "vllm==0.32.0 torch==2.14.0" in rendered.out
    assert "flash-attn==2.8.3.post2" in rendered.out
    explained = run_cli("explain", "p.yaml", cwd=tmp_path).out.splitlines()
    i = explained.index(next(line for line in explained if line.split()[:1] == ["torch"]))
    assert explained[i + 2].split("src: ", 1)[1] == (
        "user knowledge facts.yaml: vllm-0.32.0 wheel METADATA, Requires-Dist torch==2.14.0")
    users = [line.split() for line in explained if line.strip().startswith("user fact")]
    assert users == [["user", "fact", "flash_attn", "releases", "2.8.3.post2"],
                     ["user", "fact", "serving/tensorrt_llm", "releases", "1.2.1"],
                     ["user", "fact", "serving/vllm", "releases", "0.32.0"]]


def test_without_the_file_the_release_is_unknown(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(PROFILE.replace("knowledge: [facts.yaml]\n", ""))
    result = run_cli("render", "-q", "p.yaml", cwd=tmp_path)
    assert result.rc == 2
    assert "vllm 0.32.0 is not in the knowledge base" in result.err
    assert "knowledge file listed under the profile's `knowledge:`" in result.err


def test_shipped_facts_are_never_replaced_and_sources_are_required(tmp_path: Path) -> None:
    (tmp_path / "facts.yaml").write_text(
        'serving/vllm:\n  releases:\n    "0.33.0": {torch: "2.0.0", src: x}\n'
        '    "0.32.0": {torch: "2.14.0"}\nnope: {}\n')
    (tmp_path / "p.yaml").write_text(PROFILE)
    result = run_cli("render", "-q", "p.yaml", cwd=tmp_path)
    assert result.rc == 2
    lines = result.err.splitlines()
    assert lines[0] == ("facts.yaml:3:5: serving/vllm.releases.0.33.0: dockergen already knows "
                        "this; shipped facts are not replaced; remove it from the knowledge file")
    assert lines[1].startswith("facts.yaml:4:5: serving/vllm.releases.0.32.0: a fact needs its "
                               "source")
    assert lines[2].startswith("facts.yaml:5:1: nope: not a component's facts; use one of: ")
