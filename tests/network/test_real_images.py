"""The shipped vLLM and SGLang images, built from the real packages on PyPI.

``dockergen build`` of ``profiles/h100-fp8.yaml`` (vLLM 0.33.0) and
``profiles/h100-sglang-fp8.yaml`` (SGLang 0.5.23) with the very Dockerfile dockergen renders;
what differs from the shipped rendering is only what these machines cannot reach:

- the base images: ``local/debian:bookworm`` (debootstrapped Debian 12 by
  tests/infra/provision.sh) stands in for both nvidia/cuda images (no Docker Hub here). Debian
  12's glibc 2.36 is just above Ubuntu 22.04's 2.35 (the shipped ``cuda.os``), so the same
  manylinux_2_28/2_34 wheels install; NVIDIA's CUDA libraries come as wheels with torch;
- Python: ``build.python_from: image`` with Debian 12's Python 3.11 (inside both releases'
  ranges), since ``uv python install`` needs python-build-standalone archives that only
  GitHub serves: the default ``python_from: uv`` (CPython 3.12 under /opt/python) stays
  unbuilt here;
- torch: ``build.torch_from: main-index`` (PyPI), since download.pytorch.org is unreachable;
  PyPI's torch 2.14 wheels are the CUDA 13.0 build, which the rule checks.

Network- and daemon-marked: CI reaches PyPI and runs them (a failure to reach PyPI fails the
build, never skips). Each engine's images and build cache are removed when its tests end, so
the disk holds one real image at a time (about 30 GB with the build stages and uv's cache).
The checks are then shown failing on the real image broken on purpose (a library removed, no
C compiler, two distributions owning one file) and on a flag the release lacks.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from dockergen.api import resolve_profile
from dockergen.build.daemon import connect
from dockergen.build.smoke import image_audit_check, serve_parser_check
from dockergen.knowledge.facts import facts as known_facts
from dockergen.parts import flashinfer, python, torch
from dockergen.resolve.model import Resolved
from dockergen.resources import templates_dir
from tests.conftest import cache_ids, prune_new_build_cache

KNOWN = known_facts()  # the shipped knowledge

pytestmark = [pytest.mark.daemon, pytest.mark.network, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
BASE = "local/debian:bookworm"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
# The only overrides of the shipped profiles (see the module docstring for why each).
REAL = ("python=3.11", "build.python_from=image", f"cuda.devel_image={BASE}",
        f"cuda.runtime_image={BASE}", "build.torch_from=main-index")
CHECKS = ("whole-image audit", "no file of the image is owned by two Python distributions",
          "own parser accepts the image's command", "Triton's launcher compiles",
          "torch reports the profile's CUDA and code for every target GPU",
          "compiles no module (bytecode shipped)")
# the vLLM image only: FlashInfer's start-up kernels, built ahead of time
VLLM_CHECKS = ("FlashInfer's start-up kernels load without JIT",)


@dataclass
class RealImage:
    """A real image built by `dockergen build`, with its build record and resolution."""

    profile: Path
    overrides: tuple[str, ...]
    image: str
    record: dict[str, Any]
    resolved: Resolved


def _build(profile: str, name: str, tmp: Path, client: Any) -> Iterator[RealImage]:
    """Build one shipped profile for real; afterwards remove exactly what the build made."""
    cache_before = cache_ids(client)
    images_before = {i.id for i in client.images.list(all=True)}
    path = ROOT / "profiles" / profile
    overrides = (*REAL, f"image.name=localhost:5000/dgtest-real/{name}")
    out = tmp / name
    cmd = [sys.executable, "-m", "dockergen", "build", str(path),
           *(a for o in overrides for a in ("--set", o)), "--ca-cert", str(HOST_CA),
           "-o", str(out)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=2400, check=False)
        record = json.loads((out / "build-record.json").read_text()) \
            if (out / "build-record.json").is_file() else {}
        assert proc.returncode == 0 and record, (proc.returncode, proc.stderr[-4000:],
                                                 record.get("smoke"))
        yield RealImage(path, overrides, record["immutable_tag"], record,
                        resolve_profile(path, overrides))
    finally:
        if os.environ.get("DOCKERGEN_TEST_KEEP_IMAGES") != "1":
            for image in client.images.list(all=True):
                if image.id not in images_before:
                    # gone already with the image it was derived from, or the parent of a
                    # derived image still there (removed with it): the session's clean-up
                    # (tests/conftest.py) takes what is left
                    with contextlib.suppress(docker.errors.APIError):
                        client.images.remove(image.id, force=True)
            # all the build cache this build created, and only that (never the engine's other
            # users'). Keeping the small records for the next engine's build (its apt and uv
            # steps) kept their large parents too, the venv layers: a record is not pruned
            # while a child of it stays. 12 GB of vLLM's build stayed through SGLang's, 34 GB
            # of both through the rest of the run (measured 2026-12-04).
            prune_new_build_cache(client, cache_before)


@pytest.fixture(scope="module")
def vllm_image(docker_client, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealImage]:  # type: ignore[no-untyped-def]
    yield from _build("h100-fp8.yaml", "vllm", tmp_path_factory.mktemp("real"), docker_client)


def _checks(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in record["smoke"]}


def _assert_checks_passed(real: RealImage) -> None:
    assert real.record["status"] == "built"
    checks = _checks(real.record)
    for want in CHECKS:
        hits = [c for name, c in checks.items() if want in name]
        assert len(hits) == 1, (want, sorted(checks))
        assert hits[0]["ok"] is True, hits[0]
    assert all(c["ok"] for c in checks.values()), [c for c in checks.values() if not c["ok"]]


def test_the_vllm_image_builds_from_pypi_and_passes_every_check(vllm_image: RealImage) -> None:
    _assert_checks_passed(vllm_image)
    checks = _checks(vllm_image.record)
    for want in VLLM_CHECKS:
        hits = [c for name, c in checks.items() if want in name]
        assert len(hits) == 1 and hits[0]["ok"] is True, (want, hits)
    kernels = next(c for n, c in checks.items() if n.startswith(VLLM_CHECKS[0]))
    assert kernels["detail"] == ("1 module(s) (sampling) loaded with "
                                 "FLASHINFER_DISABLE_JIT=1"), kernels
    bytecode = next(c for n, c in checks.items() if "compiles no module" in n)
    assert bytecode["detail"].endswith("modules from bytecode, 0 compiled"), bytecode
    torch_check = next(c for n, c in checks.items() if n.startswith("torch reports"))
    assert torch_check["detail"].startswith("CUDA 13.0, "), torch_check
    assert "sm_90" in torch_check["detail"].split()


def _derive(client: Any, base: str, steps: str) -> str:
    """A small image FROM a real one, changed as root by ``steps``; returns its tag."""
    tag = f"localhost:5000/dgtest-real/broken:{uuid.uuid4().hex[:12]}"
    dockerfile = f"FROM {base}\nUSER root\nRUN {steps}\nUSER 10001:10001\n".encode()
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
    context.seek(0)
    client.images.build(fileobj=context, custom_context=True, tag=tag, forcerm=True)
    return tag


def _run(check: Any, image: str) -> tuple[bool, str]:
    daemon = connect()
    run_id = uuid.uuid4().hex[:12]
    try:
        code, out = daemon.run(image, list(check.command[1:]), entrypoint=list(check.command[:1]),
                               timeout=600, run_id=run_id)
    finally:
        daemon.remove_containers(run_id)
    ok, detail = check.verify(code, out)
    return bool(ok), str(detail)


def _site(real: RealImage) -> str:
    return f"{real.resolved.runtime.venv}/lib/python{real.resolved.profile.python}/site-packages"


def test_the_audit_fails_on_the_real_image_without_a_library(vllm_image: RealImage,
                                                             docker_client) -> None:  # type: ignore[no-untyped-def]
    lib = f"{_site(vllm_image)}/nvidia/cu13/lib/libcublasLt.so.13"
    broken = _derive(docker_client, vllm_image.image, f"rm {lib}")
    ok, detail = _run(image_audit_check(vllm_image.resolved), broken)
    assert not ok
    assert "needs libcublasLt.so.13, which is not in the image" in detail, detail


def test_the_record_check_fails_on_two_distributions_owning_one_file(vllm_image: RealImage,
                                                                     docker_client) -> None:  # type: ignore[no-untyped-def]
    info = f"{_site(vllm_image)}/shadow_torch-1.0.dist-info"
    broken = _derive(docker_client, vllm_image.image,
                     f"mkdir {info} && printf 'Name: shadow-torch\\n' > {info}/METADATA "
                     f"&& printf 'torch/__init__.py,,\\n' > {info}/RECORD")
    ok, detail = _run(python.record_check(KNOWN, vllm_image.resolved.runtime.venv), broken)
    assert not ok
    assert detail.startswith("shadow-torch and torch both own 1 file(s): torch/__init__.py"), \
        detail


def test_the_triton_check_fails_without_a_c_compiler(vllm_image: RealImage,
                                                     docker_client) -> None:  # type: ignore[no-untyped-def]
    broken = _derive(docker_client, vllm_image.image,
                     "rm -f /usr/bin/gcc* /usr/bin/cc /usr/bin/x86_64-linux-gnu-gcc*")
    stub = (templates_dir() / "context" / "driver_stub.py").read_text(encoding="utf-8")
    ok, detail = _run(python.triton_check(vllm_image.resolved.runtime.venv, stub), broken)
    assert not ok
    assert "no C compiler" in detail, detail


def test_the_parser_check_fails_on_a_flag_the_release_lacks(vllm_image: RealImage) -> None:
    # --swap-space: removed in vLLM 0.18.0 (vllm/facts.yaml removed_flags); the image is the real
    # one, the command is the image's with the flag appended, as extra_args would render it
    runtime = vllm_image.resolved.runtime
    cmd = (*runtime.cmd, "--swap-space", "4")
    wrong = replace(vllm_image.resolved, runtime=replace(runtime, cmd=cmd))
    ok, detail = _run(serve_parser_check(wrong, (templates_dir() / "context" /
                                                 "driver_stub.py").read_text()),
                      vllm_image.image)
    assert not ok
    assert "unrecognized arguments: --swap-space 4" in detail, detail


def test_the_torch_check_fails_for_a_gpu_torch_has_no_code_for(vllm_image: RealImage) -> None:
    # CUDA 13 torch carries sm_75 and up: a Volta (7.0) target has no code
    check = torch.arch_check(vllm_image.resolved.base.torch, {"v100": "7.0", "h100": "9.0"})
    ok, detail = _run(check, vllm_image.image)
    assert not ok
    assert detail.startswith("no code for v100 (7.0)"), detail


def test_the_kernel_check_fails_when_a_start_up_module_is_left_out(vllm_image: RealImage,
                                                                  docker_client) -> None:  # type: ignore[no-untyped-def]
    # the image without the ahead-of-time sampling module: with JIT disabled FlashInfer's own
    # loader refuses to build it, as a start on a GPU host without nvcc would fail
    aot = vllm_image.resolved.flashinfer_aot
    assert aot is not None
    broken = _derive(docker_client, vllm_image.image, f"rm -r {aot.aot_dir}/sampling")
    stub = (templates_dir() / "context" / "driver_stub.py").read_text(encoding="utf-8")
    ok, detail = _run(flashinfer.load_check(aot, stub), broken)
    assert not ok
    assert detail.startswith("sampling: MissingJITCacheError"), detail


def test_the_bytecode_check_fails_on_the_real_image_without_bytecode(vllm_image: RealImage,
                                                                    docker_client) -> None:  # type: ignore[no-untyped-def]
    broken = _derive(docker_client, vllm_image.image,
                     f"find {_site(vllm_image)}/vllm -name __pycache__ -prune -exec rm -r {{}} +")
    module = vllm_image.resolved.startup_import
    ok, detail = _run(python.bytecode_check(vllm_image.resolved.runtime.venv, module), broken)
    assert not ok
    assert "module(s) compiled at import (/opt/venv/lib/" in detail, detail
