"""Compile one real FlashAttention-2 kernel per target arch of a profile and prove its SASS.

What it shows: the flash-attn stage of a profile (default profiles/a100-h100.yaml) asks for
FLASH_ATTN_CUDA_ARCHS, and the image's arch audit trusts that flash-attn's setup.py turns
those into -gencode flags the profile's nvcc honours. This compiles one bf16 hdim128 forward
translation unit of the pinned flash-attn sdist, once per arch, with the flags that setup.py
(and torch's BuildExtension around it) pass, against the pinned torch's headers, and then
shows with cuobjdump that each object holds SASS for exactly that arch. It prints the wall
time and peak memory of each compile: the numbers behind the stage's MAX_JOBS sizing.

Everything is read from the profile through dockergen (flash-attn pin, archs, torch pin,
CUDA version, NVCC_THREADS). Every flag taken from flash-attn's setup.py is checked to appear
literally in the downloaded setup.py (and torch's own flags in torch's cpp_extension.py), so
a flash-attn or torch release that changes them fails here loudly instead of measuring a
build nobody runs.

Run: python benchmarks/flash_attn_kernel_bench.py [--profile P] [--cache DIR] [--threads N]
     cache: --cache, else $DOCKERGEN_FA_BENCH_CACHE, else /tmp/dockergen-fa-bench (never the
     repository); it holds the sdist, a helper venv, torch's headers and the objects.
Needs: nvcc of the profile's CUDA major (--nvcc, else $CUDA_HOME or /usr/local/cuda; NVIDIA's
     nvidia-cuda-nvcc wheel works too), cuobjdump (the test extra's nvidia-cuda-cuobjdump),
     a host g++, network access to PyPI (or a pip configuration that serves the pins).

A benchmark, not a CI test: each compile takes minutes and gigabytes on a 2-core machine,
and the first run downloads the torch wheel (about 0.5 GB) for its headers.
Exit: 0 every arch's SASS present; 1 a compile failed or an arch is missing; 2 a setup
problem (flag drift, a tool of the wrong CUDA major, a download failed).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tarfile
import threading
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dockergen.api import resolve_profile  # noqa: E402

DEFAULT_CACHE = "/tmp/dockergen-fa-bench"
# The profile is BF16 and hdim 128 is the common Llama head size; the non-causal TU holds
# the same kernel family as its causal twin.
DEFAULT_TU = "csrc/flash_attn/src/flash_fwd_hdim128_bf16_sm80.cu"
EXTENSION = "flash_attn_2_cuda"

# flash-attn setup.py `nvcc_flags` for flash_attn_2_cuda, in its order. Kept here (rather
# than only parsed) so a change upstream shows up as a diff against this list.
FA_NVCC_FLAGS = (
    "-O3",
    "-std=c++17",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_HALF2_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "--use_fast_math",
)
# setup.py `cc_flag`: FLASH_ATTN_CUDA_ARCHS value -> (-gencode value, minimum nvcc). An arch
# whose nvcc is too old is dropped by setup.py without an error, hence the minimum here.
FA_GENCODE = {
    "80": ("arch=compute_80,code=sm_80", (11, 7)),
    "90": ("arch=compute_90,code=sm_90", (11, 8)),
    "100": ("arch=compute_100,code=sm_100", (12, 8)),
    "120": ("arch=compute_120,code=sm_120", (12, 8)),
}
# Other setup.py text the command below relies on: the -gencode guards, --threads from
# NVCC_THREADS, the include dirs, the extension name and the TU being one of its sources.
FA_LITERALS = (
    '"--threads"',
    'os.getenv("NVCC_THREADS")',
    '"csrc" / "flash_attn",',
    '"csrc" / "flash_attn" / "src",',
    '"csrc" / "cutlass" / "include",',
    f'name="{EXTENSION}"',
    '"nvcc": append_nvcc_threads(nvcc_flags + cc_flag)',
)
# torch.utils.cpp_extension BuildExtension puts these before the extension's nvcc flags
# (COMMON_NVCC_FLAGS and -fPIC) and after them (the two defines). It adds no -gencode of
# its own (TORCH_CUDA_ARCH_LIST is ignored) because the extension's flags contain "arch",
# and no -std=c++20 because they contain -std.
TORCH_PRE_FLAGS = (
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
    "--compiler-options",
    "'-fPIC'",
)
TORCH_POST_FLAGS = ("-DTORCH_API_INCLUDE_EXTENSION_H", f"-DTORCH_EXTENSION_NAME={EXTENSION}")
TORCH_LITERALS = (
    *(f"'{flag}'" for flag in TORCH_PRE_FLAGS[:5]),
    "['--compiler-options', \"'-fPIC'\"]",
    "'-DTORCH_API_INCLUDE_EXTENSION_H'",
    "f'-DTORCH_EXTENSION_NAME={name}'",
    "if 'arch' in flag:",
    "os.path.join(lib_include, 'torch', 'csrc', 'api', 'include')",
)
# Header a CUDA build of torch generates and a CPU build lacks; c10/cuda needs it.
CUDA_ONLY_HEADER = "c10/cuda/impl/cuda_cmake_macros.h"
TU_HEADERS = ("c10/cuda/CUDAException.h", "ATen/cuda/CUDAGeneratorImpl.h", CUDA_ONLY_HEADER)


class SetupError(Exception):
    """The benchmark cannot measure what it claims to (exit 2)."""


@dataclass(frozen=True)
class Facts:
    """What the profile asks of the flash-attn stage."""

    profile: str
    fa_version: str
    fa_archs: tuple[str, ...]
    expected_sass: tuple[str, ...]
    torch_arch_list: str
    torch_version: str
    cuda_version: str
    nvcc_threads: int


@dataclass
class Result:
    arch: str
    seconds: float = 0.0
    maxrss_kib: int = 0  # largest single process of the nvcc tree (wait4)
    tree_kib: int = 0  # whole nvcc tree at once, sampled
    top: str = "-"  # the biggest process at the sampled peak (cicc, ptxas, cc1plus...)
    rc: int = 0
    sass: tuple[str, ...] = ()
    audit: tuple[str, ...] = ()
    ptx: int = 0
    kernels: int = 0
    listing: str = ""


def profile_facts(path: Path) -> Facts:
    r = resolve_profile(path)
    fa = r.flash_attn
    if fa is None:
        raise SetupError(f"{path}: the profile builds no flash-attn stage")
    if fa.source_kind != "pypi":
        raise SetupError(f"{path}: flash-attn comes from {fa.requirement!r}; only the PyPI "
                         "sdist is supported here")
    resolved = r.record["resolved"]
    return Facts(
        profile=str(path),
        fa_version=fa.version,
        fa_archs=tuple(resolved["flash_attn_cuda_archs"].split(";")),
        expected_sass=tuple(resolved["flash_attn_expected_sass"]),
        torch_arch_list=resolved["torch_cuda_arch_list"],
        torch_version=resolved["torch"],
        cuda_version=r.profile.cuda.version,
        nvcc_threads=fa.nvcc_threads,
    )


def run_checked(cmd: list[str], what: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip()[-3000:]
        raise SetupError(f"{what} failed (rc {proc.returncode}): {' '.join(cmd)}\n{tail}")
    return proc.stdout


def note(text: str) -> None:
    print(f"... {text}", file=sys.stderr, flush=True)


def pip_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    env.pop("PIP_REQUIRE_VIRTUALENV", None)
    return env


# --- tools ------------------------------------------------------------------------------------
def cuda_release(tool: str) -> tuple[int, int]:
    out = run_checked([tool, "--version"], f"{tool} --version")
    m = re.search(r"release (\d+)\.(\d+)", out)
    if not m:
        raise SetupError(f"{tool} --version: no 'release X.Y' in {out!r}")
    return int(m.group(1)), int(m.group(2))


def find_nvcc(arg: str | None, cuda_major: int) -> tuple[str, str]:
    candidates = [arg] if arg else [
        os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc") if os.environ.get("CUDA_HOME")
        else None,
        "/usr/local/cuda/bin/nvcc",
        shutil.which("nvcc"),
    ]
    for nvcc in candidates:
        if nvcc and os.path.isfile(nvcc):
            major, minor = cuda_release(nvcc)
            if major != cuda_major:
                raise SetupError(
                    f"{nvcc} is CUDA {major}.{minor} but the profile builds with CUDA "
                    f"{cuda_major}.x: pass --nvcc (e.g. from pip install "
                    f"'nvidia-cuda-nvcc=={cuda_major}.*')")
            return nvcc, f"{major}.{minor}"
    raise SetupError("nvcc not found: pass --nvcc")


def find_cuobjdump(arg: str | None, nvcc: str) -> str:
    # The test extra installs nvidia-cuda-cuobjdump into the venv running this script; a
    # pip-installed nvcc has no cuobjdump beside it.
    site = Path(sysconfig.get_paths()["purelib"])
    candidates = [arg] if arg else [
        os.path.join(os.path.dirname(nvcc), "cuobjdump"),
        *sorted(str(p) for p in site.glob("nvidia/*/bin/cuobjdump")),
        shutil.which("cuobjdump"),
    ]
    for tool in candidates:
        if tool and os.path.isfile(tool):
            return tool
    raise SetupError("cuobjdump not found: pip install nvidia-cuda-cuobjdump or pass "
                     "--cuobjdump")


# --- sources and headers ----------------------------------------------------------------------
def helper_venv(cache: Path, facts: Facts) -> Path:
    """A venv with torch and setup.py's imports: pip runs flash-attn's setup.py (which
    imports torch) to read the sdist's metadata even for `pip download`."""
    venv = cache / f"helper-venv-torch{facts.torch_version}"
    python = venv / "bin" / "python"
    if not (venv / ".ready").is_file():
        note(f"creating {venv} with torch=={facts.torch_version}")
        shutil.rmtree(venv, ignore_errors=True)
        run_checked([sys.executable, "-m", "venv", str(venv)], "creating the helper venv")
        run_checked([str(python), "-m", "pip", "install", "-q", f"torch=={facts.torch_version}",
                     "setuptools", "wheel", "packaging", "psutil", "ninja"],
                    "installing torch into the helper venv", pip_env())
        (venv / ".ready").write_text("")
    return python


def fetch_sdist(cache: Path, python: Path, facts: Facts) -> Path:
    src = cache / "src" / f"flash_attn-{facts.fa_version}"
    if (src / "setup.py").is_file():
        return src
    dest = cache / "sdist"
    tars = sorted(dest.glob(f"flash_attn-{facts.fa_version}.tar.gz"))
    if not tars:
        note(f"downloading the flash-attn {facts.fa_version} sdist")
        # SKIP_CUDA_BUILD: setup.py then only describes the package (no nvcc probe);
        # --no-build-isolation: use the helper venv's torch instead of a fresh isolated one.
        run_checked([str(python), "-m", "pip", "download", "--no-deps", "--no-build-isolation",
                     "--no-binary", ":all:", f"flash-attn=={facts.fa_version}", "-d", str(dest)],
                    "downloading the flash-attn sdist",
                    pip_env(FLASH_ATTENTION_SKIP_CUDA_BUILD="TRUE"))
        tars = sorted(dest.glob(f"flash_attn-{facts.fa_version}.tar.gz"))
    if not tars:
        raise SetupError(f"pip saved no flash_attn-{facts.fa_version}.tar.gz in {dest}")
    with tarfile.open(tars[0]) as tf:
        if hasattr(tarfile, "data_filter"):
            tf.extractall(src.parent, filter="data")
        else:
            tf.extractall(src.parent)
    if not (src / "setup.py").is_file():
        raise SetupError(f"{tars[0].name} has no flash_attn-{facts.fa_version}/setup.py")
    return src


def torch_headers(cache: Path, python: Path, facts: Facts, cuda_major: int) -> tuple[Path, str]:
    """torch's include/ and cpp_extension.py: the helper venv's torch if its headers cover
    the TU, else the CUDA build's wheel (only include/ and cpp_extension.py are kept)."""
    site = run_checked([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                        "['purelib'])"], "locating the helper venv").strip()
    local = Path(site) / "torch"
    lacking = [h for h in TU_HEADERS if not (local / "include" / h).is_file()]
    if not lacking:
        return local, f"helper venv torch {facts.torch_version} ({local})"
    root = cache / f"torch-{facts.torch_version}-headers"
    wheel_dir = cache / "torch-wheel"
    if not (root / ".ready").is_file():
        wheels = sorted(wheel_dir.glob(f"torch-{facts.torch_version}-*.whl"))
        if not wheels:
            # No pip config or find-links: a local CPU wheel of the same version would
            # otherwise satisfy the pin and lack the CUDA headers again.
            env = pip_env(PIP_CONFIG_FILE=os.devnull)
            env.pop("PIP_FIND_LINKS", None)
            env.pop("PIP_EXTRA_INDEX_URL", None)
            pyver = f"{sys.version_info.major}.{sys.version_info.minor}"
            note(f"downloading the torch {facts.torch_version} wheel for its CUDA headers")
            run_checked([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary",
                         ":all:", "--platform", "manylinux_2_28_x86_64", "--python-version",
                         pyver, "--implementation", "cp", f"torch=={facts.torch_version}",
                         "-d", str(wheel_dir)], "downloading the torch CUDA wheel", env)
            wheels = sorted(wheel_dir.glob(f"torch-{facts.torch_version}-*.whl"))
        if not wheels:
            raise SetupError(f"pip saved no torch-{facts.torch_version} wheel in {wheel_dir}")
        shutil.rmtree(root, ignore_errors=True)
        with zipfile.ZipFile(wheels[0]) as zf:
            wanted = [n for n in zf.namelist() if n.startswith("torch/include/")
                      or n in ("torch/utils/cpp_extension.py", "torch/version.py")]
            zf.extractall(root, wanted)
        (root / ".ready").write_text(wheels[0].name)
    version_py = (root / "torch" / "version.py").read_text()
    m = re.search(r"^cuda: .*= '(\d+)\.(\d+)'", version_py, re.MULTILINE)
    if not m or int(m.group(1)) != cuda_major:
        raise SetupError(f"{(root / '.ready').read_text()} is not a CUDA {cuda_major} build "
                         f"of torch (torch/version.py cuda: {m and m.group(0)!r})")
    missing = [h for h in TU_HEADERS if not (root / "torch" / "include" / h).is_file()]
    if missing:
        raise SetupError(f"torch wheel lacks {', '.join(missing)}")
    return (root / "torch",
            f"{(root / '.ready').read_text()} (CUDA {m.group(1)}.{m.group(2)} build; the "
            f"helper venv's torch lacks {', '.join(lacking)})")


# --- flags ------------------------------------------------------------------------------------
def setup_nvcc_flags(setup_text: str) -> list[str]:
    """The literal `nvcc_flags = [...]` list of setup.py (comments are not elements)."""
    for node in ast.walk(ast.parse(setup_text)):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "nvcc_flags"
                and isinstance(node.value, ast.List)):
            return [ast.literal_eval(elt) for elt in node.value.elts]
    raise SetupError("setup.py has no `nvcc_flags = [...]` list any more")


def check_flags(setup_text: str, cpp_extension_text: str, facts: Facts, tu: str) -> None:
    problems = []
    parsed = setup_nvcc_flags(setup_text)
    if parsed != list(FA_NVCC_FLAGS):
        problems.append(f"setup.py nvcc_flags is {parsed}, this benchmark passes "
                        f"{list(FA_NVCC_FLAGS)}")
    literals = [f'"{flag}"' for flag in FA_NVCC_FLAGS] + list(FA_LITERALS) + [f'"{tu}"']
    for arch in facts.fa_archs:
        if arch not in FA_GENCODE:
            problems.append(f"FLASH_ATTN_CUDA_ARCHS has {arch}, unknown to this benchmark")
            continue
        literals += [f'"{FA_GENCODE[arch][0]}"', f'"{arch}" in cuda_archs()']
    problems += [f"flash-attn setup.py no longer contains {lit}" for lit in literals
                 if lit not in setup_text]
    problems += [f"torch cpp_extension.py no longer contains {lit}" for lit in TORCH_LITERALS
                 if lit not in cpp_extension_text]
    if problems:
        raise SetupError("flag drift, this benchmark no longer mirrors the real build:\n  "
                         + "\n  ".join(problems))


def nvcc_command(nvcc: str, src: Path, torch_dir: Path, tu: str, arch: str, threads: int,
                 obj: Path) -> list[str]:
    """The per-object command torch's ninja file runs, narrowed to one -gencode."""
    include = torch_dir / "include"
    cuda_include = Path(nvcc).resolve().parent.parent / "include"
    includes = [src / "csrc" / "flash_attn", src / "csrc" / "flash_attn" / "src",
                src / "csrc" / "cutlass" / "include", include,
                include / "torch" / "csrc" / "api" / "include", cuda_include,
                Path(sysconfig.get_paths()["include"])]
    return [nvcc, *(f"-I{p}" for p in includes), "-c", str(src / tu), "-o", str(obj),
            *TORCH_PRE_FLAGS, *FA_NVCC_FLAGS, "-gencode", FA_GENCODE[arch][0],
            "--threads", str(threads), *TORCH_POST_FLAGS]


# --- measuring --------------------------------------------------------------------------------
def tree_rss_kib(root: int) -> tuple[int, str]:
    """RSS of `root` and all its descendants now, from /proc, and the biggest one's name."""
    page_kib = os.sysconf("SC_PAGE_SIZE") // 1024
    kids: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue
        # The command name may contain spaces and parentheses: count fields after the last ')'.
        fields = stat[stat.rfind(")") + 2:].split()
        pid = int(entry.name)
        kids.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21]) * page_kib
        names[pid] = stat[stat.find("(") + 1:stat.rfind(")")]
    total, top, todo = 0, root, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        top = pid if rss.get(pid, 0) > rss.get(top, 0) else top
        todo += kids.get(pid, [])
    return total, names.get(top, "-")


def timed_compile(cmd: list[str], log: Path, timeout_s: float, result: Result) -> None:
    start = time.perf_counter()
    with open(log, "w", encoding="utf-8") as out:
        out.write(" ".join(cmd) + "\n\n")
        out.flush()
        # Own session: a timeout ends nvcc and every compiler it started, nothing else.
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.5):
                total, top = tree_rss_kib(proc.pid)
                if total > result.tree_kib:
                    result.tree_kib, result.top = total, top
                if time.perf_counter() - start > timeout_s:
                    os.killpg(proc.pid, signal.SIGKILL)
                    return

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        # wait4, not proc.wait: its rusage covers nvcc and the compilers it waited for.
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        done.set()
        sampler.join()
    result.seconds = time.perf_counter() - start
    result.maxrss_kib = usage.ru_maxrss
    result.rc = proc.returncode


def load_arch_audit() -> ModuleType:
    """The audit script the image runs, to check it reads real objects the same way."""
    path = ROOT / "templates" / "context" / "arch_audit.py"
    spec = importlib.util.spec_from_file_location("dockergen_arch_audit", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def inspect_object(cuobjdump: str, obj: Path, audit: ModuleType, result: Result) -> None:
    listing = run_checked([cuobjdump, "--list-elf", str(obj)], "cuobjdump --list-elf")
    result.listing = listing.strip()
    result.sass = tuple(sorted(set(re.findall(r"\bsm_\d+[a-z]?\b", listing))))
    result.audit = tuple(sorted(audit.archs_of(cuobjdump, str(obj))))
    ptx = subprocess.run([cuobjdump, "--list-ptx", str(obj)], capture_output=True, text=True,
                         check=False)
    result.ptx = len(re.findall(r"^PTX file", ptx.stdout, re.MULTILINE))
    # Kernels are the entry-point functions among the cubin's ELF symbols; cuobjdump 13
    # prints `FUNC GLOBAL DEFAULT ENTRY name`, older ones `STT_FUNC ... STO_ENTRY name`.
    symbols = run_checked([cuobjdump, "--dump-elf-symbols", str(obj)],
                          "cuobjdump --dump-elf-symbols")
    result.kernels = len(re.findall(r"^(?:STT_)?FUNC\b.*\s(?:STO_)?ENTRY\s", symbols,
                                    re.MULTILINE))


# --- main -------------------------------------------------------------------------------------
def cache_dir(arg: str | None) -> Path:
    cache = Path(arg or os.environ.get("DOCKERGEN_FA_BENCH_CACHE") or DEFAULT_CACHE).resolve()
    if cache == ROOT or ROOT in cache.parents:
        raise SetupError(f"cache {cache} is inside the repository; use a folder under /tmp")
    cache.mkdir(parents=True, exist_ok=True)
    return cache


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", type=Path, default=ROOT / "profiles" / "a100-h100.yaml")
    parser.add_argument("--cache", help=f"download/build folder (default {DEFAULT_CACHE})")
    parser.add_argument("--tu", default=DEFAULT_TU, help="kernel source, relative to the sdist")
    parser.add_argument("--threads", type=int, default=2,
                        help="nvcc --threads cap (the profile's NVCC_THREADS if lower)")
    parser.add_argument("--nvcc")
    parser.add_argument("--cuobjdump")
    parser.add_argument("--timeout-min", type=float, default=25.0, help="per compile")
    args = parser.parse_args()
    try:
        facts = profile_facts(args.profile)
        cache = cache_dir(args.cache)
        cuda_major = int(facts.cuda_version.split(".")[0])
        nvcc, nvcc_release = find_nvcc(args.nvcc, cuda_major)
        cuobjdump = find_cuobjdump(args.cuobjdump, nvcc)
        too_new = [a for a in facts.fa_archs if a in FA_GENCODE
                   and tuple(map(int, nvcc_release.split("."))) < FA_GENCODE[a][1]]
        if too_new:
            raise SetupError(f"nvcc {nvcc_release} is too old for archs {too_new}: "
                             "flash-attn's setup.py would drop them silently")
        python = helper_venv(cache, facts)
        src = fetch_sdist(cache, python, facts)
        torch_dir, header_source = torch_headers(cache, python, facts, cuda_major)
        setup_text = (src / "setup.py").read_text(encoding="utf-8")
        cpp_ext = (torch_dir / "utils" / "cpp_extension.py").read_text(encoding="utf-8")
        check_flags(setup_text, cpp_ext, facts, args.tu)
    except SetupError as exc:
        print(f"flash-attn kernel bench: SETUP FAILED: {exc}", file=sys.stderr)
        return 2

    threads = max(1, min(args.threads, facts.nvcc_threads))
    print(f"profile        {facts.profile}")
    print(f"               FLASH_ATTN_CUDA_ARCHS={';'.join(facts.fa_archs)}  "
          f"TORCH_CUDA_ARCH_LIST={facts.torch_arch_list} (unused: setup.py passes -gencode)  "
          f"NVCC_THREADS={facts.nvcc_threads} (here --threads {threads})")
    print(f"flash-attn     {facts.fa_version} sdist: {src}")
    print(f"kernel TU      {args.tu}")
    print(f"torch headers  {header_source}")
    print(f"nvcc           {nvcc} (CUDA {nvcc_release}; profile CUDA {facts.cuda_version})")
    print(f"cuobjdump      {cuobjdump}")
    print("flags          setup.py nvcc_flags, -gencode and --threads found literally in "
          "setup.py; torch's flags in its cpp_extension.py")

    audit = load_arch_audit()
    objdir = cache / "obj"
    objdir.mkdir(exist_ok=True)
    results = []
    stem = Path(args.tu).stem
    for arch in facts.fa_archs:
        result = Result(arch)
        obj = objdir / f"{stem}.sm_{arch}.o"
        obj.unlink(missing_ok=True)
        cmd = nvcc_command(nvcc, src, torch_dir, args.tu, arch, threads, obj)
        print(f"\n[sm_{arch}] {' '.join(cmd)}", flush=True)
        timed_compile(cmd, objdir / f"{stem}.sm_{arch}.log", args.timeout_min * 60, result)
        if result.rc != 0 or not obj.is_file():
            log = (objdir / f"{stem}.sm_{arch}.log").read_text(errors="replace")
            print(f"[sm_{arch}] nvcc failed (rc {result.rc}) after {result.seconds:.0f} s:\n"
                  f"{log[-3000:]}", file=sys.stderr)
        else:
            inspect_object(cuobjdump, obj, audit, result)
            print(f"[sm_{arch}] {result.seconds:.0f} s; cuobjdump --list-elf {obj.name}:\n"
                  f"{result.listing}", flush=True)
        results.append(result)

    print(f"\n{'arch':<6} {'seconds':>8} {'peak RSS':>10} {'tree RSS':>10} {'biggest':<9} "
          f"{'SASS (cuobjdump)':<18} {'audit':<10} {'PTX':>3} {'kernels':>7}  ok")
    failed = []
    for res in results:
        want = f"sm_{res.arch}"
        # Exactly the one arch asked for, seen alike by the image's audit, with kernels in it.
        ok = (res.rc == 0 and res.sass == (want,) and res.audit == (want,)
              and res.kernels > 0)
        if not ok:
            failed.append(want)
        print(f"{want:<6} {res.seconds:>8.1f} {res.maxrss_kib / 2**20:>6.2f} GiB "
              f"{res.tree_kib / 2**20:>6.2f} GiB {res.top:<9} {','.join(res.sass) or '-':<18} "
              f"{','.join(res.audit) or '-':<10} {res.ptx:>3} {res.kernels:>7}  "
              f"{'yes' if ok else 'NO'}")
    print("peak RSS: largest single process (wait4); tree RSS: nvcc and its children "
          "together, sampled every 0.5 s; biggest: the largest process at that sample; "
          "audit: templates/context/arch_audit.py on the object")
    expected = set(facts.expected_sass)
    if not expected <= {f"sm_{r.arch}" for r in results}:
        failed.append(f"profile expects {sorted(expected)}")
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"ok: {', '.join(sorted(expected))} SASS compiled from flash-attn {facts.fa_version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
