"""Resolve image references to digests through the registry HTTP API v2.

``GET /v2/<repo>/manifests/<tag>`` with the OCI / Docker manifest media types returns
either an image index (manifest list) or a single image manifest; its digest is the
sha256 of the bytes returned (checked against ``Docker-Content-Digest``).
src: distribution-spec v1.1 "Pulling manifests"; OCI image-spec v1.1 image-index.md.

Authentication follows what ``docker pull`` does with the user's docker config
(``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json``): a ``401`` carries a
``WWW-Authenticate`` challenge; ``Basic`` is answered with the ``auths`` credentials,
``Bearer realm=...,service=...,scope=...`` by fetching a token from the realm (with the
credentials if there are any, anonymously otherwise).
src: distribution/distribution docs/spec/auth/token.md.

Credentials never appear in messages or return values. HTTP goes through the standard
library (urllib): the architecture rule gives ``requests`` one owner, the daemon adapter.

May import: errors, inputs (the bounded reader), refs (the reference grammar); the
standard library's urllib for HTTP.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dockergen import inputs, refs
from dockergen.errors import DockergenError, ExitCode
from dockergen.refs import DOCKER_HUB, Reference

# urllib.request (with http.client, email and ssl) loads only when a registry is contacted:
# every render reads locks through this module, and that import was 7 ms of
# `dockergen render`'s start-up (python -X importtime).
if TYPE_CHECKING:
    import urllib.request
    from email.message import Message

INDEX_TYPES = ("application/vnd.oci.image.index.v1+json",
               "application/vnd.docker.distribution.manifest.list.v2+json")
MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json",
                  "application/vnd.docker.distribution.manifest.v2+json")
ACCEPT = ", ".join(INDEX_TYPES + MANIFEST_TYPES)
DOCKER_HUB_API = "registry-1.docker.io"
DOCKER_HUB_AUTH_KEY = "https://index.docker.io/v1/"  # the key `docker login` writes


class RegistryError(DockergenError):
    """The registry could not be reached, refused us, or does not hold the image."""

    exit_code = ExitCode.MISSING_TOOL


def parse_reference(ref: str) -> Reference:
    """``ref`` by the one reference grammar (dockergen/refs.py), or a RegistryError."""
    try:
        return refs.parse(ref)
    except refs.InvalidReference as exc:
        raise RegistryError(f"{ref!r} is not an image reference: {exc}") from None


def _api_host(ref: Reference) -> str:
    """Where the registry's HTTP API answers (Docker Hub's is not docker.io)."""
    return DOCKER_HUB_API if ref.registry == DOCKER_HUB else ref.registry


def _manifest_key(ref: Reference) -> str:
    """What ``/manifests/<key>`` asks for: the digest, else the tag, else ``latest``."""
    return ref.digest or ref.tag or "latest"


@dataclass(frozen=True)
class Resolution:
    """What a tag points to now."""

    digest: str  # what FROM pins: the index digest if there is an index, else the manifest
    index_digest: str | None
    platform: str
    platform_digest: str  # the per-platform image manifest
    media_type: str


def _is_loopback(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return name in ("localhost", "::1", "[::1]") or name.startswith("127.")


def _config_dir() -> Path:
    return Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker")


def _credentials(registry: str) -> tuple[str, str] | None:
    """(username, password) for ``registry`` from the docker config, if any."""
    path = _config_dir() / "config.json"
    try:
        config = json.loads(inputs.read_bytes(path, "docker-config"))
    except (OSError, ValueError, RecursionError, inputs.InputError):
        return None  # no usable config: anonymous, as docker itself
    if not isinstance(config, dict):
        return None
    keys = [registry, f"https://{registry}", f"http://{registry}"]
    if registry == DOCKER_HUB:
        keys = [DOCKER_HUB_AUTH_KEY, "index.docker.io", "docker.io", *keys]
    helper = (config.get("credHelpers") or {}).get(registry) or config.get("credsStore")
    if helper:
        found = _from_helper(helper, DOCKER_HUB_AUTH_KEY if registry == DOCKER_HUB
                             else registry)
        if found:
            return found
    auths = config.get("auths") or {}
    for key in keys:
        entry = auths.get(key)
        if not isinstance(entry, dict):
            continue
        if entry.get("auth"):
            try:
                user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                continue
            return user, password
        if entry.get("username") and entry.get("password"):
            return str(entry["username"]), str(entry["password"])
    return None


def _from_helper(helper: str, server: str) -> tuple[str, str] | None:
    """Ask ``docker-credential-<helper> get`` (the docker credential-helper protocol)."""
    try:
        proc = subprocess.run([f"docker-credential-{helper}", "get"], input=server,
                              capture_output=True, text=True, timeout=30, check=False)
        if proc.returncode != 0:
            return None
        data = json.loads(proc.stdout)
        return str(data["Username"]), str(data["Secret"])
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
        return None


def _challenge(header: str) -> tuple[str, dict[str, str]]:
    scheme, _, params = header.partition(" ")
    return scheme.lower(), dict(re.findall(r'(\w+)="([^"]*)"', params))


@dataclass(frozen=True)
class _Response:
    status: int
    headers: Message
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)


def _opener() -> urllib.request.OpenerDirector:
    """An opener that follows redirects (blob storage) but never carries our
    Authorization header along."""
    import urllib.request

    class NoRedirectAuth(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
            new = super().redirect_request(req, fp, code, msg, headers, newurl)
            if new is not None:
                new.remove_header("Authorization")
            return new

    return urllib.request.build_opener(NoRedirectAuth())


class RegistryClient:
    """A small registry API v2 client: manifests and blobs, basic and bearer auth."""

    def __init__(self, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self._opener = _opener()
        self._auth: dict[str, dict[str, str]] = {}  # host -> headers that worked

    def _url(self, ref: Reference, path: str) -> str:
        scheme = "http" if _is_loopback(ref.registry) else "https"
        return f"{scheme}://{_api_host(ref)}/v2/{ref.repository}/{path}"

    def _get(self, ref: Reference, path: str, accept: str) -> _Response:
        url = self._url(ref, path)
        shown = f"{ref.registry}/{ref.repository}"
        headers = {"Accept": accept, **self._auth.get(ref.registry, {})}
        response = self._send(url, headers, shown)
        if response.status == 401:
            scheme, params = _challenge(response.headers.get("WWW-Authenticate", ""))
            creds = _credentials(ref.registry)
            if scheme == "bearer" and params.get("realm"):
                token = self._token(params, ref, creds, shown)
                auth = {"Authorization": f"Bearer {token}"}
            elif scheme == "basic" and creds:
                raw = base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode()
                auth = {"Authorization": f"Basic {raw}"}
            else:
                raise RegistryError(
                    f"{shown}: the registry needs credentials and the docker config has "
                    f"none for {ref.registry}; log in first: docker login {ref.registry}")
            response = self._send(url, {**headers, **auth}, shown)
            if response.status == 401:
                raise RegistryError(
                    f"{shown}: the registry refused the credentials for {ref.registry} "
                    f"(401); log in again: docker login {ref.registry}")
            self._auth[ref.registry] = auth
        if response.status == 404:
            what = (_manifest_key(ref) if path.startswith("manifests/")
                    else path.rsplit("/", 1)[-1])
            raise RegistryError(f"{shown}:{what}: not found in the registry (404); check the "
                                "image name and tag")
        if response.status == 403:
            raise RegistryError(f"{shown}: access denied (403); check that your account may "
                                f"pull it: docker login {ref.registry}")
        if response.status != 200:
            raise RegistryError(f"{shown}: registry answered HTTP {response.status}; "
                                "try again later")
        return response

    def _send(self, url: str, headers: dict[str, str], shown: str,
              what: str = "the registry") -> _Response:
        import urllib.error
        import urllib.request

        request = urllib.request.Request(url, headers=headers)
        try:
            with self._opener.open(request, timeout=self.timeout) as reply:
                return _Response(reply.status, reply.headers, reply.read())
        except urllib.error.HTTPError as exc:  # 4xx/5xx: a response, not a failure to talk
            with exc:
                return _Response(exc.code, exc.headers, exc.read())
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RegistryError(f"{shown}: cannot reach {what} "
                                f"({type(reason).__name__}); check the network or the "
                                "registry address") from None

    def _token(self, params: dict[str, str], ref: Reference,
               creds: tuple[str, str] | None, shown: str) -> str:
        query = urllib.parse.urlencode(
            {"service": params.get("service", ""),
             "scope": params.get("scope", f"repository:{ref.repository}:pull")})
        headers = {}
        if creds:
            raw = base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode()
            headers["Authorization"] = f"Basic {raw}"
        response = self._send(f"{params['realm']}?{query}", headers, shown,
                              "the token service")
        if response.status in (401, 403):
            raise RegistryError(
                f"{shown}: the token service refused "
                + ("the credentials" if creds else "anonymous access")
                + f" ({response.status}); log in first: docker login {ref.registry}")
        try:
            body = response.json()
            return str(body.get("token") or body["access_token"])
        except (ValueError, KeyError, AttributeError):
            raise RegistryError(f"{shown}: the token service sent no token") from None

    def resolve(self, image: str, platform: str = "linux/amd64") -> Resolution:
        """The digests ``image`` (a tag reference) points to now."""
        ref = parse_reference(image)
        response = self._get(ref, f"manifests/{_manifest_key(ref)}", ACCEPT)
        body = response.content
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        announced = response.headers.get("Docker-Content-Digest")
        if announced and announced != digest:
            raise RegistryError(f"{image}: the registry announced {announced} but sent "
                                f"bytes hashing to {digest}; not trusting it")
        try:
            manifest: dict[str, Any] = json.loads(body)
        except ValueError:
            raise RegistryError(f"{image}: the registry sent a manifest that is not "
                                "JSON") from None
        media_type = manifest.get("mediaType") or (
            response.headers.get("Content-Type") or "").split(";")[0]
        os_name, _, arch = platform.partition("/")
        if media_type in INDEX_TYPES or "manifests" in manifest:
            for entry in manifest.get("manifests", []):
                plat = entry.get("platform") or {}
                if plat.get("os") == os_name and plat.get("architecture") == arch:
                    return Resolution(digest, digest, platform, entry["digest"], media_type)
            raise RegistryError(f"{image}: the index has no {platform} image")
        config_digest = (manifest.get("config") or {}).get("digest")
        if not config_digest:
            raise RegistryError(f"{image}: unsupported manifest ({media_type or 'unknown'})")
        config = self._get(ref, f"blobs/{config_digest}", "*/*").json()
        found = f"{config.get('os')}/{config.get('architecture')}"
        if found != platform:
            raise RegistryError(f"{image}: is a {found} image, not {platform}")
        return Resolution(digest, None, platform, digest, media_type)
