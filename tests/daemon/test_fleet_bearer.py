"""`dockergen lock` through the bearer-token flow (how Docker Hub, GHCR, ECR, ... answer).

A real `docker-registry` (distribution 2.8, the provisioned package) runs with `auth: token`
and verifies every token's signature, issuer, audience, expiry and granted scope itself.
Only the token *issuer* is a stand-in (a few lines below, signing with `openssl`), because
no real token service (auth.docker.io, ghcr.io/token) is reachable from these machines; the
tests show it refusing wrong credentials and granting nothing to anonymous callers, the two
answers the client must handle.
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.daemon

USER, PASSWORD = "fleet-bearer", "bearer-secret-pass"
SERVICE, ISSUER = "dockergen-bearer-test", "dockergen-test-issuer"
# one platform (provisioning's per-arch import): pushed as a plain image manifest; the
# multi-platform local/debian:bookworm would push an index
BASE = "local/debian:bookworm-amd64"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Issuer(BaseHTTPRequestHandler):
    """Docker's token protocol: credentials in, a signed JWT with granted scopes out.

    Both forms of distribution's spec: GET with Basic credentials (docs/spec/auth/token.md,
    what dockergen sends) and the OAuth2 POST with a password grant (docs/spec/auth/oauth.md,
    what the engine's containerd image store sends when it has credentials).
    """

    key: Path
    cert_der: bytes
    requests: list[tuple[str | None, str]]

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        query = parse_qs(urlparse(self.path).query)
        user = None
        header = self.headers.get("Authorization", "")
        if header.startswith("Basic "):
            name, _, secret = base64.b64decode(header[6:]).decode().partition(":")
            if (name, secret) != (USER, PASSWORD):
                self._refuse()
                return
            user = name
        self._grant(user, query.get("scope", []), "token")

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        length = min(int(self.headers.get("Content-Length") or 0), 65536)
        form = parse_qs(self.rfile.read(length).decode())
        name, secret = form.get("username", [""])[0], form.get("password", [""])[0]
        if form.get("grant_type") != ["password"] or (name, secret) != (USER, PASSWORD):
            self._refuse()
            return
        scopes = [s for joined in form.get("scope", []) for s in joined.split(" ") if s]
        self._grant(name, scopes, "access_token")

    def _refuse(self) -> None:
        self.send_response(401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _grant(self, user: str | None, scopes: list[str], field: str) -> None:
        type(self).requests.append((user, " ".join(scopes)))
        access = []
        for scope in scopes if user else []:  # anonymous: a token that grants nothing
            kind, name, actions = scope.split(":")
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        head = {"typ": "JWT", "alg": "RS256", "x5c": [base64.b64encode(self.cert_der).decode()]}
        claims = {"iss": ISSUER, "sub": user or "", "aud": SERVICE, "exp": now + 300,
                  "nbf": now - 10, "iat": now, "jti": uuid.uuid4().hex, "access": access}
        signing = f"{_b64(json.dumps(head).encode())}.{_b64(json.dumps(claims).encode())}"
        signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(self.key)],
                                   input=signing.encode(), capture_output=True,
                                   check=True).stdout
        body = json.dumps({field: f"{signing}.{_b64(signature)}", "expires_in": 300}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def token_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenRegistry]:
    if shutil.which("docker-registry") is None or shutil.which("openssl") is None:
        pytest.fail("docker-registry and openssl are needed: run tests/infra/provision.sh")
    tmp = tmp_path_factory.mktemp("token-registry")
    key, cert = tmp / "key.pem", tmp / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=" + ISSUER],
                   check=True, capture_output=True)
    der = subprocess.run(["openssl", "x509", "-in", str(cert), "-outform", "DER"],
                         check=True, capture_output=True).stdout
    handler = type("Issuer", (_Issuer,), {"key": key, "cert_der": der, "requests": []})
    issuer = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=issuer.serve_forever, daemon=True).start()
    port = _free_port()
    config = tmp / "config.yml"
    config.write_text(json.dumps({  # JSON is YAML
        "version": 0.1, "storage": {"filesystem": {"rootdirectory": str(tmp / "data")}},
        "http": {"addr": f"127.0.0.1:{port}"},
        "auth": {"token": {"realm": f"http://127.0.0.1:{issuer.server_address[1]}/token",
                           "service": SERVICE, "issuer": ISSUER,
                           "rootcertbundle": str(cert)}}}))
    registry = subprocess.Popen(["docker-registry", "serve", str(config)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "token registry did not start"
            time.sleep(0.2)
    try:
        yield TokenRegistry(f"localhost:{port}", f"127.0.0.1:{issuer.server_address[1]}",
                            handler.requests)
    finally:
        registry.terminate()
        registry.wait(timeout=20)
        issuer.shutdown()
        issuer.server_close()


@dataclass
class TokenRegistry:
    """The registry, its token service on another origin, and what that service was sent."""

    registry: str
    issuer: str
    requests: list[tuple[str | None, str]]


def _config(tmp_path: Path, password: str | None, *origins: str) -> dict[str, str]:
    folder = tmp_path / f"cfg-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    auth = base64.b64encode(f"{USER}:{password}".encode()).decode()
    auths = {origin: {"auth": auth} for origin in origins} if password else {}
    (folder / "config.json").write_text(json.dumps({"auths": auths}))
    return {"DOCKER_CONFIG": str(folder), "SOURCE_DATE_EPOCH": "1764543600"}


def test_lock_through_a_token_service(docker_client, token_registry: TokenRegistry,  # type: ignore[no-untyped-def]
                                      tmp_path: Path) -> None:
    # docker_client (conftest) skips without an engine, before the registry starts
    registry, issuer = token_registry.registry, token_registry.issuer
    ref = f"{registry}/private/cuda:runtime"
    client = docker_client
    client.api.tag(BASE, *ref.rsplit(":", 1))
    for chunk in client.api.push(ref.rsplit(":", 1)[0], tag="runtime", stream=True,
                                 decode=True, auth_config={"username": USER,
                                                           "password": PASSWORD}):
        assert "error" not in chunk, chunk
    digest = next(d.split("@")[1] for d in client.api.inspect_image(ref)["RepoDigests"]
                  if d.startswith(registry))
    profile = tmp_path / "tok.yaml"
    profile.write_text(f"extends: h100-fp8\nname: tok\ncuda:\n  devel_image: {ref}\n"
                       f"  runtime_image: {ref}\n")

    anonymous = run_cli("lock", str(profile), env=_config(tmp_path, None))
    assert anonymous.rc == 3  # the token grants nothing: the registry answers 401 again
    assert anonymous.err.splitlines()[-1] == (
        f"{registry}/private/cuda: the registry refused the credentials for "
        f"{registry} (401); log in again: docker login {registry}")
    # the token service is on another origin (another host and port): the registry's own
    # credentials never go there, and the error says where to log in instead
    sent_before = len(token_registry.requests)
    withheld = run_cli("lock", str(profile), env=_config(tmp_path, PASSWORD, registry))
    assert withheld.rc == 3
    assert withheld.err.splitlines()[-1] == (
        f"{registry}/private/cuda: the registry refused the token its token service gave "
        f"without credentials (401): that service is on another origin ({issuer}), where "
        f"dockergen does not send the credentials for {registry}; to send it credentials, "
        f"log in there: docker login {issuer}")
    assert [user for user, _ in token_registry.requests[sent_before:]] == [None]
    wrong = run_cli("lock", str(profile), env=_config(tmp_path, "nope", registry, issuer))
    assert wrong.rc == 3
    assert wrong.err.splitlines()[-1] == (
        f"{registry}/private/cuda: the token service refused the credentials (401); "
        f"log in first: docker login {registry}")
    ok = run_cli("lock", str(profile), env=_config(tmp_path, PASSWORD, registry, issuer))
    assert ok.rc == 0, ok.err
    assert ok.out.splitlines() == [f"locked {ref} {digest}"]
    assert PASSWORD not in ok.out + ok.err + (tmp_path / "tok.lock.json").read_text()
