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

Credentials never appear in messages or return values. HTTP goes through dockergen's one
HTTP layer (:mod:`dockergen.net.http`): the docker config's credentials and the tokens they buy
are bound to the registry's origin; a Bearer realm on another host gets them only when it is
the registry's known https token service (``digests_auth.TRUSTED_REALMS``), else it is asked
anonymously; manifests, configs and tokens are read up to their limits and validated.
The docker config's credentials and which token service may receive them:
:mod:`dockergen.outputs.fleet.digests_auth`.
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

from dockergen import refs
from dockergen.errors import DockergenError, ExitCode, redact
from dockergen.files import inputs
from dockergen.net import http as net
from dockergen.outputs.fleet.digests_auth import (
    DOCKER_HUB_API,
    challenge,
    config_key,
    credentials,
    realm_gets_credentials,
)
from dockergen.refs import DOCKER_HUB, Reference

INDEX_TYPES = ("application/vnd.oci.image.index.v1+json",
               "application/vnd.docker.distribution.manifest.list.v2+json")
MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json",
                  "application/vnd.docker.distribution.manifest.v2+json")
ACCEPT = ", ".join(INDEX_TYPES + MANIFEST_TYPES)


class RegistryError(DockergenError, code=ExitCode.MISSING_TOOL):
    """The registry could not be reached, refused us, or does not hold the image."""


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
class TagDigests:
    """What a tag points to now: its digests."""

    digest: str  # what FROM pins: the index digest if there is an index, else the manifest
    index_digest: str | None
    platform: str
    platform_digest: str  # the per-platform image manifest
    media_type: str


def _is_loopback(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return name in ("localhost", "::1", "[::1]") or name.startswith("127.")


_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")



class RegistryClient:
    """A small registry API v2 client: manifests and blobs, basic and bearer auth; it writes
    one thing, an image index over manifests the engine pushed."""

    def __init__(self) -> None:
        self._auth: dict[str, net.Credential] = {}  # registry -> the credential that worked
        # registry -> the token service's own origin, where its credentials were not sent
        self._withheld: dict[str, str] = {}

    def _url(self, ref: Reference, path: str) -> str:
        scheme = "http" if _is_loopback(ref.registry) else "https"
        return f"{scheme}://{_api_host(ref)}/v2/{ref.repository}/{path}"

    def _get(self, ref: Reference, path: str, accept: str, kind: str = "manifest"
             ) -> net.Response:
        url = self._url(ref, path)
        shown = f"{ref.registry}/{ref.repository}"
        known = self._auth.get(ref.registry)
        response = self._send(url, {"Accept": accept}, shown, kind, known)
        if response.status == 401:
            auth = self._answer(response, ref, net.origin_of(url), shown)
            response = self._send(url, {"Accept": accept}, shown, kind, auth)
            if response.status == 401 and ref.registry in self._withheld:
                realm = self._withheld[ref.registry]
                raise RegistryError(
                    f"{shown}: the registry refused the token its token service gave without "
                    f"credentials (401): that service is on another origin ({realm}), where "
                    f"dockergen does not send the credentials for {ref.registry}; to send it "
                    f"credentials, log in there: docker login {realm}")
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

    def _answer(self, response: net.Response, ref: Reference, origin: net.Origin,
                shown: str) -> net.Credential:
        """The credential a 401's challenge asks for: a Bearer token, or Basic."""
        scheme, params = challenge(response.header("WWW-Authenticate"))
        creds = credentials(ref.registry)
        what = f"the docker config's credentials for {ref.registry}"
        try:
            if scheme == "bearer" and params.get("realm"):
                token = self._token(params, ref, creds, shown, origin)
                return net.Credential.bearer(origin, token, f"the token for {ref.registry}")
            if scheme == "basic" and creds:
                return net.Credential.basic(origin, creds[0], creds[1], what)
        except net.NetError as exc:
            raise RegistryError(f"{shown}: {exc}") from None
        raise RegistryError(
            f"{shown}: the registry needs credentials and the docker config has "
            f"none for {ref.registry}; log in first: docker login {ref.registry}")

    def _send(self, url: str, headers: dict[str, str], shown: str, kind: str,
              credential: net.Credential | None = None, what: str = "the registry"
              ) -> net.Response:
        try:
            return net.get(url, kind, headers, (credential,) if credential else ())
        except (net.DeadlineError, net.BudgetError):
            raise
        except net.NetError as exc:  # it says what to check
            raise RegistryError(f"{shown}: cannot read {what}: {exc}") from None

    def _token(self, params: dict[str, str], ref: Reference,
               creds: tuple[str, str] | None, shown: str, registry: net.Origin) -> str:
        query = urllib.parse.urlencode(
            {"service": params.get("service", ""),
             "scope": params.get("scope", f"repository:{ref.repository}:pull")})
        realm = params["realm"]
        try:
            send = creds is not None and realm_gets_credentials(realm, registry)
            origin = net.origin_of(realm)
        except net.NetError as exc:
            raise RegistryError(f"{shown}: the registry's token service is not one dockergen "
                                f"asks: {exc}") from None
        if send and creds:
            credential: net.Credential | None = net.Credential.basic(
                origin, creds[0], creds[1], f"the credentials for {ref.registry}")
        else:
            # a token service on another origin gets the credentials configured for that
            # origin itself (docker login HOST), never the registry's
            own = credentials(config_key(origin))
            credential = net.Credential.basic(origin, own[0], own[1], "the credentials for "
                                              f"{config_key(origin)}") if own else None
            if creds and not own:
                self._withheld[ref.registry] = config_key(origin)
        url = f"{realm}{'&' if '?' in realm else '?'}{query}"
        response = self._send(url, {}, shown, "token", credential, "the token service")
        if response.status in (401, 403):
            raise RegistryError(
                f"{shown}: the token service refused "
                + ("the credentials" if credential else "anonymous access")
                + f" ({response.status}); log in first: docker login {ref.registry}"
                + ("" if credential or not creds else
                   f" (the credentials for {ref.registry} were not sent: its token service is "
                   f"on another origin, {origin}; to send it credentials, log in there: "
                   f"docker login {config_key(origin)})"))
        return token_of(response.body, shown)

    def resolve(self, image: str, platform: str = "linux/amd64") -> TagDigests:
        """The digests ``image`` (a tag reference) points to now."""
        ref = parse_reference(image)
        response = self._get(ref, f"manifests/{_manifest_key(ref)}", ACCEPT)
        body = response.body
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        announced = response.header("Docker-Content-Digest")
        if announced and announced != digest:
            raise RegistryError(f"{image}: the registry announced a digest that is not the "
                                f"sha256 of what it sent ({digest}); not trusting it")
        manifest = _json_object(body, f"{image}: the registry sent a manifest that is not a "
                                      "JSON object")
        media_type = manifest.get("mediaType") or response.header("Content-Type").split(";")[0]
        if not isinstance(media_type, str):
            raise RegistryError(f"{image}: the manifest's mediaType is not text")
        if media_type in INDEX_TYPES or "manifests" in manifest:
            entry = _platform_entry(manifest, image, platform)
            return TagDigests(digest, digest, platform, entry, media_type)
        config = manifest.get("config")
        config_digest = config.get("digest") if isinstance(config, dict) else None
        if not isinstance(config_digest, str) or not _DIGEST.fullmatch(config_digest):
            raise RegistryError(f"{image}: unsupported manifest ({media_type or 'unknown'})")
        blob = self._get(ref, f"blobs/{config_digest}", "*/*", "blob").body
        if "sha256:" + hashlib.sha256(blob).hexdigest() != config_digest:
            raise RegistryError(f"{image}: the image config is not the blob its manifest names")
        found_config = _json_object(blob, f"{image}: the image config is not a JSON object")
        found = f"{found_config.get('os')}/{found_config.get('architecture')}"
        if found != platform:
            raise RegistryError(f"{image}: is a {redact(found)[:80]} image, not {platform}")
        return TagDigests(digest, None, platform, digest, media_type)


    def descriptor(self, image: str, platform: str) -> dict[str, Any]:
        """The OCI descriptor of ``image``'s manifest for ``platform`` (media type, digest,
        size, platform), checked against the bytes the registry serves: what an image index
        lists for that platform."""
        res = self.resolve(image, platform)
        ref = parse_reference(image)
        response = self._get(ref, f"manifests/{res.platform_digest}", ACCEPT)
        if "sha256:" + hashlib.sha256(response.body).hexdigest() != res.platform_digest:
            raise RegistryError(f"{image}: the {platform} manifest is not the bytes its digest "
                                "names")
        manifest = _json_object(response.body, f"{image}: the {platform} manifest is not a "
                                               "JSON object")
        media_type = manifest.get("mediaType") or response.header("Content-Type").split(";")[0]
        if media_type not in MANIFEST_TYPES:
            raise RegistryError(f"{image}: the {platform} entry is a {media_type!r}, not an "
                                "image manifest")
        os_name, _, arch = platform.partition("/")
        return {"mediaType": media_type, "digest": res.platform_digest,
                "size": len(response.body), "platform": {"os": os_name, "architecture": arch}}

    def put_index(self, image: str, manifests: list[dict[str, Any]]) -> str:
        """Write an OCI image index of ``manifests`` (descriptors in the same repository)
        under ``image``'s tag; return its digest once the registry confirmed it."""
        ref = parse_reference(image)
        body = json.dumps({"schemaVersion": 2, "mediaType": INDEX_TYPES[0],
                           "manifests": manifests}, sort_keys=True, indent=2).encode()
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        url = self._url(ref, f"manifests/{_manifest_key(ref)}")
        shown = f"{ref.registry}/{ref.repository}"
        known = self._auth.get(ref.registry)
        response = self._put(url, body, shown, known)
        if response.status == 401:  # the challenge names the push scope it wants
            auth = self._answer(response, ref, net.origin_of(url), shown)
            response = self._put(url, body, shown, auth)
        if response.status in (401, 403):
            raise RegistryError(f"{shown}: the registry refused to store the image index "
                                f"({response.status}); check that your account may push: "
                                f"docker login {ref.registry}")
        if response.status != 201:
            raise RegistryError(f"{shown}: the registry answered HTTP {response.status} to the "
                                "image index; try again later")
        announced = response.header("Docker-Content-Digest")
        if announced and announced != digest:
            raise RegistryError(f"{image}: the registry stored the index as {announced}, not "
                                f"{digest} (the sha256 of what was sent)")
        return digest

    def _put(self, url: str, body: bytes, shown: str,
             credential: net.Credential | None) -> net.Response:
        try:
            return net.put(url, body, INDEX_TYPES[0], (credential,) if credential else ())
        except (net.DeadlineError, net.BudgetError):
            raise
        except net.NetError as exc:
            raise RegistryError(f"{shown}: cannot write the image index: {exc}") from None


def token_of(body: bytes, shown: str) -> str:
    """The token of a token service's answer (``token``, else ``access_token``: the spec
    allows either); :class:`RegistryError` for any other answer."""
    found = _json_object(body, f"{shown}: the token service sent no token")
    token = found.get("token") or found.get("access_token")
    if not isinstance(token, str) or not token:
        raise RegistryError(f"{shown}: the token service sent no token")
    return token


def _json_object(body: bytes, refusal: str) -> dict[str, Any]:
    """``body`` as a JSON object, or a RegistryError (deep nesting included)."""
    try:
        value = inputs.loads_json(body)
    except ValueError:
        raise RegistryError(refusal) from None
    if not isinstance(value, dict):
        raise RegistryError(refusal)
    return value


def _platform_entry(index: dict[str, Any], image: str, platform: str) -> str:
    """The digest of the index's manifest for ``platform``."""
    os_name, _, arch = platform.partition("/")
    entries = index.get("manifests")
    if not isinstance(entries, list):
        raise RegistryError(f"{image}: the image index has no list of manifests")
    for entry in entries:
        plat = entry.get("platform") if isinstance(entry, dict) else None
        if isinstance(plat, dict) and (plat.get("os"), plat.get("architecture")) == (
                os_name, arch):
            digest = entry.get("digest")
            if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
                raise RegistryError(f"{image}: the index's {platform} entry has no sha256 "
                                    "digest")
            return digest
    raise RegistryError(f"{image}: the index has no {platform} image")
