"""The dg-<hash> tag hashes what the build consumes, and is never moved in a registry."""

from __future__ import annotations

import io
import json
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

import dockergen.resolve.buildid
from dockergen.build.daemon import PushError
from dockergen.build.options import BuildOptions
from dockergen.build.orchestrate import build_profile
from dockergen.build.release import push
from dockergen.build.run import BuildPlan, run_build
from dockergen.errors import UsageError
from dockergen.input.buildrecord import BuildRecord, Status
from dockergen.pipeline import resolution
from dockergen.resolve.buildid import content_tag
from tests.conftest import ROOT, _engine_or_skip, a_pem_certificate
from tests.support.fake_daemon import FakeDaemon
from tests.support.registries import ANON

PROFILE = ROOT / "tests" / "profiles" / "standin.yaml"
ONE_CHECK = ("smoke.defaults=false",
             "smoke.commands=[{name: python runs, command: [python3, -c, pass]}]")


def _tag(mode: str = "buildkit", overrides: tuple[str, ...] = (), **kw: object) -> str:
    files = resolution(PROFILE, overrides, mode).files()  # type: ignore[arg-type]
    return content_tag(files, mode=mode, **kw)  # type: ignore[arg-type]


def test_every_build_input_changes_the_tag(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the fix: all of these got the same "immutable" tag (a hash of the profile only)."""
    base = _tag()
    assert base == _tag() and base.startswith("dg-") and len(base) == 15  # deterministic
    cert = tmp_path / "corp.crt"
    cert.write_text(a_pem_certificate())
    variants = {
        "classic rendering": _tag("classic"),
        "another base image by --build-arg": _tag(build_args={"RUNTIME_IMAGE": "ubuntu:24.04"}),
        "an intermediate --target": _tag(stage="flash-attn"),
        "a platform": _tag(platform="linux/arm64"),
        "a CA certificate": _tag(overrides=(f'build.ca_certificates=["{cert}"]',)),
        "gzip layers": _tag(overrides=("image.compression=gzip",)),
    }
    monkeypatch.setattr(dockergen.resolve.buildid, "__version__", "0.1.1")
    variants["another dockergen version"] = _tag()
    assert base not in variants.values()
    assert len(set(variants.values())) == len(variants)


def test_an_intermediate_target_gets_no_release_tag(tmp_path: Path) -> None:
    daemon = FakeDaemon()
    record = build_profile(PROFILE, ONE_CHECK, BuildOptions(progress="plain", stage="flash-attn"),
                           output=tmp_path / "ctx", echo=lambda _: None, out=lambda _: None,
                           daemon=daemon)
    assert record is not None
    assert [ref.split(":")[-1] for ref in daemon.tags] == [record.immutable_tag.split(":")[-1]]
    assert record.stage == "flash-attn" and record.smoke is None
    assert record.smoke_not_run == "not run: --target flash-attn is an intermediate stage"
    saved = json.loads((tmp_path / "ctx" / "build-record.json").read_text())
    assert saved["target"] == "flash-attn" and saved["smoke"] == record.smoke_not_run
    assert daemon.runs == []
    with pytest.raises(UsageError, match="--push of the intermediate stage 'flash-attn'"):
        build_profile(PROFILE, ONE_CHECK, BuildOptions(stage="flash-attn", push=True),
                      output=tmp_path / "ctx2", echo=lambda _: None, out=lambda _: None,
                      daemon=FakeDaemon())


def test_the_final_stage_as_target_is_the_release(tmp_path: Path) -> None:
    daemon = FakeDaemon()
    build_profile(PROFILE, ONE_CHECK, BuildOptions(progress="plain", stage="runtime"),
                  output=tmp_path / "ctx", echo=lambda _: None, out=lambda _: None,
                  daemon=daemon)
    release = resolution(PROFILE).resolved.tags[0]  # e.g. 0.30.0-cu130-standin
    assert any(ref.endswith(f":{release}") for ref in daemon.tags)


def test_an_existing_immutable_tag_is_never_moved(tmp_path: Path) -> None:
    """Before the fix: a --no-cache rebuild put a different image under the same tag."""
    first = FakeDaemon()
    record = build_profile(PROFILE, ONE_CHECK, BuildOptions(progress="plain", push=True),
                           output=tmp_path / "a", echo=lambda _: None, out=lambda _: None,
                           daemon=first)
    assert record is not None and record.status == Status.PUSHED
    immutable = record.immutable_tag
    rebuilt = FakeDaemon(image="sha256:" + "ef" * 32, registry={immutable: "sha256:" + "11" * 32})
    with pytest.raises(PushError, match="already names sha256:1111") as exc:
        build_profile(PROFILE, ONE_CHECK, BuildOptions(progress="plain", push=True),
                      output=tmp_path / "b", echo=lambda _: None, out=lambda _: None,
                      daemon=rebuilt)
    assert exc.value.exit_code == 7 and rebuilt.pushed == []
    saved = json.loads((tmp_path / "b" / "build-record.json").read_text())
    assert saved["status"] == "push-failed" and saved["pushed"] == {}
    # the same image (the registry's digest is one of its RepoDigests) pushes fine
    repo = immutable.rsplit(":", 1)[0]
    same = FakeDaemon(registry={immutable: "sha256:" + "11" * 32},
                      repo_digests=[f"{repo}@sha256:" + "11" * 32])
    build_profile(PROFILE, ONE_CHECK, BuildOptions(progress="plain", push=True),
                  output=tmp_path / "c", echo=lambda _: None, out=lambda _: None, daemon=same)
    assert immutable in same.pushed


@pytest.mark.daemon
@pytest.mark.usefixtures("registries")
def test_a_real_registry_keeps_the_first_image(tmp_path: Path) -> None:
    """Against the real engine and registry: another image is refused the pushed tag."""
    _engine_or_skip()
    from dockergen.build.daemon import connect

    daemon = connect()
    repo = f"{ANON}/dockergen-test/immutable"
    immutable = f"{repo}:dg-{uuid.uuid4().hex[:12]}"
    assert daemon.registry_digest(immutable) is None  # a tag the registry never saw
    ids = []
    for n, word in enumerate(("first", "second")):
        files = {"Dockerfile": f"FROM local/debian:bookworm\nRUN echo {word} > /x\n".encode()}
        plan = BuildPlan("immutable", "buildkit", ["Dockerfile"], [], [f"{repo}:{word}"], {})
        result = run_build(daemon, files, plan, BuildOptions(progress="plain", no_cache=True),
                           io.StringIO(), io.StringIO())
        ids.append(result.image_id)
        if n == 0:
            daemon.tag(result.image_id, immutable)
    record = BuildRecord("immutable", "sha256:" + "0" * 64, "buildkit", (immutable,),
                         immutable, status=Status.BUILT)
    pushed = push(daemon, record, ids[0], tmp_path / "r.json", lambda _: None, lambda _: None)
    digest = daemon.registry_digest(immutable)
    assert digest is not None and pushed.status == Status.PUSHED
    assert pushed.pushed == {immutable: digest}
    daemon.tag(ids[1], immutable)  # the rebuilt image now holds the tag locally
    with pytest.raises(PushError, match="the immutable tag is never moved"):
        push(daemon, replace(record, tags=(immutable, f"{repo}:second")), ids[1],
              tmp_path / "r.json", lambda _: None, lambda _: None)
    assert daemon.registry_digest(immutable) == digest  # still the first image


def test_deploy_without_a_record_names_the_tag_a_default_build_gives() -> None:
    """deploy (no --record) and `build` agree on the immutable tag."""
    from tests.conftest import run_cli

    plan = run_cli("build", "h100-fp8", "--dry-run", "-q", env={"DOCKER_HOST": "tcp://127.0.0.1:9"})
    assert plan.rc == 0, plan.err
    planned = [line.strip() for line in plan.out.splitlines() if ":dg-" in line]
    deploy = run_cli("deploy", "h100-fp8", "--format", "compose")
    assert deploy.rc == 0, deploy.err
    assert len(planned) == 1 and f"image: {planned[0]}" in deploy.out
