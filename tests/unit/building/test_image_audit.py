"""The whole-image audit: its fatbin reader against NVIDIA's cuobjdump, its verdicts on
libraries built here with the real gcc and nvcc, and a real build it must stop (exit 6).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from tests.support.standin import IndexServer, broken_libraries, build_index
from tests.unit.building.test_arch_audit import CUOBJDUMP, KERNEL, NVCC

SCRIPT = ROOT / "templates" / "context" / "image_audit.py"
spec = importlib.util.spec_from_file_location("image_audit", SCRIPT)
assert spec and spec.loader
image_audit = importlib.util.module_from_spec(spec)
spec.loader.exec_module(image_audit)

GENCODES = {
    "sass80+90,ptx90": ["arch=compute_80,code=sm_80", "arch=compute_90,code=sm_90",
                        "arch=compute_90,code=compute_90"],
    "sass86,ptx75": ["arch=compute_86,code=sm_86", "arch=compute_75,code=compute_75"],
    "sass90a+100,ptx120,compressed": ["arch=compute_90a,code=sm_90a",
                                      "arch=compute_100,code=sm_100",
                                      "arch=compute_120,code=compute_120"],
    "sass100f,ptx90a": ["arch=compute_100f,code=sm_100f", "arch=compute_90a,code=compute_90a"],
}


def _compile(tmp: Path, name: str, gencodes: list[str], *extra: str) -> Path:
    (tmp / "k.cu").write_text(KERNEL)
    out = tmp / name
    args = [a for g in gencodes for a in ("-gencode", g)]
    subprocess.run([NVCC, "-shared", "-Xcompiler", "-fPIC", "-o", str(out), str(tmp / "k.cu"),
                    *args, *extra], check=True, capture_output=True)  # type: ignore[list-item]
    return out


def _cuobjdump_code(path: Path) -> set[tuple[str, int, str]]:
    found = set()
    for flag, kind in (("--list-elf", "sass"), ("--list-ptx", "ptx")):
        out = subprocess.run([CUOBJDUMP, flag, str(path)], capture_output=True, text=True,  # type: ignore[list-item]
                             check=False).stdout
        for line in out.splitlines():
            arch = line.rsplit(".sm_", 1)[1].split(".")[0]  # "90", "90a", "100f"
            digits = arch.rstrip("a")  # cuobjdump lists family "f" code as plain sm_100
            found.add((kind, int(digits), arch[len(digits):]))
    return found


@pytest.mark.parametrize("case", sorted(GENCODES))
def test_fatbin_reader_agrees_with_cuobjdump(tmp_path: Path, case: str) -> None:
    extra = ("-Xfatbin=-compress-all",) if "compressed" in case else ()
    so = _compile(tmp_path, "k.so", GENCODES[case], *extra)
    data = so.read_bytes()
    ours = image_audit.fatbin_code(data, image_audit.elf_sections(data))
    assert ours and ours == _cuobjdump_code(so)


@pytest.mark.parametrize(("code", "cc", "runs"), [
    ({("sass", 80, "")}, (8, 6), True),  # same major, newer minor: runs
    ({("sass", 86, "")}, (8, 0), False),  # newer minor SASS does not run on an older GPU
    ({("sass", 80, "")}, (9, 0), False),  # another major never runs SASS
    ({("ptx", 80, "")}, (9, 0), True),  # PTX JIT-compiles forward
    ({("ptx", 90, "")}, (8, 9), False),
    ({("sass", 90, "a")}, (9, 0), True),  # arch-specific code: its own arch only
    ({("sass", 90, "a"), ("ptx", 90, "a")}, (10, 0), False),
    ({("sass", 100, "")}, (10, 3), True),  # plain (and family) code: the whole 10.x family
])
def test_which_code_runs_on_which_gpu(code: set[tuple[str, int, str]], cc: tuple[int, int],
                                      runs: bool) -> None:
    assert image_audit.runs_on(code, cc) is runs


def _audit(root: Path, *args: str) -> tuple[int, dict[str, object]]:
    result = subprocess.run([sys.executable, str(SCRIPT), "--cuda-major", "13", *args,
                             str(root)], capture_output=True, text=True, check=False)
    return result.returncode, json.loads(result.stdout)


def test_the_audit_names_each_broken_library(tmp_path: Path) -> None:
    root = tmp_path / "venv"
    root.mkdir()
    for name, data in broken_libraries(tmp_path / "work").items():
        (root / Path(name).name).write_bytes(data)
    _compile(tmp_path, "ok.so", GENCODES["sass80+90,ptx90"]).rename(root / "ok.so")
    # a library linking CUDA 12's runtime (present, so only the major is wrong)
    (tmp_path / "rt.c").write_text("int cudart(void) { return 12; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcudart.so.12", "-o",
                    str(root / "libcudart.so.12"), str(tmp_path / "rt.c")], check=True)
    (tmp_path / "u.c").write_text("int cudart(void);\nint use(void) { return cudart(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-rpath,$ORIGIN", "-o",
                    str(root / "cu12.so"), str(tmp_path / "u.c"),
                    str(root / "libcudart.so.12")], check=True)
    code, report = _audit(root, "--targets", "8.0,9.0")
    assert code == 1 and report["ok"] is False
    assert sorted(report["problems"]) == sorted([  # type: ignore[type-var]
        f"{root}/_C_sm80.so: no code for compute capability 9.0 (has sass_80)",
        f"{root}/_ext_missing_dep.so: needs libdgmissing.so.1, which is not in the image",
        f"{root}/cu12.so: links libcudart.so.12, but the image has CUDA 13",
    ])
    # the same tree for an A100-only image: the sm_80 library is fine there
    code, report = _audit(root, "--targets", "8.0")
    assert code == 1 and sorted(report["problems"]) == sorted([  # type: ignore[type-var]
        f"{root}/_ext_missing_dep.so: needs libdgmissing.so.1, which is not in the image",
        f"{root}/cu12.so: links libcudart.so.12, but the image has CUDA 13"])
    # a library the engine loads on 8.x only is checked against 8.x targets only
    code, report = _audit(root, "--targets", "8.0,9.0", "--arch-scope", "*/_C_sm80.so=8.0,8.6")
    assert not any("_C_sm80" in p for p in report["problems"])  # type: ignore[attr-defined]
    code, report = _audit(root, "--targets", "9.0", "--arch-scope", "*/_C_sm80.so=9.0")
    assert any("_C_sm80" in p for p in report["problems"])  # type: ignore[attr-defined]


def test_a_dependency_loaded_by_name_from_the_image_resolves(tmp_path: Path) -> None:
    """Like a torch extension: needs libc10.so with no RUNPATH; import torch loaded it."""
    root = tmp_path / "venv"
    (root / "torch" / "lib").mkdir(parents=True)
    (root / "ext").mkdir()
    (tmp_path / "c10.c").write_text("int c10(void) { return 10; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libc10.so", "-o",
                    str(root / "torch" / "lib" / "libc10.so"), str(tmp_path / "c10.c")],
                   check=True)
    (tmp_path / "e.c").write_text("int c10(void);\nint ext(void) { return c10(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(root / "ext" / "_C.so"),
                    str(tmp_path / "e.c"), str(root / "torch" / "lib" / "libc10.so")],
                   check=True)
    code, report = _audit(root, "--targets", "8.0")
    assert code == 0 and report["problems"] == [], report
    (root / "torch" / "lib" / "libc10.so").unlink()  # now it is really missing
    code, report = _audit(root, "--targets", "8.0")
    assert report["problems"] == [
        f"{root}/ext/_C.so: needs libc10.so, which is not in the image"]


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    _compile(tmp_path, "ok.so", GENCODES["sass80+90,ptx90"])
    (tmp_path / "k.cu").unlink()
    code, report = _audit(tmp_path, "--targets", "8.0,8.6,9.0,10.0")  # PTX 9.0 covers 10.0
    assert code == 0 and report == {"ok": True, "elf_files": 1, "cuda_libraries": 1,
                                    "problems": []}


@pytest.fixture(scope="module")
def broken_index(docker_client, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """A mirror whose vllm wheel carries a library with a missing dependency and one
    without code for H100."""
    root = tmp_path_factory.mktemp("broken-index")
    build_index(root, broken_libs=True)
    server = IndexServer(root)
    yield server.url
    server.close()


@pytest.mark.daemon
def test_a_broken_image_fails_the_build_with_exit_6(broken_index: str, tmp_path: Path) -> None:
    ref = "localhost:5000/dockergen-test/broken:1"
    result = run_cli("build", str(ROOT / "tests" / "profiles" / "standin.yaml"),
                     "--network", "host", "-q", "--progress", "plain", "--push", "--tag", ref,
                     "-o", str(tmp_path / "ctx"),
                     "--set", f"build.pip_index_url={broken_index}/simple",
                     "--set", f"build.torch_index_url={broken_index}")
    assert result.rc == 6, result.err[-3000:]
    assert "smoke FAILED whole-image audit" in result.err
    assert "_ext_missing_dep.so: needs libdgmissing.so.1, which is not in the image" in result.err
    assert "_C_sm80.so: no code for compute capability 9.0 (has sass_80)" in result.err
    assert "nothing was pushed" in result.err and "Traceback" not in result.err
    record = json.loads((tmp_path / "ctx" / "build-record.json").read_text())
    assert record["status"] == "smoke-failed" and "pushed" not in record


@pytest.mark.network
def test_real_vllm_libraries_cover_every_shipped_target(tmp_path: Path) -> None:
    """The real vLLM 0.33.0 wheel's CUDA libraries against each shipped vLLM profile.

    With the engine's arch scopes (parts/engines/vllm/facts.yaml) nothing is missing; without
    them the single-family libraries (FA3, FlashMLA, Blackwell-only kernels) would fail an
    A100 image although vLLM never loads them there.
    """
    import os
    import zipfile

    from dockergen.api import resolve_profile
    from dockergen.resolve.model import cc_tuple

    cache = Path(os.environ.get("DOCKERGEN_CACHE", Path.home() / ".cache" / "dockergen"))
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                    "--only-binary=:all:", "--python-version", "3.12", "--platform",
                    "manylinux_2_28_x86_64", "-d", str(wheels), "vllm==0.33.0"], check=True)
    wheel = next(wheels.glob("vllm-0.33.0-*.whl"))
    root = tmp_path / "venv"
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.endswith(".so"):
                zf.extract(name, root)
    checked = 0
    for stem in ("a100-bf16", "a100-h100", "h100-fp8", "l40s-awq"):
        r = resolve_profile(ROOT / "profiles" / f"{stem}.yaml")
        targets = [cc_tuple(t.cc) for t in r.gpus]
        scopes = [(glob, {cc_tuple(cc) for cc in ccs}) for glob, ccs in r.arch_scopes]
        report = image_audit.audit([str(root)], 13, targets, scopes)
        assert report["cuda_libraries"] == 9
        assert [p for p in report["problems"] if "no code for" in p] == [], stem  # type: ignore[union-attr]
        checked += 1
        if stem == "a100-bf16":
            bare = image_audit.audit([str(root)], 13, targets, [])
            assert len([p for p in bare["problems"] if "no code for" in p]) == 6  # type: ignore[union-attr]
    assert checked == 4


def test_the_audit_lists_the_code_of_the_kernels_the_build_made(tmp_path: Path) -> None:
    """Kernels compiled in the build (FlashInfer's ahead of time, an engine's seeded JIT cache)
    are audited like any library and listed with their code; one built for another GPU fails."""
    root = tmp_path / "venv"
    (root / "aot" / "sampling").mkdir(parents=True)
    _compile(tmp_path, "s.so", ["arch=compute_90a,code=sm_90a"]).rename(
        root / "aot" / "sampling" / "sampling.so")
    _compile(tmp_path, "other.so", GENCODES["sass80+90,ptx90"]).rename(root / "other.so")
    code, report = _audit(root, "--targets", "9.0", f"--list={root}/aot/*.so")
    assert code == 0, report
    assert report["kernels"] == {"sampling.so": "sass_90a"}
    code, report = _audit(root, "--targets", "10.0", f"--list={root}/aot/*.so")
    assert code == 1 and report["kernels"] == {"sampling.so": "sass_90a"}
    assert f"{root}/aot/sampling/sampling.so: no code for compute capability 10.0 (has " \
        "sass_90a)" in report["problems"]  # type: ignore[operator]


def test_cross_compiling_stubs_and_gpu_code_are_not_the_images_cpu(tmp_path: Path) -> None:
    """The real vLLM image ships nvidia_cutlass_dsl's aarch64 stubs for cross-compiling in
    its x86-64 image: not loaded there, so not refused. The same file elsewhere (the
    system's multiarch folder, a package's own lib/) is refused."""
    spec = importlib.util.spec_from_file_location(
        "image_audit", ROOT / "templates" / "context" / "image_audit.py")
    assert spec is not None and spec.loader is not None
    audit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(audit)
    elf = bytes(18) + (183).to_bytes(2, "little") + bytes(44)  # an aarch64 ELF header
    elf = b"\x7fELF" + elf[4:]
    places = {
        "stub": "venv/lib/python3.11/site-packages/nvidia_cutlass_dsl/cu13/lib/stubs/"
                "aarch64-unknown-linux-gnu/libcute_dsl_runtime.so",
        "system": "usr/lib/aarch64-linux-gnu/libfoo.so",
        "package": "venv/lib/python3.11/site-packages/pkg/lib/libfoo.so",
    }
    amd = tmp_path / "venv/lib/python3.11/site-packages/sglang/gfx950/mla.co"
    amd.parent.mkdir(parents=True)
    amd.write_bytes(b"\x7fELF" + bytes(14) + (224).to_bytes(2, "little") + bytes(44))
    paths = {}
    for name, rel in places.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True)
        path.write_bytes(elf)
        paths[name] = str(path)
    # an AMD GPU code object (SGLang's wheel ships them) is GPU code, as a cubin is
    problems = audit.machine_problems(sorted([*paths.values(), str(amd)]), 62)
    assert [p.split(":")[0] for p in problems] == sorted([paths["system"], paths["package"]])
