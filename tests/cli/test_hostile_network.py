"""The real commands against a hostile index and registry on loopback: every class of
attack ends in a clean exit code with a message, no traceback, nothing leaked to another
origin, nothing local read, within the deadline, in bounded memory (RLIMIT_AS in the child).
"""

from __future__ import annotations

import base64
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import PROFILES, ROOT
from tests.support import hostile
from tests.support.hostile import VLLM, Hostile, json_page, wheel

LIMIT_AS = 2 << 30  # bytes of address space the command may use
SECRET = "s3cr3t-pass-9f2c"  # the index/registry password: must reach only its own origin


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_AS, LIMIT_AS))


def run(*args: str, env: dict[str, str] | None = None, limit_s: float = 60
        ) -> tuple[int, str, float]:
    """``dockergen ARGS`` in a child under RLIMIT_AS: (exit code, all output, seconds)."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "dockergen", *args], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, **(env or {})},
                          timeout=limit_s, check=False, preexec_fn=_limited)
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out
    assert SECRET not in out and base64.b64encode(f"u:{SECRET}".encode()).decode() not in out
    return proc.returncode, out, time.monotonic() - start


H100 = str(PROFILES / "h100-fp8.yaml")  # vLLM 0.33.0
CREDS = {"DOCKERGEN_INDEX_USERNAME": "u", "DOCKERGEN_INDEX_PASSWORD": SECRET,
         "NETRC": "/nonexistent/netrc"}


def _page(files: list[tuple[str, str]]) -> hostile.Route:
    def route(h: hostile._Handler, rest: list[str]) -> None:
        if rest[:2] == ["simple", "vllm"]:
            return h.send(json_page("vllm", files), "application/vnd.pypi.simple.v1+json")
        return h.send(json_page(rest[-1] if rest else "x", []),
                      "application/vnd.pypi.simple.v1+json")
    return route


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Hostile]:
    yield from hostile.serve({})


def test_index_credentials_never_leave_the_index_origin(servers: Hostile) -> None:
    """A page linking its wheel on another host, and a page redirected to another host:
    the index's password goes to the index alone."""
    o = servers.origins
    body = wheel("0.35.0")
    servers.routes["creds"] = _page([(VLLM.format(v="0.35.0"),
                                      f"{o.other}/capture/{VLLM.format(v='0.35.0')}")])
    servers.routes["capture"] = lambda h, rest: h.send_range(body)
    servers.routes["redir"] = lambda h, rest: h.send(
        b"", status=302, headers={"Location": f"{o.other}/creds/" + "/".join(rest)})
    code, out, _ = run("upgrade", H100, "--index", f"{o.home}/creds/simple", "--json",
                       env=CREDS)
    assert code == 0, out
    assert json.loads(out[out.index("{"):])["derived"]["0.35.0"]["torch"] == "2.14.0"
    assert all(s.authorization for s in o.to(o.home))  # the index got them
    assert o.to(o.other) and not any(s.authorization for s in o.to(o.other))
    o.seen.clear()
    code, out, _ = run("outdated", H100, "--index", f"{o.home}/redir/simple", env=CREDS)
    assert code in (0, 9), out
    assert o.to(o.other) and not any(s.authorization for s in o.to(o.other))


def test_file_links_in_a_page_are_never_opened(servers: Hostile, tmp_path: Path) -> None:
    fifo = tmp_path / VLLM.format(v="0.35.0")
    os.mkfifo(fifo)  # opening it for reading would block the command for ever
    servers.routes["files"] = _page([(fifo.name, fifo.as_uri())])
    code, out, took = run("upgrade", H100, "--index", f"{servers.origins.home}/files/simple",
                          "--json", limit_s=60)
    assert code == 0 and json.loads(out)["moves"] == [], out  # the file: link is no release


@pytest.mark.parametrize("target", ["ftp://127.0.0.1/simple/vllm/", "file:///etc/passwd"])
def test_redirects_to_other_schemes_are_refused(servers: Hostile, target: str) -> None:
    servers.routes["away"] = lambda h, rest: h.send(b"", status=302,
                                                    headers={"Location": target})
    code, out, _ = run("outdated", H100, "--index", f"{servers.origins.home}/away/simple")
    assert code == 3 and "http and https only" in out, out
    assert "root:" not in out


def test_deep_json_and_oversized_pages_end_cleanly(servers: Hostile) -> None:
    servers.routes["deep"] = lambda h, rest: h.send(b"[" * 200_000,
                                                    "application/vnd.pypi.simple.v1+json")
    servers.routes["huge"] = lambda h, rest: h.stream(400 << 20)
    code, out, _ = run("outdated", H100, "--index", f"{servers.origins.home}/deep/simple")
    assert code == 3 and "not a PEP 691 JSON or PEP 503 HTML page" in out, out
    code, out, took = run("outdated", H100, "--index", f"{servers.origins.home}/huge/simple")
    assert code == 3 and "larger than" in out, out


def test_a_trickling_server_is_cut_off_at_the_deadline(servers: Hostile) -> None:
    servers.routes["slow"] = lambda h, rest: h.trickle()
    code, out, took = run("outdated", H100, "--timeout", "3", "--index",
                          f"{servers.origins.home}/slow/simple")
    assert code == 124 and "deadline of 3 s passed" in out, out
    assert took < 20


def test_short_range_answers_and_zip_bombs_refuse_the_release(servers: Hostile) -> None:
    o = servers.origins
    served = {"0.35.0": wheel("0.35.0"), "0.36.0": wheel("0.36.0", bomb=256 << 20),
              "0.37.0": wheel("0.37.0", bomb=256 << 20, lie=True)}
    servers.routes["w"] = _page([(VLLM.format(v=v), f"{o.home}/f/{v}") for v in served])
    servers.routes["f"] = lambda h, rest: h.send_range(served[rest[0]],
                                                       short=int(rest[0] == "0.35.0"))
    code, out, took = run("upgrade", H100, "--index", f"{o.home}/w/simple", "--json")
    assert code == 0, out
    moves = {m["version"]: m for m in json.loads(out[out.index("{"):])["moves"]}
    assert "the server answered" in moves["0.35.0"]["reasons"][0]
    assert "268435456 bytes unpacked, more than the 16 MiB" in moves["0.36.0"]["reasons"][0]
    # a header that lies stops zipfile at its claim, where the CRC no longer matches
    assert "not a readable wheel (BadZipFile)" in moves["0.37.0"]["reasons"][0]


def test_request_amplification_stops_at_the_bound(servers: Hostile) -> None:
    o = servers.origins
    many = wheel("0.35.0", [f"pkg{i}==1.0" for i in range(100_000)] + ["torch==2.14.0"])
    servers.routes["many"] = _page([(VLLM.format(v=f"0.34.{i}"), f"{o.home}/m/{i}")
                                    for i in range(3000)]
                                   + [(VLLM.format(v="0.35.0"), f"{o.home}/req/x")])
    servers.routes["m"] = lambda h, rest: h.send(b"", status=404)
    servers.routes["req"] = lambda h, rest: h.send_range(many)
    code, out, took = run("upgrade", H100, "--index", f"{o.home}/many/simple", "--to",
                          "0.35.0", env={"DOCKERGEN_NET_MAX_REQUESTS": "60"})
    assert code == 3 and "bound of requests" in out, out
    assert len(o.seen) <= 60


# --- the registry -----------------------------------------------------------------------

def _docker_config(tmp_path: Path, registry: str) -> dict[str, str]:
    auth = base64.b64encode(f"u:{SECRET}".encode()).decode()
    (tmp_path / "config.json").write_text(json.dumps({"auths": {registry: {"auth": auth}}}))
    return {"DOCKER_CONFIG": str(tmp_path)}


def _lock(tmp_path: Path, registry: str, scenario: str, env: dict[str, str]
          ) -> tuple[int, str, float]:
    profile = tmp_path / "h100-fp8.yaml"
    shutil.copy(H100, profile)
    shutil.copy(PROFILES / "base.yaml", tmp_path / "base.yaml")
    return run("lock", str(profile), "--timeout", "20", "--mirror",
               f"nvidia/cuda={registry}/{scenario}/cuda", env=env)


def _challenge(realm: str) -> hostile.Route:
    def route(h: hostile._Handler, rest: list[str]) -> None:
        if h.headers.get("Authorization", "").startswith("Bearer "):
            return h.send(b"[" * 100_000, "application/vnd.oci.image.index.v1+json")
        return h.send(b"", status=401,
                      headers={"WWW-Authenticate": f'Bearer realm="{realm}",service="r"'})
    return route


def test_a_realm_on_another_host_never_gets_the_registry_credentials(
        servers: Hostile, tmp_path: Path) -> None:
    o = servers.origins
    registry = o.home.removeprefix("http://")
    servers.routes["v2"] = _challenge(f"{o.other}/token")
    servers.routes["token"] = lambda h, rest: h.send(json.dumps({"token": "t0k"}).encode())
    code, out, _ = _lock(tmp_path, registry, "x", _docker_config(tmp_path, registry))
    assert code == 3 and "not a JSON object" in out, out  # the deep manifest, after the token
    assert o.to(o.other) and not any(s.authorization for s in o.to(o.other))
    assert {s.authorization for s in o.to(o.home)} == {None, "Bearer t0k"}


@pytest.mark.parametrize("realm", ["file:///etc/passwd", "ftp://127.0.0.1/token"])
def test_a_local_or_ftp_realm_is_refused(servers: Hostile, tmp_path: Path, realm: str
                                         ) -> None:
    registry = servers.origins.home.removeprefix("http://")
    servers.routes["v2"] = _challenge(realm)
    code, out, _ = _lock(tmp_path, registry, "x", _docker_config(tmp_path, registry))
    assert code == 3 and "http and https only" in out and "root:" not in out, out


def test_a_token_with_a_line_break_is_refused_unsaid(servers: Hostile, tmp_path: Path
                                                     ) -> None:
    o = servers.origins
    registry = o.home.removeprefix("http://")
    servers.routes["v2"] = _challenge(f"{o.home}/token")
    servers.routes["token"] = lambda h, rest: h.send(
        json.dumps({"token": "abc\r\nX-Injected: evil"}).encode())
    code, out, _ = _lock(tmp_path, registry, "x", _docker_config(tmp_path, registry))
    assert code == 3 and "line break" in out and "X-Injected" not in out, out


def test_an_oversized_manifest_is_cut(servers: Hostile, tmp_path: Path) -> None:
    registry = servers.origins.home.removeprefix("http://")
    servers.routes["v2"] = lambda h, rest: h.stream(400 << 20, "application/json")
    code, out, _ = _lock(tmp_path, registry, "x", {"DOCKER_CONFIG": str(tmp_path)})
    assert code == 3 and "larger than" in out, out


def test_a_version_past_the_integer_digit_limit_is_a_usage_error() -> None:
    code, out, _ = run("upgrade", H100, "--to", "1." + "9" * 4301)
    assert code == 64 and "is not a version like 1.2.3" in out, out


def test_metadata_the_parsers_choke_on_is_judged_without_a_traceback(servers: Hostile) -> None:
    """A torch pin of ``==2.*`` (InvalidVersion), a version past int's digit limit
    (ValueError) and a marker nested past the parser's stack (RecursionError) escaped as
    tracebacks from the METADATA reader."""
    o = servers.origins
    served = {"0.35.0": wheel("0.35.0", ["torch==2.*"]),
              "0.36.0": wheel("0.36.0", ["torch==2.14.0", "cuda-toolkit==1" + "9" * 4301]),
              "0.37.0": wheel("0.37.0", ["torch==2.14.0", "x; " + "(" * 5000
                                         + 'python_version > "3"' + ")" * 5000])}
    servers.routes["meta"] = _page([(VLLM.format(v=v), f"{o.home}/f/{v}") for v in served])
    servers.routes["f"] = lambda h, rest: h.send_range(served[rest[0]])
    code, out, _ = run("upgrade", H100, "--index", f"{o.home}/meta/simple", "--json")
    assert code == 0, out
    moves = {m["version"]: m for m in json.loads(out[out.index("{"):])["moves"]}
    assert "torch pin: '2.*' is not a version" in moves["0.35.0"]["reasons"][0]
    # lines no requirement parser reads are skipped, as invalid ones are: judged on the rest
    assert moves["0.36.0"]["ok"] is moves["0.37.0"]["ok"] is True
