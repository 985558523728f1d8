"""The ELF and fatbin readers, fed broken and hostile files: each read finishes within a
bound and raises only the reader's own error (``ElfError`` inside the image audit,
``KernelCodeError`` in dockergen), and the audit reports such a file as a problem in its
JSON report, never a traceback. Seeds are real files: a shared object built with the
machine's gcc, and the ``.nv_fatbin`` of a library built with the real nvcc (copied out
with objcopy, so a mutation lands in the fatbin most of the time)."""

from __future__ import annotations

import json
import signal
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dockergen.knowledge import kernels
from tests.unit.building.test_arch_audit import KERNEL, NVCC
from tests.unit.building.test_image_audit import SCRIPT, image_audit

pytestmark = pytest.mark.skipif(NVCC is None, reason="needs nvcc (CUDA toolkit)")
FUZZ = settings(max_examples=200, deadline=2000, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
BOUND_S = 5  # one read of a few kB: far more than it takes, far less than a hang


@contextmanager
def _bounded(seconds: float = BOUND_S) -> Iterator[None]:
    """Fail (not hang) when the body runs longer than ``seconds``: a reader that loops."""
    def _expire(_signum: int, _frame: object) -> None:
        raise TimeoutError(f"still reading after {seconds} s: the reader loops")
    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _build(work: Path) -> tuple[bytes, bytes, int]:
    """(a gcc shared object with a soname and DT_NEEDED, the nvcc fatbin section copied into
    an ELF of its own, the offset of that section in it)."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "a.c").write_text("int answer(void) { return 42; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libanswer.so.1,--no-as-needed", "-o",
                    str(work / "a.so"), str(work / "a.c"), "-lm"], check=True)
    (work / "k.cu").write_text(KERNEL)
    subprocess.run([NVCC, "-shared", "-Xcompiler", "-fPIC", "-o", str(work / "k.so"),  # type: ignore[list-item]
                    str(work / "k.cu"), "-gencode", "arch=compute_80,code=sm_80",
                    "-gencode", "arch=compute_90,code=compute_90"], check=True,
                   capture_output=True)
    subprocess.run(["objcopy", "-j", ".nv_fatbin", str(work / "k.so"), str(work / "fat.so")],
                   check=True, capture_output=True)
    fat = (work / "fat.so").read_bytes()
    return (work / "a.so").read_bytes(), fat, image_audit.elf_sections(fat)[".nv_fatbin"][0]


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes, int]:
    return _build(tmp_path_factory.mktemp("elf-seeds"))


def _with(data: bytes, offset: int, fmt: str, *values: int) -> bytes:
    """``data`` with ``values`` packed over it at ``offset``."""
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, *values)
    return bytes(out)


def _mutate(seed: bytes, hot: int, change: st.DataObject) -> bytes:
    """The seed cut short, with bytes overwritten (near ``hot``, a header, half the time),
    or with a header field set to an edge value."""
    how = change.draw(st.sampled_from(["cut", "bytes", "field"]))
    if how == "cut":
        return seed[:change.draw(st.integers(0, len(seed)))]
    near = change.draw(st.booleans())
    lo, hi = (hot, min(hot + 128, len(seed) - 1)) if near else (0, len(seed) - 1)
    at = change.draw(st.integers(lo, hi))
    if how == "bytes":
        patch = change.draw(st.binary(min_size=1, max_size=16))
        return seed[:at] + patch + seed[at + len(patch):]
    fmt = change.draw(st.sampled_from(["<H", "<I", "<Q"]))
    value = change.draw(st.sampled_from([0, 1, 15, 16, 47, 48, 2**16 - 1, 2**31, 2**63]))
    if at + struct.calcsize(fmt) > len(seed):
        return seed[:at]
    return _with(seed, at, fmt, value % (1 << 8 * struct.calcsize(fmt)))


def _read_all(data: bytes) -> None:
    """Every reader the audit runs on a file, as it runs them."""
    sections = image_audit.elf_sections(data)
    image_audit.needed(data, sections)
    image_audit._soname(data, sections)
    image_audit.fatbin_code(data, sections)


def _only_own_errors(read: Callable[[], object], error: type[Exception]) -> None:
    with _bounded(), suppress(error):
        read()


def test_the_seeds_read_as_their_compilers_wrote_them(seeds: tuple[bytes, bytes, int]) -> None:
    gcc, fat, _ = seeds
    sections = image_audit.elf_sections(gcc)
    assert image_audit._soname(gcc, sections) == "libanswer.so.1"
    assert "libm.so.6" in image_audit.needed(gcc, sections)
    assert kernels.code_of(fat) == ("ptx_90", "sass_80")


@FUZZ
@given(change=st.data())
def test_a_broken_shared_object_is_read_or_refused(seeds: tuple[bytes, bytes, int],
                                                   change: st.DataObject) -> None:
    gcc, _, _ = seeds
    data = _mutate(gcc, 0x28, change)  # near the section header table's offset and count
    _only_own_errors(lambda: _read_all(data), image_audit.ElfError)


@FUZZ
@given(change=st.data())
def test_a_broken_fatbin_is_read_or_refused(seeds: tuple[bytes, bytes, int],
                                            change: st.DataObject) -> None:
    _, fat, start = seeds
    data = _mutate(fat, start, change)
    _only_own_errors(lambda: kernels.code_of(data), kernels.KernelCodeError)


@pytest.mark.parametrize("field", ["header size 0", "header size 0, no entries",
                                   "entry header 8", "entries past the section"])
def test_fatbin_sizes_that_would_not_move_the_reader_on_are_refused(
        seeds: tuple[bytes, bytes, int], field: str) -> None:
    """A header size of 0 made the reader read the same fatbin forever."""
    _, fat, start = seeds
    header_size = struct.unpack_from("<H", fat, start + 6)[0]
    data = {"header size 0": _with(fat, start + 6, "<H", 0),
            "header size 0, no entries": _with(fat, start + 6, "<HQ", 0, 0),
            "entry header 8": _with(fat, start + header_size + 4, "<I", 8),
            "entries past the section": _with(fat, start + 8, "<Q", 1 << 40)}[field]
    with _bounded(), pytest.raises(kernels.KernelCodeError, match="fatbin"):
        kernels.code_of(data)


@pytest.mark.parametrize("size", [5, 0x40, 0x3F, 200])
def test_a_truncated_elf_file_is_refused_with_its_reason(seeds: tuple[bytes, bytes, int],
                                                         size: int) -> None:
    """A file cut after its ELF magic raised struct.error (or IndexError) from the reader."""
    gcc, fat, _ = seeds
    for data in (gcc[:size], fat[:size]):
        with pytest.raises(kernels.KernelCodeError, match="past the end|cut short"):
            kernels.code_of(data)


def test_the_audit_reports_broken_files_as_problems(seeds: tuple[bytes, bytes, int],
                                                    tmp_path: Path) -> None:
    """Inside the image the audit's answer is its JSON report: a broken file is a problem
    in it (exit 1), the other libraries are still audited, and it ends promptly."""
    gcc, fat, start = seeds
    root = tmp_path / "venv"
    root.mkdir()
    (root / "loops.so").write_bytes(_with(fat, start + 6, "<HQ", 0, 0))
    (root / "cut.so").write_bytes(gcc[:200])
    (root / "ok.so").write_bytes(gcc)
    result = subprocess.run([sys.executable, str(SCRIPT), "--cuda-major", "13", "--targets",
                             "9.0", str(root)], capture_output=True, text=True, timeout=60,
                            check=False)
    report = json.loads(result.stdout)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert report["elf_files"] == 1  # ok.so, audited as before
    assert [p.split(":")[0] for p in report["problems"]] == [f"{root}/cut.so",
                                                             f"{root}/loops.so"]
    assert all("starts as an ELF file but cannot be read as one" in p
               for p in report["problems"])
