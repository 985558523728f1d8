"""`outdated` and `upgrade` see what `validate` sees: every engine (TensorRT-LLM included),
the user's knowledge files, PyPI however its URL is written, and only profiles that make
one image.

The index is a stand-in on 127.0.0.1 serving PEP 691 JSON pages and real (small) wheels;
everything below it is the product's own code.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import PROFILES, run_cli
from tests.unit.knowledge.test_user_knowledge import FACTS


def _wheel(dist: str, version: str, requires: list[str], python: str) -> bytes:
    module = dist.replace("-", "_")
    meta = (f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
            f"Requires-Python: {python}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{module}/__init__.py", f'__version__ = "{version}"\n')
        zf.writestr(f"{module}-{version}.dist-info/METADATA", meta)
        zf.writestr(f"{module}-{version}.dist-info/RECORD", "")
    return buf.getvalue()


# package -> version -> wheel; TensorRT-LLM's next release as its METADATA pins torch
PACKAGES = {
    "tensorrt-llm": {"1.3.0": _wheel("tensorrt-llm", "1.3.0",
                                     ["torch==2.9.1", "nvidia-nccl-cu13==2.27.7"],
                                     ">=3.10,<3.13")},
    "nvidia-nccl-cu13": {"2.27.7": _wheel("nvidia-nccl-cu13", "2.27.7", [], ">=3")},
    "vllm": {v: _wheel("vllm", v, ["torch==2.14.0"], ">=3.11,<3.15")
             for v in ("0.33.0", "0.35.0")},
}


class _Index(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?", 1)[0]
        if path.startswith("/simple/"):
            name = path.strip("/").split("/")[-1]
            module = name.replace("-", "_")
            files = [{"filename": f"{module}-{v}-cp312-cp312-manylinux_2_28_x86_64.whl",
                      "url": f"/files/{name}/{v}", "hashes": {}}
                     for v in PACKAGES.get(name, {})]
            return self._send(json.dumps({"meta": {"api-version": "1.1"}, "name": name,
                                          "files": files}).encode(),
                              "application/vnd.pypi.simple.v1+json")
        m = re.fullmatch(r"/files/([^/]+)/([^/]+)", path)
        if m and m.group(2) in PACKAGES.get(m.group(1), {}):
            return self._send(PACKAGES[m.group(1)][m.group(2)], "application/octet-stream")
        return self._send(b"", "text/plain", 404)

    def _send(self, body: bytes, kind: str, status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def index() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/simple"
    server.shutdown()
    server.server_close()


def test_upgrade_of_a_tensorrt_llm_profile_derives_and_judges_the_release(index: str) -> None:
    # TensorRT-LLM keeps no kernels table: the derived rows must not ask for one
    out = run_cli("upgrade", str(PROFILES / "h100-trtllm-fp8.yaml"), "--index", index,
                  "--json")
    assert out.rc == 0, out.err
    assert "Traceback" not in out.err
    plan = json.loads(out.out)
    (move,) = plan["moves"]
    assert move["version"] == "1.3.0" and move["known"] is False
    assert move["ok"] is True, move["reasons"]
    assert plan["derived"]["1.3.0"]["torch"] == "2.9.1"


def test_releases_of_a_users_knowledge_file_are_known_to_outdated_and_upgrade(
        tmp_path: Path, index: str) -> None:
    (tmp_path / "facts.yaml").write_text(FACTS)  # adds vLLM 0.35.0
    (tmp_path / "p.yaml").write_text("extends: h100-fp8\nname: mine\n"
                                     "knowledge: [facts.yaml]\n")
    assert run_cli("validate", "p.yaml", "--set", "engine.version=0.35.0",
                   cwd=tmp_path).rc == 0
    out = run_cli("outdated", "p.yaml", "--index", index, "--json", cwd=tmp_path)
    assert out.rc in (0, 9), out.err
    (report,) = json.loads(out.out)
    vllm = next(p for p in report["packages"] if p["name"] == "vllm")
    (newer,) = vllm["newer"]
    assert newer["version"] == "0.35.0"
    assert newer["known"] is True and newer["verdict"] != "unknown", newer
    plan = json.loads(run_cli("upgrade", "p.yaml", "--index", index, "--json",
                              cwd=tmp_path).out)
    (move,) = plan["moves"]
    assert move["version"] == "0.35.0" and move["known"] is True
    assert plan["derived"] == {}  # nothing derived: the user's row is the one used


@pytest.mark.parametrize("url", ["https://pypi.org/simple", "https://pypi.org/simple/",
                                 "https://PyPI.org/simple/"])
def test_pypi_named_by_its_full_url_is_pypi_not_a_mirror(url: str) -> None:
    # vLLM 0.34.0 pins a flashinfer-python PyPI never carried: from PyPI it cannot install
    args = ("validate", "h100-fp8", "--set", "engine.version=0.34.0")
    plain = run_cli(*args)
    named = run_cli(*args, "--set", f"build.pip_index_url={url}")
    assert plain.rc == named.rc == 2, named.err
    assert "the engine cannot be installed from PyPI" in named.err
    # a real mirror may carry it: a warning to check it there
    mirror = run_cli(*args, "--set", "build.pip_index_url=https://mirror.example.com/simple")
    assert mirror.rc == 0, mirror.err
    assert "the build must find it on https://mirror.example.com/simple" in mirror.err


@pytest.mark.parametrize("command", ["outdated", "upgrade"])
def test_a_matrix_profile_is_refused_with_the_one_variant_to_run_instead(
        command: str, index: str) -> None:
    fleet = str(PROFILES / "fleet.yaml")
    out = run_cli(command, fleet, "--index", index)
    assert out.rc == 2, out.err
    assert "Traceback" not in out.err
    assert f"fleet.yaml:12:3: matrix: {command} judges one image" in out.err, out.err
    fix = re.search(r"run it on one variant: add `(.*?)` to the command", out.err)
    assert fix, out.err
    again = run_cli(command, fleet, "--index", index, *shlex.split(fix.group(1)))
    assert again.rc in (0, 9), again.err  # the fix offered is a command that runs


@pytest.mark.parametrize("command", ["outdated", "upgrade"])
def test_an_abstract_profile_is_refused_naming_the_profiles_to_give(command: str,
                                                                    index: str) -> None:
    out = run_cli(command, str(PROFILES / "base.yaml"), "--index", index)
    assert out.rc == 2, out.err
    assert "Traceback" not in out.err
    assert (f"base.yaml:9:11: abstract: {command} judges one image; this profile only "
            "provides defaults for others") in out.err, out.err
    assert "give a profile that says `extends: base`" in out.err
