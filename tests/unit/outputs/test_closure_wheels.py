"""Every distribution of the locked closure has a wheel for the image's Python and machine.

A local PEP 503 index (loopback) shaped like PyPI holds ``native-ext``: 2.0 with an x86_64
wheel and its sdist only (a compiled project: its sdist needs its toolchain), 1.9 with
x86_64 and aarch64 wheels; ``pure-ext`` 1.0 as an sdist only. The tags come from
``packaging.tags`` for the target interpreter and platform, never the host's.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dockergen.outputs import closure
from tests.conftest import PROFILES, run_cli
from tests.support.twoindex import PYPI_LIKE, PYTORCH_LIKE, build_index, serve


def _wheel(out: Path, name: str, version: str, tag: str) -> Path:
    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    wheel = f"Wheel-Version: 1.0\nGenerator: dockergen-tests\nRoot-Is-Purelib: false\nTag: {tag}\n"
    path = out / f"{name.replace('-', '_')}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{name.replace('-', '_')}/__init__.py", "")
        zf.writestr(f"{dist}/METADATA", meta)
        zf.writestr(f"{dist}/WHEEL", wheel)
        zf.writestr(f"{dist}/RECORD", "")
    return path


def _sdist(out: Path, name: str, version: str) -> Path:
    """An sdist whose PKG-INFO (Metadata 2.2, nothing dynamic) uv reads without building."""
    base = f"{name.replace('-', '_')}-{version}"
    path = out / f"{base}.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for member, text in {"PKG-INFO": f"Metadata-Version: 2.2\nName: {name}\n"
                                         f"Version: {version}\n",
                             "pyproject.toml": "[build-system]\nrequires = []\n"}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{base}/{member}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def _add(root: Path, name: str, files: list[Path]) -> None:
    (root / name).mkdir(parents=True, exist_ok=True)
    links = "".join(f'<a href="../files/{f.name}#sha256='
                    f'{hashlib.sha256(f.read_bytes()).hexdigest()}">{f.name}</a>\n'
                    for f in files)
    (root / name / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    tmp = tmp_path_factory.mktemp("closure")
    simple = build_index(tmp / "pypi" / "simple", PYPI_LIKE)
    build_index(tmp / "whl" / "cu130", PYTORCH_LIKE)
    files = simple / "files"
    _add(simple, "native-ext", [
        _wheel(files, "native-ext", "2.0", "cp312-cp312-manylinux_2_28_x86_64"),
        _sdist(files, "native-ext", "2.0"),
        _wheel(files, "native-ext", "1.9", "cp312-cp312-manylinux_2_28_x86_64"),
        _wheel(files, "native-ext", "1.9", "cp312-cp312-manylinux_2_28_aarch64")])
    _add(simple, "pure-ext", [_sdist(files, "pure-ext", "1.0")])
    with serve(tmp) as base:
        yield f"{base}/pypi/simple", f"{base}/whl"


def _lock(name: str, version: str, hashes: set[str], index: str) -> str:
    """A lock entry as uv writes it (``--generate-hashes --emit-index-annotation``)."""
    lines = "".join(f" \\\n    --hash=sha256:{h}" for h in sorted(hashes))
    return f"{name}=={version}{lines}\n    # from {index}\n"


def test_the_targets_tags_are_its_own_not_the_hosts() -> None:
    arm = closure.target_tags("3.12", "aarch64-manylinux_2_35")
    assert any(str(t) == "cp312-cp312-manylinux_2_34_aarch64" for t in arm)
    assert any(str(t) == "cp312-abi3-manylinux2014_aarch64" for t in arm)
    assert any(str(t) == "py3-none-any" for t in arm)
    assert any(str(t) == "cp311-abi3-manylinux_2_28_aarch64" for t in arm)  # abi3 of older
    assert not any("x86_64" in str(t) or t.interpreter == "cp313" for t in arm)
    assert not any(str(t).startswith("cp311-cp311") for t in arm)
    assert not any(str(t).endswith("manylinux_2_36_aarch64") for t in arm)


def test_a_compiled_release_without_a_wheel_for_the_machine_is_named_with_fixes(
        index: tuple[str, str]) -> None:
    simple, _ = index
    files = {f.name: f for f in closure.outdated_index.files(simple, "native-ext")}
    hashes = {f.sha256 for f in files.values() if f.version.public == "2.0"}
    text = _lock("native-ext", "2.0", hashes, simple)
    with pytest.raises(closure.ClosureError) as err:
        closure.check(text, "3.12", "aarch64-manylinux_2_35")
    message = str(err.value)
    assert ("native-ext==2.0 (its wheels are for cp312 on manylinux_2_28_x86_64; pin "
            "native-ext==1.9 in packages.pip (releases with a wheel for Python 3.12 on "
            "aarch64-manylinux_2_35) if the engine's requirements allow it") in message, message
    # the same lock on x86_64 installs as is
    assert closure.check(text, "3.12", "x86_64-manylinux_2_35") == []


def test_a_pure_python_sdist_is_reported_not_refused(index: tuple[str, str]) -> None:
    simple, _ = index
    sha = {f.sha256 for f in closure.outdated_index.files(simple, "pure-ext")}
    text = _lock("pure-ext", "1.0", sha, simple)
    assert closure.check(text, "3.12", "aarch64-manylinux_2_35") == ["pure-ext==1.0"]


def test_lock_python_refuses_the_closure_before_writing(index: tuple[str, str],
                                                         tmp_path: Path) -> None:
    """The real uv resolves native-ext 2.0 for aarch64 from its sdist; the lock command
    refuses it (exit 2, no lock) and names the release that has an aarch64 wheel."""
    simple, torch_base = index
    profile = tmp_path / "p.yaml"
    for shipped in PROFILES.glob("*.yaml"):
        (tmp_path / shipped.name).write_text(shipped.read_text())
    profile.write_text("extends: gh200-vllm\nname: locked\npackages:\n  pip: [native-ext==2.0]\n")
    sets = ["--set", f"build.pip_index_url={simple}", "--set",
            f"build.torch_index_url={torch_base}"]
    run = run_cli("lock", "--python", str(profile), *sets)
    assert run.rc == 2, run.err
    assert ("the Python closure has distributions with no wheel for Python 3.12 on "
            "aarch64-manylinux_2_35") in run.err, run.err
    assert "native-ext==2.0 (its wheels are for cp312 on manylinux_2_28_x86_64; pin " \
        "native-ext==1.9" in run.err
    assert not (tmp_path / "p.python.lock").exists()
    assert "Traceback" not in run.err


def test_an_index_without_hashes_still_has_its_wheels_counted() -> None:
    """PEP 503 lets an index list files without hashes (the stand-in index does): which file
    the lock's hash is cannot be told, so a wheel for the target counts; a wheel for another
    machine still does not."""
    from packaging.version import Version

    from dockergen.net.index import IndexFile

    def wheel(name: str) -> IndexFile:
        return IndexFile(name, Version("1.0"), f"http://127.0.0.1/{name}", "")

    pure = closure.judge("pure", "1.0", {"a" * 64}, [wheel("pure-1.0-py3-none-any.whl")],
                         "3.11", "x86_64-manylinux_2_28")
    assert pure.kind == "wheel"
    arm = closure.judge("native", "1.0", {"a" * 64},
                        [wheel("native-1.0-cp311-cp311-manylinux_2_28_aarch64.whl")],
                        "3.11", "x86_64-manylinux_2_28")
    assert arm.kind == "missing" and "aarch64" in arm.detail
