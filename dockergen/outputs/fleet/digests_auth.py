"""Registry credentials as ``docker pull`` finds them, and who may receive them.

The user's docker config (``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json``):
a credential helper (``credHelpers``/``credsStore``, the docker credential-helper
protocol), else the ``auths`` entries; a ``WWW-Authenticate`` challenge's scheme and
parameters; and the token services on another host than their registry that may receive
its credentials (:data:`TRUSTED_REALMS`).
src: distribution/distribution docs/spec/auth/token.md; docker/docker-credential-helpers.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from pathlib import Path

from dockergen.files import inputs
from dockergen.net import http as net
from dockergen.refs import DOCKER_HUB

DOCKER_HUB_API = "registry-1.docker.io"
DOCKER_HUB_AUTH_KEY = "https://index.docker.io/v1/"  # the key `docker login` writes


def _config_dir() -> Path:
    return Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker")


def credentials(registry: str) -> tuple[str, str] | None:
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


def challenge(header: str) -> tuple[str, dict[str, str]]:
    """The scheme (lower case) and parameters of a ``WWW-Authenticate`` header."""
    scheme, _, params = header.partition(" ")
    return scheme.lower(), dict(re.findall(r'(\w+)="([^"]*)"', params))


# Token services on another host than their registry that may receive the registry's
# credentials (https only): Docker Hub's (docs.docker.com/registry/spec/auth/token) and
# NGC's (nvcr.io answers with realm="https://authn.nvidia.com/token"). Any other realm on
# another origin is asked for an anonymous token: credentials never follow a realm there.
TRUSTED_REALMS = {DOCKER_HUB_API: "auth.docker.io", "nvcr.io": "authn.nvidia.com"}

def config_key(origin: net.Origin) -> str:
    """The docker config key of an origin: ``host``, or ``host:port`` off the default port."""
    default = 443 if origin.scheme == "https" else 80
    return origin.host if origin.port == default else f"{origin.host}:{origin.port}"


def realm_gets_credentials(realm: str, registry: net.Origin) -> bool:
    """Whether the registry's credentials may go to its token service at ``realm``."""
    origin = net.origin_of(realm)
    if origin == registry:
        return True
    return origin.scheme == "https" and TRUSTED_REALMS.get(registry.host) == origin.host
