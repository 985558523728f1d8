"""The knowledge checked against the real packages (snapshot offline; PyPI live in CI)."""

from __future__ import annotations

import contextlib
import copy
import json
import re
from pathlib import Path

import pytest

from dockergen.maint import knowledge_check as kc
from dockergen.maint import knowledge_check_compare as kcc
from dockergen.maint.observe import Pages, parse_flash_attn_setup
from tests.conftest import PROFILES, run_cli


def _view() -> kc.KnowledgeView:
    return kc.KnowledgeView(copy.deepcopy(kc.KnowledgeView.load().data))


# --- offline: the knowledge equals what the checked-in snapshot observed -----------------

def test_knowledge_matches_the_pypi_snapshot() -> None:
    report = kcc.compare(kc.KnowledgeView.load(), kc.load_snapshot())
    assert report.differences == []
    # what no machine can check here is listed, not compared
    assert any(u.startswith("torch.2.14: cuda") for u in report.unverified)
    # TensorRT-LLM's Python range is read from its stubs' classifiers, not left unverified
    assert not any("tensorrt-llm" in u for u in report.unverified)


def test_snapshot_is_deterministic_and_dated() -> None:
    text = kc.SNAPSHOT.read_text(encoding="utf-8")
    snap = json.loads(text)
    assert kc.dump(snap) == text
    import datetime

    assert datetime.date.fromisoformat(snap["observed_on"]) <= datetime.date.today()
    assert snap["format"] == kc.SNAPSHOT_VERSION


def test_the_knowledge_holds_pypis_newest_releases() -> None:
    snap, kb = kc.load_snapshot(), kc.KnowledgeView.load()
    engines = {pkg: releases for pkg, releases in kb.engines().values()}
    assert snap["newest"]["vllm"] in engines["vllm"]
    assert snap["newest"]["tensorrt-llm"] in engines["tensorrt-llm"]
    assert snap["newest"]["flash-attn"] in kb.flash_attn()["releases"]
    major_minor = ".".join(snap["newest"]["torch"].split(".")[:2])
    assert major_minor in kb.torch_rows()


@pytest.mark.parametrize(("what", "edit", "expect"), [
    ("a flash-attn version PyPI does not have",
     lambda d: d["flash_attn"]["releases"].update({"2.7.4": d["flash_attn"]["releases"]
                                                   ["2.7.4.post1"]}),
     "flash_attn.releases.2.7.4: not on PyPI"),
    ("a wrong torch pin",
     lambda d: d["engines"]["vllm"]["releases"]["0.33.0"].update(torch="2.13.0"),
     "engines.vllm.releases.0.33.0: torch is '2.13.0' in the knowledge, '2.14.0' on PyPI"),
    ("a wrong Requires-Python",
     lambda d: d["engines"]["vllm"]["releases"]["0.32.0"].update(python=">=3.10,<3.15"),
     "engines.vllm.releases.0.32.0: python"),
    ("a wrong CUDA major",
     lambda d: d["engines"]["vllm"]["releases"]["0.19.1"].update(cuda_major=13),
     "engines.vllm.releases.0.19.1: cuda_major is 13 in the knowledge, 12 on PyPI"),
    ("a torch Python range its wheels do not have",
     lambda d: d["torch"]["2.14"].update(python=">=3.10,<3.16"),
     "torch.2.14: python"),
    ("a C++ verdict the probe contradicts",
     lambda d: d["torch"]["2.14"].update(cxx_min=17),
     "torch.2.14: cxx_min is 17 in the knowledge, 20 on PyPI"),
    ("a forced C++ standard setup.py does not force",
     lambda d: d["flash_attn"]["releases"]["2.8.3.post2"].update(cxx_std=20),
     "flash_attn.releases.2.8.3.post2: cxx_std"),
    ("a wrong nvcc gate",
     lambda d: d["flash_attn"]["arch_min_nvcc"].update({"100": "12.6"}),
     "arch_min_nvcc[100]"),
    ("a missing newest release",
     lambda d: d["engines"]["vllm"]["releases"].pop("0.34.0"),
     "engines.vllm: PyPI's newest release 0.34.0 is missing"),
    ("a wrong SGLang kernel pin",
     lambda d: d["engines"]["sglang"]["releases"]["0.5.23"].update(
         {"kernel": "sglang-kernel==0.4.9"}),
     "engines.sglang.releases.0.5.23: kernel is 'sglang-kernel==0.4.9' in the knowledge, "
     "'sglang-kernel==0.4.10' on PyPI"),
    ("a wrong SGLang FlashInfer pin",
     lambda d: d["engines"]["sglang"]["releases"]["0.5.23"].update(
         {"flashinfer": "flashinfer-python[cu13]==0.7.1"}),
     "flashinfer is 'flashinfer-python[cu13]==0.7.1' in the knowledge"),
    ("a wrong vLLM FlashInfer pin",
     lambda d: d["engines"]["vllm"]["flashinfer"]["0.33.0"].update({"python": "0.7.2"}),
     "engines.vllm.flashinfer.0.33.0: python is '0.7.2' in the knowledge, '0.7.2.post1' on PyPI"),
    ("a torch row marked verified that cannot be",
     lambda d: d["torch"]["2.13"].pop("unverified"),
     "torch.2.13: cuda (the download.pytorch.org index list) cannot be read"),
])
def test_every_kind_of_difference_fails_the_check(what: str, edit, expect: str) -> None:
    view = _view()
    edit(view.data)
    report = kcc.compare(view, kc.load_snapshot())
    assert any(expect in d for d in report.differences), (what, report.differences)


def test_unverified_facts_are_reported_not_compared() -> None:
    view = _view()
    view.data["torch"]["2.14"]["cuda"] = ["12.6", "13.0"]
    report = kcc.compare(view, kc.load_snapshot())
    assert report.differences == []
    assert any(u.startswith("torch.2.14: cuda = ['12.6', '13.0'] (unverified")
               for u in report.unverified)


def test_tensorrt_llms_python_range_is_checked_against_its_classifiers() -> None:
    """The stub's classifiers say 3.10 and 3.12: a range that admits 3.11 is a difference."""
    view = _view()
    view.data["engines"]["tensorrt-llm"]["releases"]["1.2.1"]["python"] = ">=3.10,<3.13"
    report = kcc.compare(view, kc.load_snapshot())
    assert any("tensorrt-llm.releases.1.2.1: python is '<3.13,>=3.10' in the knowledge, "
               "'!=3.11.*,<3.13,>=3.10' on PyPI" in d for d in report.differences), \
        report.differences


def test_check_command_offline(tmp_path: Path) -> None:
    ok = run_cli_module("check")
    assert ok.rc == 0, ok.out + ok.err
    assert "0 difference(s)" in ok.out
    snap = kc.load_snapshot()
    snap["engines"]["vllm"]["0.33.0"]["torch"] = "2.15.0"
    bad = tmp_path / "snapshot.json"
    bad.write_text(kc.dump(snap))
    failed = run_cli_module("check", "--snapshot", str(bad))
    assert failed.rc == 1
    assert "DIFFERENT: engines.vllm.releases.0.33.0: torch is '2.14.0'" in failed.out


def run_cli_module(*args: str):  # type: ignore[no-untyped-def]
    import subprocess
    import sys

    from tests.conftest import ROOT, Run

    proc = subprocess.run([sys.executable, "-m", "dockergen.maint.knowledge", *args],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    return Run(proc.returncode, proc.stdout, proc.stderr)


def test_setup_py_parser_reads_the_cuda_path_only() -> None:
    setup = '''
def cuda_archs():
    return os.getenv("FLASH_ATTN_CUDA_ARCHS", "80;90;100;120").split(";")
if CUDA_HOME is not None:
    if bare_metal_version < Version("11.7"):
        raise RuntimeError("old")
if "80" in cuda_archs():
    cc_flag.append("arch=compute_80,code=sm_80")
if CUDA_HOME is not None:
    if bare_metal_version >= Version("11.8") and "90" in cuda_archs():
        cc_flag.append("arch=compute_90,code=sm_90")
    # if bare_metal_version >= Version("12.0"): cc_flag.append("arch=compute_75,code=sm_75")
extra_compile_args={"cxx": ["-O3", "-std=c++17"]}
setup(python_requires=">=3.9")
'''
    facts = parse_flash_attn_setup(setup, "Requirements: PyTorch 2.2 and above.")
    assert facts == {"archs_env": "FLASH_ATTN_CUDA_ARCHS",
                     "default_archs": ["80", "90", "100", "120"],
                     "arch_min_nvcc": {"80": "11.7", "90": "11.8"}, "nvcc_min": "11.7",
                     "cxx_std": [17], "torch_min": "2.2", "python": ">=3.9"}


# --- the rule built on the probe's verdict -----------------------------------------------

def _profile(tmp_path: Path, flash_attn: str, engine: str = "0.33.0") -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(f"extends: h100-fp8\nname: fa-test\nengine:\n  version: \"{engine}\"\n"
                    f"flash_attn:\n{flash_attn}")
    return path


@pytest.mark.parametrize("version", [
    v for v in kc.KnowledgeView.load().flash_attn()["releases"]
    if kc.KnowledgeView.load().flash_attn()["releases"][v]["archs_env"]])
def test_validate_rejects_every_released_flash_attn_on_torch_2_14(version: str,
                                                                  tmp_path: Path) -> None:
    result = run_cli("validate", str(_profile(
        tmp_path, f"  build: source\n  version: \"{version}\"\n")))
    assert result.rc == 2, result.err
    assert f"flash-attn {version} forces -std=c++17, but the headers of torch 2.14.0" in result.err
    for fix in ("use vllm 0.32.0", "set flash_attn.build: none",
                "flash_attn.source with url + sha256", "git + commit"):
        assert fix in result.err
    assert "Traceback" not in result.err


def test_each_named_fix_validates(tmp_path: Path) -> None:
    engine_fix = _profile(tmp_path, "  build: source\n  version: \"2.8.3.post2\"\n", "0.32.0")
    assert run_cli("validate", "-q", str(engine_fix)).rc == 0
    none_fix = _profile(tmp_path, "  build: none\n")
    assert run_cli("validate", "-q", str(none_fix)).rc == 0


def test_a_pinned_fixed_source_validates_and_renders(tmp_path: Path) -> None:
    git = _profile(tmp_path, "  build: source\n  version: \"2.8.3.post2\"\n  source:\n"
                   "    git: https://github.com/Dao-AILab/flash-attention\n"
                   f"    commit: \"{'a' * 40}\"\n    cxx_std: 20\n")
    result = run_cli("render", "-q", str(git))
    assert result.rc == 0, result.err
    assert (f"'flash-attn @ git+https://github.com/Dao-AILab/flash-attention@{'a' * 40}'"
            in result.out)
    assert " git " in result.out.split("AS build-base", 1)[1].split("\nFROM ", 1)[0]
    archive = _profile(tmp_path, "  build: source\n  version: \"2.8.3.post2\"\n  source:\n"
                       "    url: https://mirror.example.com/flash_attn-2.8.4.dev0.tar.gz\n"
                       f"    sha256: \"{'b' * 64}\"\n    cxx_std: 20\n")
    result = run_cli("render", "-q", str(archive))
    assert result.rc == 0, result.err
    assert ("flash-attn @ https://mirror.example.com/flash_attn-2.8.4.dev0.tar.gz "
            f"--hash=sha256:{'b' * 64}") in result.out
    assert "--require-hashes" in result.out


def test_a_source_without_a_stated_standard_warns(tmp_path: Path) -> None:
    path = _profile(tmp_path, "  build: source\n  source:\n"
                    "    git: https://github.com/Dao-AILab/flash-attention\n"
                    f"    commit: \"{'a' * 40}\"\n")
    result = run_cli("validate", str(path))
    assert result.rc == 0, result.err
    assert "flash_attn.source: the C++ standard this flash-attn source forces is not stated" \
        in result.err and "[warning]" in result.err


def test_an_unverified_torch_index_fact_only_warns(tmp_path: Path) -> None:
    result = run_cli("validate", str(PROFILES / "h100-fp8.yaml"), "--set", "cuda.version=13.1.1")
    assert result.rc == 0, result.err
    assert ("torch 2.14.0 has no wheels for CUDA 13.1 (download.pytorch.org/whl/cu131 does not "
            "carry it, unverified)") in result.err


# --- live, against PyPI (CI runs these) ---------------------------------------------------

_NEWER = re.compile(r"PyPI's newest release \S+ is missing from the knowledge$")


def _is_news(change: str) -> bool:
    """A release PyPI published after the snapshot (a new entry, or a new newest): news for
    the maintainers, not a fact of the knowledge gone wrong."""
    return change.startswith(("newest.", "prereleases.", "cuda_toolkit:")) or (
        change.startswith(("engines.", "torch.", "flash_attn.")) and ": None -> " in change)


@pytest.mark.network
def test_live_pypi_matches_the_knowledge_and_the_snapshot() -> None:
    """Refresh live: PyPI today must agree with the knowledge and the checked-in snapshot on
    every release both know. A release published since (vLLM 0.34.0 appeared a day after
    the snapshot) is reported, not failed: it says nothing about what dockergen states."""
    kb = kc.KnowledgeView.load()
    live = kc.observe_all(kb, Pages(), probe=False)
    old = kc.load_snapshot()
    old.pop("compile_probe", None)
    changed, _coverage = kc.drift(old, live)
    assert [c for c in changed if not _is_news(c)] == []
    differences = kcc.compare(kb, {**live, "compile_probe": kc.load_snapshot()["compile_probe"]}
                             ).differences
    assert [d for d in differences if not _NEWER.search(d)] == []
    for line in [c for c in changed if _is_news(c)] + [d for d in differences
                                                       if _NEWER.search(d)]:
        print(f"newer on PyPI than the snapshot: {line[:200]}")


def test_a_new_release_is_news_but_a_changed_fact_is_not() -> None:
    """The split the live test relies on, on the shapes _changed writes."""
    assert _is_news("newest.vllm: '0.33.0' -> '0.34.0'")
    assert _is_news("engines.vllm.0.34.0: None -> {'torch': '2.14.0'}")
    assert _is_news("torch.2.14.2: None -> {'python': '>=3.10'}")
    assert not _is_news("engines.vllm.0.33.0.torch: '2.14.0' -> '2.14.1'")
    assert not _is_news("engines.vllm.0.33.0: {'torch': '2.14.0'} -> None")
    assert _NEWER.search("engines.vllm: PyPI's newest release 0.34.0 is missing from the "
                         "knowledge")


@pytest.mark.network
def test_live_compile_probe_against_the_real_torch_headers() -> None:
    """The real torch 2.13.0 / 2.14.0 headers under flash-attn's -std=c++17 (cached)."""
    from dockergen.maint.probe import probe_torch

    pages = Pages()
    recorded = kc.load_snapshot()["compile_probe"]["torch"]
    for version in ("2.13.0", "2.14.0"):
        assert probe_torch(pages, version) == recorded[version]
    assert recorded["2.14.0"]["cxx17"] == "rejected"
    assert "C++20 or later compatible compiler is required" in recorded["2.14.0"][
        "first_error_cxx17"]


def test_drift_tells_pypis_news_from_the_snapshots_coverage() -> None:
    """`live` says "PyPI changed" only when PyPI did: a release published after the
    snapshot, or a fact that moved; a release that was there all along and that the
    knowledge names only now (a probe added for torch 2.7.0) is coverage."""
    old = {"newest": {"vllm": "0.33.0", "torch": "2.15.0", "flash-attn": "2.8.3.post2"},
           "engines": {"vllm": {"0.33.0": {"torch": "2.14.0"}}},
           "torch": {"2.14.0": {"python": ">=3.10"}}, "torch_minors": {"2.14": {"x": 1}},
           "flash_attn": {"2.8.3": {"cxx_std": [17]}}}
    coverage_only = json.loads(json.dumps(old))
    coverage_only["torch"]["2.7.0"] = {"python": ">=3.9"}
    coverage_only["torch_minors"]["2.7"] = {"x": 0}
    del coverage_only["flash_attn"]["2.8.3"]
    published, covered = kc.drift(old, coverage_only)
    assert published == []
    assert covered == [
        "torch.2.7.0: now observed (on PyPI before the snapshot; the knowledge names it now)",
        "torch_minors.2.7: now observed (on PyPI before the snapshot; the knowledge names it "
        "now)",
        "flash_attn.2.8.3: no longer observed (the knowledge no longer names it)"]

    news = json.loads(json.dumps(old))
    news["newest"]["vllm"] = "0.34.0"
    news["engines"]["vllm"]["0.34.0"] = {"torch": "2.14.0"}
    news["engines"]["vllm"]["0.33.0"]["torch"] = "2.14.1"  # a fact that moved
    published, covered = kc.drift(old, news)
    assert covered == []
    assert published == ["engines.vllm.0.33.0.torch: '2.14.0' -> '2.14.1'",
                         "engines.vllm.0.34.0: None -> {'torch': '2.14.0'}",
                         "newest.vllm: '0.33.0' -> '0.34.0'"]


def test_live_prints_which_kind_of_drift(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The command's own words, with the snapshot read from PyPI replaced by one that only
    covers one more old release (no network)."""
    snap = kc.load_snapshot()
    wider = json.loads(json.dumps(snap))
    minors = wider["torch_minors"]
    minors["2.6"] = dict(minors[min(minors, key=lambda m: tuple(map(int, m.split("."))))])
    monkeypatch.setattr(kc, "observe_all", lambda kb, probe=True: wider)
    out = tmp_path / "out.txt"
    with out.open("w") as f, contextlib.redirect_stdout(f):
        kc.main(["live", "--no-probe"])
    text = out.read_text()
    assert "coverage changed: torch_minors.2.6: now observed" in text
    assert "PyPI did not change" in text and "PyPI changed since" not in text


def test_pre_releases_are_listed_as_deliberately_ignored() -> None:
    """tensorrt-llm 1.3.0rc*/1.4.0rc* are on PyPI after 1.2.1: not known, and said so."""
    snap = kc.load_snapshot()
    assert "1.4.0rc1" in snap["prereleases"]["tensorrt-llm"]
    report = kcc.compare(kc.KnowledgeView.load(), snap)
    (line,) = [i for i in report.ignored if i.startswith("tensorrt-llm:")]
    assert "pre-release(s) newer than 1.2.1" in line and "1.4.0rc1" in line
    assert "deliberately not known" in line
    none = dict(snap, prereleases={name: [] for name in snap["prereleases"]})
    assert not [i for i in kcc.compare(kc.KnowledgeView.load(), none).ignored
                if "pre-release" in i]


def test_the_cuda_table_against_pypis_cuda_wheels() -> None:
    """Every known CUDA release is a cuda-toolkit release on PyPI; newer minors (13.3 to
    13.5 on 2026-12-03) are listed as not known; a known release PyPI lacks is a
    difference."""
    snap = kc.load_snapshot()
    kb = kc.KnowledgeView.load()
    assert set(kb.cuda_versions()) <= set(snap["cuda_toolkit"])
    report = kcc.compare(kb, snap)
    (line,) = [i for i in report.ignored if i.startswith("cuda:")]
    assert "CUDA 13.3.1, 13.4.3, 13.5.0 are on PyPI as CUDA wheels" in line
    view = _view()
    view.data["cuda"]["13.0.9"] = {"min_driver": "580.0", "os": ["ubuntu22.04"], "src": "x"}
    assert "cuda.13.0.9: no cuda-toolkit 13.0.9 on PyPI" in kcc.compare(
        view, snap).differences
