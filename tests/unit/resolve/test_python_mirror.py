"""build.python_mirror: an air-gapped CPython for ``build.python_from: uv``.

uv fetches python-build-standalone archives from Astral's copy of the GitHub releases; no
machine of this project reaches either, and no package registry it reaches carries the
archives (``pbs-installer`` on PyPI lists their URLs and checksums only). So the real default
path cannot be built here. What these tests prove instead, with the real uv the images pin:

* the profile setting, its checks (credentials, query, python_from: image) and the Dockerfile
  text (build stages only, never the runtime stage or labels);
* a real ``uv python install`` pointed at a loopback mirror asks that mirror for exactly
  ``MIRROR/<release>/<archive>`` of the download uv's own list names, and refuses an archive
  whose sha256 is not the one built into uv (the stand-in archive fails where a wrong or
  tampered mirror would);
* the same inside a real BuildKit build of the rendered Dockerfile (daemon test).

What stays unverified: extracting a genuine archive from a mirror, the venv on top of it and
the runtime stage's copy of that interpreter (docs/python-lock.md, "Air-gapped CPython").
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from uv import find_uv_bin

from dockergen.knowledge.facts import facts as known_facts
from dockergen.parts import python
from tests.conftest import ROOT, run_cli
from tests.support.bad_profile_cases import VALID

KNOWN = known_facts()  # the shipped knowledge

UV = find_uv_bin()
MIRROR_ENV = "UV_PYTHON_INSTALL_MIRROR"


def _profile(tmp: Path, build_extra: str) -> Path:
    text = VALID.replace("  memory_gib: 64", "  memory_gib: 64\n" + build_extra, 1)
    assert text != VALID
    path = tmp / "profile.yaml"
    path.write_text(text)
    return path


def _stages(dockerfile: str) -> tuple[str, str]:
    """(build stages, runtime stage) of a rendered Dockerfile."""
    head, sep, runtime = dockerfile.rpartition("\nFROM ")
    assert sep and " AS runtime" in runtime.splitlines()[0], runtime.splitlines()[0]
    return head, runtime


# --- the setting -------------------------------------------------------------------------

def test_mirror_is_set_in_the_build_stages_only(tmp_path: Path) -> None:
    _profile(tmp_path, "  python_mirror: https://mirror.example.com/pbs")
    result = run_cli("render", "-q", "profile.yaml", "-o", "out", cwd=tmp_path)
    assert result.rc == 0, result.err
    dockerfile = (tmp_path / "out" / "Dockerfile").read_text()
    build, runtime = _stages(dockerfile)
    assert f"ENV {MIRROR_ENV}=https://mirror.example.com/pbs\n" in build
    # set before `uv python install` reads it
    assert build.index(MIRROR_ENV) < build.index("uv python install")
    assert MIRROR_ENV not in runtime and "mirror.example.com" not in runtime
    lock = json.loads((tmp_path / "out" / "dockergen.resolved.json").read_text())
    assert lock["profile"]["build"]["python_mirror"] == "https://mirror.example.com/pbs"


def test_no_mirror_renders_no_mirror(tmp_path: Path) -> None:
    # every shipped example: uv's default source; the lock records the unset field
    for dockerfile in sorted((ROOT / "examples").glob("*/Dockerfile")):
        assert MIRROR_ENV not in dockerfile.read_text(), dockerfile
    for lock in sorted((ROOT / "examples").glob("*/dockergen.resolved.json")):
        assert json.loads(lock.read_text())["profile"]["build"]["python_mirror"] is None, lock


def test_file_mirror_is_accepted(tmp_path: Path) -> None:
    _profile(tmp_path, "  python_mirror: file:///srv/pbs")
    result = run_cli("render", "-q", "profile.yaml", "-o", "out", cwd=tmp_path)
    assert result.rc == 0, result.err
    assert f"ENV {MIRROR_ENV}=file:///srv/pbs\n" in (tmp_path / "out" / "Dockerfile").read_text()


@pytest.mark.parametrize(("value", "secret", "shown"), [
    ("https://dguser:s3cretpass@mirror.example.com/pbs", "s3cretpass",
     "'https://mirror.example.com/pbs'"),
    ("https://tok3nvalue@mirror.example.com/pbs", "tok3nvalue",
     "'https://mirror.example.com/pbs'"),
    ("https://mirror.example.com/pbs?token=tok3nvalue", "tok3nvalue",
     "'https://mirror.example.com/pbs'"),
], ids=["user-password", "token-user", "query"])
def test_credentials_are_refused_and_never_echoed(value: str, secret: str, shown: str,
                                                  tmp_path: Path) -> None:
    _profile(tmp_path, f"  python_mirror: {value}")
    result = run_cli("render", "profile.yaml", "-o", "out", cwd=tmp_path)
    assert result.rc == 2
    assert "Traceback" not in result.err and secret not in result.err + result.out
    line = result.err.splitlines()[0]
    assert line.startswith("profile.yaml:24:18: build.python_mirror: the URL carries "), line
    assert shown in line and "python_mirror: https://mirror.example.com/" in line
    assert not (tmp_path / "out").exists()
    # the URL the message offers is itself valid
    _profile(tmp_path, "  python_mirror: " + shown.strip("'"))
    assert run_cli("validate", "profile.yaml", cwd=tmp_path).rc == 0


def test_other_schemes_are_refused_with_a_valid_fix(tmp_path: Path) -> None:
    _profile(tmp_path, "  python_mirror: ftp://mirror.example.com/pbs")
    result = run_cli("validate", "profile.yaml", cwd=tmp_path)
    assert result.rc == 2 and "Traceback" not in result.err
    assert result.err.splitlines()[0] == (
        "profile.yaml:24:18: build.python_mirror: 'ftp://mirror.example.com/pbs' is not an "
        "http(s) URL without credentials, query or spaces, nor a file:///absolute/path; write "
        "it in that form, e.g. `python_mirror: https://mirror.example.com/python-build-standalone`"
        " (the allowed form is the pattern of build.python_mirror in `dockergen schema`)")
    for fixed in ("https://mirror.example.com/python-build-standalone", "file:///srv/pbs"):
        _profile(tmp_path, f"  python_mirror: {fixed}")
        assert run_cli("validate", "profile.yaml", cwd=tmp_path).rc == 0


def test_mirror_with_python_from_image_is_an_error_with_fixes(tmp_path: Path) -> None:
    # python 3.12 is what ubuntu24.04 ships, so only the mirror is wrong
    base = "  python_from: image\n  python_mirror: https://mirror.example.com/pbs"
    path = _profile(tmp_path, base)
    path.write_text(path.read_text().replace("  os: ubuntu22.04", "  os: ubuntu24.04", 1))
    assert "  os: ubuntu24.04" in path.read_text() and 'python: "3.12"' in path.read_text()
    result = run_cli("validate", "profile.yaml", cwd=tmp_path)
    assert result.rc == 2 and "Traceback" not in result.err
    errors = [ln for ln in result.err.splitlines() if ln.startswith("profile.yaml:")
              and not ln.endswith("[warning]")]
    assert errors == [
        "profile.yaml:25:18: build.python_mirror: python_from: image uses the base image's "
        "python3, so uv downloads no CPython and the mirror would never be read; remove "
        "build.python_mirror, or set build.python_from: uv"]
    # both fixes are valid
    bad = path.read_text()
    for fixed in (bad.replace("  python_mirror: https://mirror.example.com/pbs\n", ""),
                  bad.replace("python_from: image", "python_from: uv")):
        assert fixed != bad
        path.write_text(fixed)
        assert run_cli("validate", "profile.yaml", cwd=tmp_path).rc == 0, fixed


def test_explain_shows_where_cpython_comes_from(tmp_path: Path) -> None:
    _profile(tmp_path, "  python_mirror: https://mirror.example.com/pbs")
    result = run_cli("explain", "profile.yaml", cwd=tmp_path)
    assert result.rc == 0, result.err
    lines = result.out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:1] == [MIRROR_ENV])
    assert lines[at].split() == [MIRROR_ENV, "https://mirror.example.com/pbs"]
    assert ("https://mirror.example.com/pbs/<release>/<archive> (build.python_mirror) instead "
            f"of {python.downloads(KNOWN)['default_prefix']}/<release>/<archive>") in lines[at + 1]
    assert "sha256 built into uv" in lines[at + 1] and lines[at + 2].strip().startswith("src:")

    slash = run_cli("explain", "profile.yaml", "--set",
                    "build.python_mirror=https://mirror.example.com/pbs/", cwd=tmp_path)
    assert slash.rc == 0 and "https://mirror.example.com/pbs/<release>/<archive>" in slash.out

    plain = run_cli("explain", str(ROOT / "profiles" / "a100-bf16.yaml"))
    assert plain.rc == 0, plain.err
    assert any(line.split() == [MIRROR_ENV, "(unset)"] for line in plain.out.splitlines())


# --- the real uv against a loopback mirror -----------------------------------------------

def _stand_in_archive() -> bytes:
    """A well-formed .tar.gz in the install_only layout, but not the genuine archive."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"#!/bin/sh\necho stand-in\n"
        info = tarfile.TarInfo("python/bin/python3")
        info.size, info.mode, info.mtime = len(data), 0o755, 0
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@contextmanager
def mirror_server(archive: bytes) -> Iterator[tuple[str, list[str]]]:
    """A loopback mirror answering every ``.tar.gz`` with ``archive``; records each path."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server API
            seen.append(self.path)
            if not self.path.endswith(".tar.gz"):
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(archive)))
            self.end_headers()
            self.wfile.write(archive)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/pbs", seen
    finally:
        server.shutdown()
        server.server_close()


def expected_download(version: str) -> str:
    """The URL uv's built-in list names for ``uv python install VERSION`` on this host."""
    out = subprocess.run([UV, "python", "list", version, "--only-downloads",
                          "--output-format", "json"], capture_output=True, text=True,
                         check=True, env={"PATH": "/usr/bin:/bin", "UV_NO_CONFIG": "1"}).stdout
    downloads = [d for d in json.loads(out) if d["implementation"] == "cpython"
                 and d["variant"] == "default"]
    assert downloads, out
    return str(downloads[0]["url"])  # newest first, as `uv python install` picks


def _uv_install(version: str, mirror: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "UV_NO_CONFIG": "1", MIRROR_ENV: mirror,
           "UV_PYTHON_INSTALL_DIR": str(tmp / "python"), "UV_CACHE_DIR": str(tmp / "cache"),
           "HOME": str(tmp)}
    return subprocess.run([UV, "python", "install", version], capture_output=True, text=True,
                          env=env, timeout=120, check=False)


def test_default_prefix_fact_is_the_one_uv_uses() -> None:
    # python.yaml's default_prefix is what the pinned uv really downloads from
    assert python.tool(KNOWN, "uv") == subprocess.run(
        [UV, "--version"], capture_output=True, text=True, check=True).stdout.split()[1]
    url = expected_download("3.12")
    assert url.startswith(python.downloads(KNOWN)["default_prefix"] + "/"), url


@pytest.mark.parametrize("version", ["3.11", "3.12"])
def test_uv_asks_the_mirror_for_the_exact_archive_and_refuses_a_bad_hash(
        version: str, tmp_path: Path) -> None:
    archive = _stand_in_archive()
    url = expected_download(version)
    tail = url[len(python.downloads(KNOWN)["default_prefix"]):]  # /<release>/<archive>
    assert tail.count("/") == 2 and "%2B" in tail and tail.endswith(".tar.gz"), tail
    with mirror_server(archive) as (mirror, seen):
        proc = _uv_install(version, mirror, tmp_path)
    assert proc.returncode != 0
    assert seen and set(seen) == {"/pbs" + tail}, seen
    assert "Hash mismatch" in proc.stderr, proc.stderr
    assert hashlib.sha256(archive).hexdigest() in proc.stderr  # the bytes the mirror served
    assert not list((tmp_path / "python").glob("cpython-*")), "a refused archive was installed"


def test_file_mirror_reads_the_same_layout_and_refuses_a_bad_hash(tmp_path: Path) -> None:
    url = expected_download("3.12")
    tail = url[len(python.downloads(KNOWN)["default_prefix"]):]
    release, name = tail.strip("/").split("/")
    (tmp_path / "mirror" / release).mkdir(parents=True)
    # on disk the archive name carries a literal '+' (the URL's %2B)
    (tmp_path / "mirror" / release / name.replace("%2B", "+")).write_bytes(_stand_in_archive())
    proc = _uv_install("3.12", f"file://{tmp_path / 'mirror'}", tmp_path)
    assert proc.returncode != 0 and "Hash mismatch" in proc.stderr, proc.stderr


def test_a_mirror_without_the_archive_fails_naming_it(tmp_path: Path) -> None:
    (tmp_path / "mirror").mkdir()
    proc = _uv_install("3.12", f"file://{tmp_path / 'mirror'}", tmp_path)
    assert proc.returncode != 0
    name = expected_download("3.12").rsplit("/", 1)[1]
    assert name.replace("%2B", "+") in proc.stderr or name in proc.stderr, proc.stderr


# --- the rendered Dockerfile in a real BuildKit build ------------------------------------

@pytest.mark.daemon
def test_build_fetches_cpython_from_the_mirror_and_stops_on_a_bad_hash(
        index: str, docker_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # The default path (python_from: uv) of the stand-in profile, with the mirror on
    # 127.0.0.1 (the build runs with --network host, as an air-gapped farm's mirror would be
    # reachable from its builders). The stand-in archive must fail exactly where a genuine
    # one would pass: at uv's sha256 check, after asking for the archive uv's list names.
    ref = "localhost:5000/dockergen-test/pymirror:should-not-exist"
    tail = expected_download("3.11")[len(python.downloads(KNOWN)["default_prefix"]):]
    archive = _stand_in_archive()
    with mirror_server(archive) as (mirror, seen):
        result = run_cli("build", str(ROOT / "tests" / "profiles" / "standin.yaml"),
                         "--network", "host", "-q", "--progress", "plain",
                         "--set", f"build.pip_index_url={index}/simple",
                         "--set", f"build.torch_index_url={index}",
                         "--set", "build.python_from=uv",
                         "--set", f"build.python_mirror={mirror}",
                         "--tag", ref, "-o", str(tmp_path / "ctx"))
    dockerfile = (tmp_path / "ctx" / "Dockerfile").read_text()
    assert f"ENV {MIRROR_ENV}={mirror}\n" in dockerfile
    assert result.rc == 5, result.err[-3000:]
    assert set(seen) == {"/pbs" + tail}, seen
    assert "Hash mismatch" in result.err and hashlib.sha256(archive).hexdigest() in result.err
    assert "uv python install" in result.err and "Traceback" not in result.err
    record = json.loads((tmp_path / "ctx" / "build-record.json").read_text())
    assert record["status"] == "failed"
    with pytest.raises(Exception, match="No such image"):
        docker_client.api.inspect_image(ref)
