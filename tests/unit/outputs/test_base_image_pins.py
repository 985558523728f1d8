"""A base-image lock beside a profile pins the same images, and so names the same dg- tag,
in every output: render and its bake file, build --dry-run, deploy (Compose and Kubernetes)
and explain. Resolution applies the pins (dockergen/input/pins.py), so no output can miss them.

The lock is written by hand in the format dockergen/outputs/fleet/locks.py documents (no registry
is needed to read one); `dockergen lock` against real registries is
tests/daemon/test_fleet_locks.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import run_cli

DEVEL = "nvidia/cuda:13.0.2-devel-ubuntu22.04"
RUNTIME = "nvidia/cuda:13.0.2-base-ubuntu22.04"  # cuda.runtime_flavor: base (the default)
DEVEL_DIGEST = "sha256:" + "1" * 64
RUNTIME_DIGEST = "sha256:" + "2" * 64
PINNED = [f"{DEVEL}@{DEVEL_DIGEST}", f"{RUNTIME}@{RUNTIME_DIGEST}"]
_TAG = re.compile(r"registry\.example\.com/llm/vllm:(dg-[0-9a-f]{12})")


def _entry(digest: str, mirror: str | None = None) -> dict[str, object]:
    return {"digest": digest, "index_digest": digest, "platform": "linux/amd64",
            "platform_digest": "sha256:" + "3" * 64,
            "media_type": "application/vnd.oci.image.index.v1+json", "mirror": mirror,
            "locked_at": "2025-11-30T23:00:00Z"}


def _locked_profile(tmp_path: Path, images: dict[str, object] | None = None) -> Path:
    profile = tmp_path / "locked.yaml"
    profile.write_text("extends: h100-fp8\nname: locked\n")
    images = {DEVEL: _entry(DEVEL_DIGEST), RUNTIME: _entry(RUNTIME_DIGEST)} \
        if images is None else images
    (tmp_path / "locked.lock.json").write_text(
        json.dumps({"lockfile": 1, "images": images}, indent=2, sort_keys=True))
    return profile


def _ok(*args: str) -> str:
    run = run_cli(*args)
    assert run.rc == 0, run.err
    return run.out


def test_every_output_names_the_tag_and_the_images_of_the_lock(tmp_path: Path) -> None:
    profile = str(_locked_profile(tmp_path))
    out = tmp_path / "out"
    _ok("render", profile, "-q", "-o", str(out))
    froms = re.findall(r"^FROM (\S+) AS (?:build-base|runtime)$",
                       (out / "Dockerfile").read_text(), re.MULTILINE)
    assert froms == PINNED
    tags = {"bake": _TAG.findall((out / "docker-bake.hcl").read_text())}
    plan = _ok("build", profile, "--dry-run", "-q")
    tags["build --dry-run"] = _TAG.findall(plan)
    pulls = plan.split("base images to pull")[1].split("tags:")[0]
    assert re.findall(r"^  (\S+)$", pulls, re.MULTILINE) == PINNED
    for fmt in ("compose", "k8s"):
        tags[f"deploy {fmt}"] = _TAG.findall(_ok("deploy", profile, "--format", fmt, "-q"))
    assert len(set(map(tuple, tags.values()))) == 1, tags  # one dg- tag, and only one each
    assert len(tags["bake"]) == 1
    explained = _ok("explain", profile)
    shown = re.findall(r"^  (?:build|runtime) image +(\S+)$", explained, re.MULTILINE)
    assert shown == PINNED
    assert "pinned by locked.lock.json" in explained


def test_an_image_the_lock_lacks_is_an_error_of_every_command(tmp_path: Path) -> None:
    profile = str(_locked_profile(tmp_path, {DEVEL: _entry(DEVEL_DIGEST)}))
    for args in (("validate", profile), ("explain", profile),
                 ("build", profile, "--dry-run"), ("deploy", profile, "--format", "k8s")):
        run = run_cli(*args)
        assert run.rc == 2, (args, run.err)
        assert (f"cuda.runtime_image: {RUNTIME} is not in locked.lock.json; run: dockergen "
                "lock --update") in run.err, (args, run.err)
        assert "Traceback" not in run.err and run.out == ""


def test_a_lock_entry_that_is_no_reference_never_reaches_a_from_line(tmp_path: Path) -> None:
    bad = _entry(DEVEL_DIGEST, mirror="registry.example.com/cuda\nRUN id")
    profile = str(_locked_profile(tmp_path, {DEVEL: bad, RUNTIME: _entry(RUNTIME_DIGEST)}))
    run = run_cli("render", profile)
    assert run.rc == 2, run.err
    assert "locked.lock.json" in run.err and "not an image reference" in run.err
    assert "RUN id" not in run.out and "Traceback" not in run.err
    # a key that is no reference, with a line break in it: shown quoted, on one line
    profile = str(_locked_profile(tmp_path, {DEVEL: _entry(DEVEL_DIGEST),
                                             RUNTIME: _entry(RUNTIME_DIGEST),
                                             "x\nfake: line": _entry(DEVEL_DIGEST)}))
    run = run_cli("validate", profile)
    assert run.rc == 2, run.err
    assert 'images["x\\nfake: line"]: not an image reference' in run.err
    assert "\nfake: line" not in run.err


def test_the_lock_command_reads_the_unpinned_images(tmp_path: Path) -> None:
    profile = str(_locked_profile(tmp_path))
    run = run_cli("lock", "--check", profile)
    assert run.rc == 0, run.err


def test_a_lock_with_each_platforms_digest_pins_the_index(tmp_path: Path) -> None:
    """`lock --platform linux/amd64,linux/arm64` keeps each platform's digest; FROM pins the
    index, whichever platform is built."""
    entry = _entry(DEVEL_DIGEST) | {"platform_digests": {"linux/amd64": "sha256:" + "3" * 64,
                                                         "linux/arm64": "sha256:" + "4" * 64}}
    profile = str(_locked_profile(tmp_path, {DEVEL: entry, RUNTIME: _entry(RUNTIME_DIGEST)}))
    out = tmp_path / "out"
    _ok("render", profile, "-q", "-o", str(out))
    assert re.findall(r"^FROM (\S+) AS (?:build-base|runtime)$",
                      (out / "Dockerfile").read_text(), re.MULTILINE) == PINNED


def test_a_platform_digests_entry_dockergen_never_writes_is_refused(tmp_path: Path) -> None:
    entry = _entry(DEVEL_DIGEST) | {"platform_digests": {"linux/arm64": "sha256:short"}}
    profile = str(_locked_profile(tmp_path, {DEVEL: entry, RUNTIME: _entry(RUNTIME_DIGEST)}))
    run = run_cli("render", profile, "-q")
    assert run.rc != 0 and "Traceback" not in run.err
    assert "platform_digests is not a mapping of platform (linux/arm64) to sha256:" in run.err
