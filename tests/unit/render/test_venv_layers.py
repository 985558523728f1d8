"""The runtime venv in layers: what each layer holds, and that equal files make equal layers.

The layout is read from the rendered Dockerfile; the sharing is shown on real builds (real
BuildKit and registry, stand-in packages: tests/support/standin.py): the same stand-in profile built
twice, the second time without the build cache, so every file of the venv is installed anew
with new modification times. The layers whose files are the same wheels' files must come out
with the same digest in the registry, which is what lets a node or a registry keep them once.
"""

from __future__ import annotations

import json
import re
import urllib.request
import uuid
from pathlib import Path

import pytest

from dockergen.api import resolve_profile
from tests.conftest import ROOT, run_cli
from tests.support.registries import ANON

PROFILE = ROOT / "tests" / "profiles" / "standin.yaml"
# a single-platform image: Docker schema 2 (gzip layers) or OCI (zstd layers, the default)
MANIFEST = ("application/vnd.oci.image.manifest.v1+json, "
            "application/vnd.docker.distribution.manifest.v2+json")


def _runtime(profile: str, *options: str) -> str:
    result = run_cli("render", str(ROOT / "profiles" / profile), *options)
    assert result.rc == 0, result.err
    return result.out.split(" AS runtime", 1)[1]


def test_each_file_of_the_venv_is_in_exactly_one_layer() -> None:
    r = resolve_profile(ROOT / "profiles" / "h100-fp8.yaml")
    layers = r.runtime.venv_layers
    assert [layer.members for layer in layers][:3] == [
        ("./lib/python3.12/site-packages/nvidia/cu13",),
        tuple(f"./lib/python3.12/site-packages/nvidia/{n}"
              for n in ("cudnn", "nccl", "cusparselt", "nvshmem")),
        tuple(f"./lib/python3.12/site-packages/{n}"
              for n in ("torch", "torchgen", "functorch", "triton"))]
    *groups, rest = layers
    members = [m for layer in groups for m in layer.members]
    assert len(members) == len(set(members))  # no entry in two layers
    assert rest.members == (".",) and rest.exclude == tuple(members)  # the rest: all others
    assert "./lib/python3.12/site-packages/vllm" in groups[-1].members
    # no plain COPY of the venv beside the layers (it would carry every file twice)
    assert not [c for c in r.runtime.copies if c.dst == r.runtime.venv]


def test_the_dockerfile_reads_each_layer_from_the_engine_stage() -> None:
    runtime = _runtime("h100-sglang-fp8.yaml")
    runs = re.findall(r"^RUN --mount=type=bind,from=engine,source=/opt/venv,target=/mnt \\\n"
                      r"(?:.*\\\n)*?.*touch -h -d @0 (.*)$", runtime, flags=re.M)
    site = "/opt/venv/lib/python3.12/site-packages"
    base = f"/opt /opt/venv /opt/venv/lib /opt/venv/lib/python3.12 {site}"
    # every folder a layer makes gets mtime 0, also nvidia/ above nvidia/cu13 (it had the
    # build's time, and the CUDA layers of the vLLM and SGLang images differed by it alone)
    assert runs == [f"{base} {site}/nvidia"] * 2 + [base] * 3
    assert "./lib/python3.12/site-packages/sgl_kernel" in runtime
    assert "COPY --from=engine /opt/venv" not in runtime
    # the image's own /etc/hosts comes first (else BuildKit puts /etc into every RUN layer);
    # the hash-based bytecode the engine stage compiled goes into the layers with its sources
    assert runtime.index("COPY etc-hosts /etc/hosts") < runtime.index("--mount=type=bind")
    assert runtime.count("--ignore-failed-read --anchored") == 5
    assert "__pycache__" not in runtime
    r = resolve_profile(ROOT / "profiles" / "h100-sglang-fp8.yaml")
    assert r.context_files["etc-hosts"].startswith(b"127.0.0.1\tlocalhost\n")


def test_classic_builds_copy_the_venv_whole() -> None:
    """The classic builder has no bind mounts: one COPY, no layers."""
    runtime = _runtime("h100-fp8.yaml", "--mode", "classic")
    assert "COPY --from=engine /opt/venv /opt/venv" in runtime
    assert "--mount=type=bind" not in runtime and "etc-hosts" not in runtime


def _registry_json(url: str, accept: str | None = None) -> dict:  # type: ignore[type-arg]
    request = urllib.request.Request(url)
    if accept:
        request.add_header("Accept", accept)
    with urllib.request.urlopen(request, timeout=30) as resp:
        return json.loads(resp.read())  # type: ignore[no-any-return]


def _venv_layer_digests(ref: str) -> list[str]:
    """The registry digests of the venv layers of ``ref``, in order (manifest layers paired
    with the config's non-empty history entries)."""
    registry, rest = ref.split("/", 1)
    repo, tag = rest.rsplit(":", 1)
    manifest = _registry_json(f"http://{registry}/v2/{repo}/manifests/{tag}", MANIFEST)
    config = _registry_json(f"http://{registry}/v2/{repo}/blobs/"
                            f"{manifest['config']['digest']}")
    history = [h for h in config["history"] if not h.get("empty_layer")]
    assert len(history) == len(manifest["layers"])
    return [layer["digest"] for layer, h in zip(manifest["layers"], history, strict=True)
            if "tar -C /mnt --create" in h.get("created_by", "")]


@pytest.mark.daemon
@pytest.mark.usefixtures("registries")
def test_a_rebuild_without_cache_makes_the_same_wheel_layers(index: str, docker_client,  # type: ignore[no-untyped-def]
                                                             tmp_path: Path) -> None:
    refs = [f"{ANON}/dockergen-test/layers-{uuid.uuid4().hex[:8]}:{n}" for n in ("a", "b")]
    for ref, extra in ((refs[0], ()), (refs[1], ("--no-cache",))):
        # not `build --push`: the rebuild is another image under the same content tag,
        # which dockergen never moves (exit 7); only this test's own tag is pushed
        result = run_cli("build", str(PROFILE), "--network", "host", "-q",
                         "--set", f"build.pip_index_url={index}/simple",
                         "--set", f"build.torch_index_url={index}", "--tag", ref, *extra,
                         "-o", str(tmp_path / ref.rsplit(":", 1)[1]))
        assert result.rc == 0, result.err[-3000:]
        repo, tag = ref.rsplit(":", 1)
        for chunk in docker_client.api.push(repo, tag=tag, stream=True, decode=True):
            assert "error" not in chunk, chunk
    first, second = (_venv_layer_digests(ref) for ref in refs)
    assert len(first) == len(second) == 5
    # CUDA wheels (none in the stand-ins: only the folders), torch and triton, the engine:
    # the same wheels' files, installed anew
    assert first[:4] == second[:4]
    assert len(set(first[2:])) == 3  # distinct layers, not one layer three times
