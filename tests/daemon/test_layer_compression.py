"""The layers `dockergen build --push` writes, read back from the registry's own manifest.

The stand-in profile (tests/profiles/standin.yaml) is built and pushed twice into the local
anonymous registry: with the default compression (zstd) every layer of the pushed manifest
is ``application/vnd.oci.image.layer.v1.tar+zstd``; with ``image.compression: gzip`` every
layer is gzip. The digest the build prints and records is the one the registry serves for
each tag (``Docker-Content-Digest``). Needs the provisioned engine (Docker 28 with the
containerd image store: tests/infra/provision.sh).
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path

import pytest

from dockergen.knowledge import layers
from tests.conftest import ROOT, Run, run_cli
from tests.support.registries import ANON

pytestmark = [pytest.mark.daemon, pytest.mark.usefixtures("registries")]

PROFILE = ROOT / "tests" / "profiles" / "standin.yaml"
ACCEPT = ", ".join(("application/vnd.oci.image.index.v1+json",
                    "application/vnd.docker.distribution.manifest.list.v2+json",
                    "application/vnd.oci.image.manifest.v1+json",
                    "application/vnd.docker.distribution.manifest.v2+json"))


def _manifest(ref: str) -> tuple[str, dict]:  # type: ignore[type-arg]
    """(Docker-Content-Digest, the manifest) the registry serves for ``ref``; an index is
    followed to its linux/amd64 manifest (the digest stays the index's)."""
    registry, rest = ref.split("/", 1)
    repo, tag = rest.rsplit(":", 1)

    def get(reference: str) -> tuple[str, dict]:  # type: ignore[type-arg]
        request = urllib.request.Request(f"http://{registry}/v2/{repo}/manifests/{reference}",
                                         headers={"Accept": ACCEPT})
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.headers["Docker-Content-Digest"], json.loads(resp.read())

    digest, manifest = get(tag)
    if "manifests" in manifest:
        amd64 = next(m for m in manifest["manifests"]
                     if m.get("platform", {}).get("architecture") == "amd64")
        manifest = get(amd64["digest"])[1]
    return digest, manifest


def _build_and_push(index: str, tmp_path: Path, name: str, *sets: str) -> Run:
    args = [a for s in (f"image.name={ANON}/dockergen-test/{name}",
                        f"build.pip_index_url={index}/simple", f"build.torch_index_url={index}",
                        *sets) for a in ("--set", s)]
    return run_cli("build", str(PROFILE), "--network", "host", "-q", "--push", *args,
                   "-o", str(tmp_path / name))


@pytest.mark.parametrize("compression", ["zstd", "gzip"])
def test_pushed_layers_have_the_profiles_compression(index: str, tmp_path: Path,
                                                     compression: str) -> None:
    name = f"layers-{compression}-{uuid.uuid4().hex[:6]}"
    sets = () if compression == "zstd" else ("image.compression=gzip",)  # zstd: the default
    result = _build_and_push(index, tmp_path, name, *sets)
    assert result.rc == 0, result.err[-3000:]
    printed = dict(line.split("@", 1) for line in result.out.split())
    record = json.loads((tmp_path / name / "build-record.json").read_text())
    assert record["pushed"] == printed and len(printed) == 2  # the release and dg- tags
    for ref, digest in printed.items():
        served, manifest = _manifest(ref)
        assert served == digest, ref  # printed, recorded and served: one digest
        types = {layer["mediaType"] for layer in manifest["layers"]}
        assert types and types <= set(layers.LAYER_MEDIA_TYPES[compression]), types
    if compression == "zstd":
        assert types == {"application/vnd.oci.image.layer.v1.tar+zstd"}
        assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    else:
        assert not any("zstd" in t for t in types)
