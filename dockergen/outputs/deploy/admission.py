"""An admission policy beside the Deployment: the cluster admits only signed images.

``dockergen deploy --format k8s --require-signature KEY`` adds a Sigstore policy-controller
``ClusterImagePolicy`` (``policy.sigstore.dev/v1beta1``) to the manifest: a pod whose image
is in the Deployment's repository is admitted only if its cosign signature verifies against
the given public key (key-based; ``dockergen build --push --sign`` signs with the private
half). Why policy-controller rather than Kyverno's ``verifyImages``: it is Sigstore's own
admission controller for exactly this check (cosign's verification code, its key formats
and KMS references), its resource holds nothing but the images and the authorities, and a
platform team that runs no general policy engine installs it alone. A cluster with Kyverno
already in place can express the same rule there; dockergen writes one of them, not both.

Why an option and not a profile field: the profile describes the image, and its hash names
the image (the immutable ``dg-`` tag). The verifying key belongs to whoever signs releases
and differs between clusters (staging, production); rotating it must not rename the image.

Only a public key (or a KMS reference) goes into the manifest: a private key would be
written into a cluster-wide resource; one is refused without its content in the message.

src: github.com/sigstore/policy-controller config/300-clusterimagepolicy.yaml (the CRD,
vendored for the tests in tests/data/) and pkg/apis/glob/glob.go (``*`` matches within a
path component, ``**`` across; the image is matched by its fully qualified name, Docker Hub
names as ``index.docker.io/...``).
"""

from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path
from typing import Any

from dockergen import refs
from dockergen.files import inputs
from dockergen.outputs.deploy import DeployError, DeployUsageError

API_VERSION = "policy.sigstore.dev/v1beta1"
# cosign's KMS references (src: cosign docs, "Signing with Hardware Tokens and KMS")
KMS_SCHEMES = ("awskms://", "gcpkms://", "azurekms://", "hashivault://")
_PEM = re.compile(r"-----BEGIN PUBLIC KEY-----\s*\n([A-Za-z0-9+/=\s]+?)-----END PUBLIC KEY-----")
_PRIVATE = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
_EXAMPLE = "--require-signature cosign.pub"


def key_material(given: str) -> dict[str, str]:
    """The policy's ``key`` for ``--require-signature``: a public key's PEM (read from the
    file named) or a KMS reference. A private key, or anything else, is refused."""
    if given.startswith(KMS_SCHEMES):
        return {"kms": given, "hashAlgorithm": "sha256"}
    path = Path(given)
    try:
        text = inputs.read_bytes(path, "public-key").decode("ascii")
    except FileNotFoundError:
        raise DeployUsageError(f"--require-signature {path}: no such file; give cosign's "
                               f"public key file (`cosign generate-key-pair` writes cosign.pub), "
                               f"e.g. {_EXAMPLE}, or a KMS reference "
                               f"({', '.join(KMS_SCHEMES)})") from None
    except inputs.InputError as exc:
        raise DeployError(f"--require-signature {exc.path}: {exc.problem}; {exc.fix}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DeployUsageError(f"--require-signature {path}: not a PEM public key "
                               f"({type(exc).__name__}); give cosign.pub") from None
    if _PRIVATE.search(text):  # never shown, never written
        raise DeployUsageError(f"--require-signature {path}: this is a private key; the "
                               "manifest would publish it to the whole cluster. Give the "
                               "public half (cosign.pub beside cosign.key; `cosign "
                               "public-key --key cosign.key` prints it)")
    found = _PEM.search(text)
    if found is None or not _der_sequence(found.group(1)):
        raise DeployUsageError(f"--require-signature {path}: no PEM public key in it (a "
                               "'-----BEGIN PUBLIC KEY-----' block); give cosign's public "
                               f"key file, e.g. {_EXAMPLE}")
    return {"data": found.group(0).strip() + "\n", "hashAlgorithm": "sha256"}


def _der_sequence(body: str) -> bool:
    """Whether a PEM body is base64 of a DER SEQUENCE (a SubjectPublicKeyInfo starts so)."""
    try:
        der = base64.b64decode("".join(body.split()), validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(der) > 2 and der[0] == 0x30


def image_globs(image: str) -> list[str]:
    """Globs matching every tag and digest of ``image``'s repository, and nothing else:
    ``REPO:**`` and ``REPO@**`` on its fully qualified name (policy-controller matches
    ``index.docker.io/library/ubuntu:tag``, not ``ubuntu``)."""
    ref = refs.parse(image)
    registry = "index.docker.io" if ref.registry == refs.DOCKER_HUB else ref.registry
    repo = f"{registry}/{ref.repository}"
    return [f"{repo}:**", f"{repo}@**"]


def cluster_image_policy(name: str, image: str, key: dict[str, str]) -> dict[str, Any]:
    """The ``ClusterImagePolicy`` admitting ``image``'s repository only when signed."""
    return {
        "apiVersion": API_VERSION, "kind": "ClusterImagePolicy",
        "metadata": {"name": f"{name}-signed-images",
                     "labels": {"app.kubernetes.io/name": name,
                                "app.kubernetes.io/managed-by": "dockergen"}},
        "spec": {"images": [{"glob": g} for g in image_globs(image)],
                 "authorities": [{"name": "release-key", "key": key}],
                 "mode": "enforce"},
    }


def header_lines(image: str) -> list[str]:
    """What the manifest's header says about the policy."""
    return ["# Admission: a Sigstore policy-controller ClusterImagePolicy admits "
            f"{refs.parse(image).name}",
            "#   only with a cosign signature by the given key (install policy-controller and",
            "#   label the namespace policy.sigstore.dev/include=true; the policy is "
            "cluster-scoped)."]
