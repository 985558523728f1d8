"""`dockergen outdated`: newer releases on a real simple-API index, and the rules' verdicts.

A small index on 127.0.0.1 answers as PEP 503 HTML or PEP 691 JSON (by the request's Accept),
optionally behind Basic auth; the verdicts come from resolving the shipped profiles for real.
One test reads PyPI itself (network-marked; CI reaches PyPI).
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import PROFILES, run_cli

H100 = str(PROFILES / "h100-fp8.yaml")  # vLLM 0.33.0, torch 2.14.0
A100_H100 = str(PROFILES / "a100-h100.yaml")  # vLLM 0.32.0 with a flash-attn build
USER, PASSWORD = "dgtest", "idx-pass-7Qw2"
FILES = {
    "vllm": ["vllm-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl", "vllm-0.32.0.tar.gz",
             "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl",
             "vllm-0.36.0-cp38-abi3-manylinux_2_28_x86_64.whl",
             "vllm-0.37.0rc1-cp38-abi3-manylinux_2_28_x86_64.whl"],
    "torch": ["torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl",
              "torch-2.14.0-cp311-cp311-manylinux_2_28_x86_64.whl"],
    "flash-attn": ["flash_attn-2.8.3.post2.tar.gz"],
}


class _Index(BaseHTTPRequestHandler):
    auth: str | None = None

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.auth and self.headers.get("Authorization") != f"Basic {self.auth}":
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="index"')
            self.end_headers()
            return
        name = self.path.strip("/").split("/")[-1]
        if name not in FILES:
            self.send_response(404)
            self.end_headers()
            return
        if "application/vnd.pypi.simple.v1+json" in self.headers.get("Accept", ""):
            body = json.dumps({"meta": {"api-version": "1.1"}, "name": name, "files": [
                {"filename": f, "url": f"../../files/{f}", "hashes": {}} for f in FILES[name]]})
            kind = "application/vnd.pypi.simple.v1+json"
        else:
            body = "<html><body>" + "".join(f'<a href="../../files/{f}">{f}</a><br/>'
                                            for f in FILES[name]) + "</body></html>"
            kind = "text/html"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


def _serve(auth: str | None) -> Iterator[str]:
    handler = type("Handler", (_Index,), {"auth": auth})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/simple"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def index() -> Iterator[str]:
    yield from _serve(None)


@pytest.fixture(scope="module")
def private_index() -> Iterator[str]:
    yield from _serve(base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode())


def test_a_valid_newer_release_is_exit_9_with_the_verdict_of_each(index: str) -> None:
    result = run_cli("outdated", H100, "--set", "engine.version=0.32.0", "--index", index)
    assert result.rc == 9, result.err
    lines = result.out.splitlines()
    assert "  vllm 0.32.0 (engine.version): 2 newer" in lines
    assert any(line.split()[:3] == ["0.33.0", "known", "ok"] for line in lines)
    assert any(line.split()[:4] == ["0.36.0", "not", "known", "unknown:"] for line in lines)
    assert "0.37.0rc1" not in result.out  # pre-releases are not listed
    assert any(line.split()[:2] == ["2.14.0", "known"] and "moves with the engine" in line
               for line in lines)  # torch moves with the engine: no verdict of its own
    assert result.err.strip() == ("dockergen: 1 newer release(s) the profile can move to as "
                                  f"it is: vllm 0.33.0 ({H100})")


def test_no_valid_newer_release_is_exit_0_and_json_for_machines(index: str) -> None:
    result = run_cli("outdated", H100, "--index", index, "--json")
    assert result.rc == 0, result.err
    (report,) = json.loads(result.out)
    vllm = next(p for p in report["packages"] if p["name"] == "vllm")
    assert vllm["current"] == "0.33.0" and vllm["setting"] == "engine.version"
    assert [(n["version"], n["known"], n["verdict"]) for n in vllm["newer"]] == [
        ("0.36.0", False, "unknown")]
    assert report["index"] == index


def test_the_profile_is_read_once_and_each_release_tried_on_what_was_read(
        index: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The verdicts come from the document read at the start, not from the file read again
    per release (a file changed meanwhile would give verdicts on another profile)."""
    from dockergen.input import merge as loader_merge
    from dockergen.releases import outdated

    read: list[str] = []
    real = loader_merge.read_yaml_file

    def counted(path: Path, display: str) -> object:
        read.append(display)
        return real(path, display)

    monkeypatch.setattr(loader_merge, "read_yaml_file", counted)
    report = outdated.check(Path(H100), ("engine.version=0.32.0",), index)
    verdicts = [n.verdict for p in report.packages for n in p.newer if p.setting]
    assert "ok" in verdicts  # at least one release was resolved for its verdict
    assert len(read) == 2 and len(set(read)) == 2, read  # h100-fp8.yaml and base.yaml, once


def test_a_release_that_breaks_a_rule_gets_that_rule_as_its_verdict(index: str) -> None:
    """a100-h100 builds flash-attn 2.8.3.post2, which forces C++17: vLLM 0.33.0's torch 2.14
    needs C++20, so moving the engine is an error, named, and not counted as valid."""
    result = run_cli("outdated", A100_H100, "--index", index, "--json")
    assert result.rc == 0, result.err
    (report,) = json.loads(result.out)
    vllm = next(p for p in report["packages"] if p["name"] == "vllm")
    moved = next(n for n in vllm["newer"] if n["version"] == "0.33.0")
    assert moved["verdict"] == "error" and "C++" in moved["detail"], moved
    assert [p["name"] for p in report["packages"]] == ["vllm", "torch", "flash-attn"]


def test_credentials_come_from_netrc_or_the_environment_and_are_never_shown(
        private_index: str, tmp_path: Path) -> None:
    refused = run_cli("outdated", H100, "--index", private_index,
                      env={"NETRC": str(tmp_path / "none")})
    assert refused.rc == 3
    assert "HTTP 401; give credentials in DOCKERGEN_INDEX_USERNAME/DOCKERGEN_INDEX_PASSWORD " \
           "or netrc" in refused.err
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1 login {USER} password {PASSWORD}\n")
    netrc.chmod(0o600)
    for env in ({"NETRC": str(netrc)}, {"NETRC": str(tmp_path / "none"),
                                        "DOCKERGEN_INDEX_USERNAME": USER,
                                        "DOCKERGEN_INDEX_PASSWORD": PASSWORD}):
        result = run_cli("outdated", H100, "--index", private_index, env=env)
        assert result.rc == 0, result.err
        assert "0.36.0" in result.out
        assert PASSWORD not in result.out + result.err


@pytest.mark.parametrize("url", [f"https://{USER}:{PASSWORD}@pypi.example/simple",
                                 "ftp://pypi.example/simple", "pypi.example/simple",
                                 "https://pypi.example/simple?token=" + PASSWORD])
def test_an_index_url_with_credentials_or_no_http_is_refused_unechoed(url: str) -> None:
    result = run_cli("outdated", H100, "--index", url)
    assert result.rc == 64, result.err
    assert PASSWORD not in result.out + result.err


def test_an_unreachable_index_is_exit_3() -> None:
    result = run_cli("outdated", H100, "--index", "http://127.0.0.1:9/simple")
    assert result.rc == 3
    assert "cannot be read" in result.err and "Traceback" not in result.err


@pytest.mark.network
def test_pypi_itself() -> None:
    """The real PyPI: vLLM has releases after 0.33.0 (0.34.0 on 2026-12-02), each with a
    verdict; the exit code says whether one is valid."""
    result = run_cli("outdated", H100, "--json")
    assert result.rc in (0, 9), result.err
    (report,) = json.loads(result.out)
    vllm = next(p for p in report["packages"] if p["name"] == "vllm")
    assert "0.34.0" in [n["version"] for n in vllm["newer"]]
    assert all(n["verdict"] for n in vllm["newer"])
    assert (result.rc == 9) == any(n["verdict"].startswith("ok") for p in report["packages"]
                                   for n in p["newer"])


def test_a_mirror_given_with_index_is_the_index_every_rule_judges(
        index: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM 0.34.0 pins a flashinfer-python PyPI never carried: from PyPI it is an error,
    but `--index MIRROR` reads the releases from the mirror, so the verdict is the one of a
    profile installing from it: a warning that the mirror must carry the pin."""
    from dockergen.releases import outdated

    monkeypatch.setitem(FILES, "vllm", [*FILES["vllm"],
                                        "vllm-0.34.0-cp38-abi3-manylinux_2_28_x86_64.whl"])
    report = outdated.check(Path(H100), (), index)
    vllm = next(p for p in report.packages if p.name == "vllm")
    moved = next(n for n in vllm.newer if n.version == "0.34.0")
    assert moved.verdict.startswith("ok"), moved
    assert f"the build must find it on {index}" in moved.detail, moved
    pypi = outdated.index_fields(outdated.one_image(Path(H100), (), "outdated"),
                                 "https://pypi.org/simple/")
    assert pypi == {}  # PyPI in full is PyPI: nothing to judge differently
