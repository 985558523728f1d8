"""BuildKit's own Dockerfile checks (``docker buildx build --check``) on every rendered Dockerfile.

The checks are BuildKit's (buildx 0.29.1 and the engine's Dockerfile frontend; rules at
docs.docker.com/go/dockerfile/rule/), run on the shipped examples (BuildKit mode) and on the
same profiles rendered in classic mode. Any warning fails the test, with its rule, file and
line. The check resolves every ``FROM`` image first and Docker Hub is unreachable here, so
the NVIDIA CUDA names the Dockerfiles use are stand-ins: ``local/debian:bookworm`` tagged as
each of them for the module, and exactly those tags removed after it (other tests rely on the
names being absent). That the check fails on a Dockerfile with known warnings is shown by the
last test, through the same helper.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.daemon

BASE = "local/debian:bookworm"
EXAMPLES = sorted((ROOT / "examples").glob("*/Dockerfile"))
_FROM = re.compile(r"^FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?\s*$",
                   re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class Finding:
    """What the check said of one Dockerfile: its warnings, or why it could not run."""

    dockerfile: Path
    warnings: tuple[str, ...]
    error: str = ""

    @property
    def clean(self) -> bool:
        return not self.warnings and not self.error


def _docker() -> str:
    docker = shutil.which("docker")
    if docker is None:
        pytest.fail("no docker CLI on PATH (tests/infra/provision.sh installs it)")
    probe = subprocess.run([docker, "buildx", "version"], capture_output=True, text=True,
                           check=False)
    if probe.returncode != 0:
        pytest.fail(f"docker buildx is not installed: {probe.stderr.strip()}")
    return docker


def check(dockerfile: Path, context: Path) -> Finding:
    """Run BuildKit's checks on one Dockerfile (the engine's default builder, JSON report)."""
    done = subprocess.run(
        [_docker(), "buildx", "build", "--builder", "default", "--call", "check,format=json",
         "-f", str(dockerfile), str(context)],
        capture_output=True, text=True, timeout=300, check=False)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        return Finding(dockerfile, (), f"exit {done.returncode}: {done.stderr.strip()[-2000:]}")
    warnings = tuple(
        f"{w['ruleName']} at line {w['location']['ranges'][0]['start']['line']}: {w['detail']}"
        for w in report.get("warnings") or ())
    error = "" if done.returncode == 0 or warnings else f"exit {done.returncode}: {done.stderr}"
    return Finding(dockerfile, warnings, error)


def _external_images(dockerfiles: list[Path]) -> set[str]:
    """The FROM images that are not earlier stages of the same Dockerfile."""
    images: set[str] = set()
    for dockerfile in dockerfiles:
        stages: set[str] = set()
        for image, stage in _FROM.findall(dockerfile.read_text()):
            if image.lower() not in stages:
                images.add(image)
            if stage:
                stages.add(stage.lower())
    return images


@pytest.fixture(scope="module")
def classic(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Every shipped profile rendered in classic mode (no BuildKit-only syntax)."""
    out = tmp_path_factory.mktemp("classic")
    done = run_cli("render", "--all", "--mode", "classic", "-q", "-o", str(out))
    assert done.rc == 0, done.err
    return sorted(out.glob("*/Dockerfile"))


@pytest.fixture(scope="module")
def stand_in_bases(docker_client, classic: list[Path]) -> Iterator[set[str]]:  # type: ignore[no-untyped-def]
    """``local/debian:bookworm`` tagged as every FROM image the Dockerfiles name; the tags
    this fixture added (and only those) are removed after the module."""
    import docker.errors

    names = _external_images(EXAMPLES + classic)
    assert names and all(n.startswith("nvidia/cuda:") for n in names), names
    added = []
    try:
        for name in sorted(names):
            try:
                docker_client.images.get(name)
                continue  # somebody's real image: used as it is, left alone
            except docker.errors.ImageNotFound:
                pass
            repo, tag = name.rsplit(":", 1)
            assert docker_client.api.tag(BASE, repo, tag)
            added.append(name)
        yield names
    finally:
        for name in added:
            docker_client.api.remove_image(name, noprune=True)


def _report(findings: list[Finding]) -> str:
    return "\n".join(f"{f.dockerfile}: " + (f.error or "; ".join(f.warnings))
                     for f in findings if not f.clean)


def test_every_example_dockerfile_passes_buildkit_checks(stand_in_bases: set[str]) -> None:
    assert len(EXAMPLES) >= 12, "examples/ lost its Dockerfiles"
    findings = [check(df, df.parent) for df in EXAMPLES]
    assert all(f.clean for f in findings), _report(findings)


def test_every_classic_rendering_passes_buildkit_checks(classic: list[Path],
                                                         stand_in_bases: set[str]) -> None:
    assert len(classic) == len(EXAMPLES)  # the same profiles, the other mode
    findings = [check(df, df.parent) for df in classic]
    assert all(f.clean for f in findings), _report(findings)


def test_the_check_fails_on_known_warnings(tmp_path: Path, stand_in_bases: set[str]) -> None:
    # the same helper on a Dockerfile with two of BuildKit's rules broken, FROM a stand-in
    base = sorted(stand_in_bases)[0]
    (tmp_path / "Dockerfile").write_text(f"FROM {base} as build\nCMD echo hi\n")
    finding = check(tmp_path / "Dockerfile", tmp_path)
    assert not finding.clean
    assert not finding.error, finding.error
    assert [w.split(" at ")[0] for w in finding.warnings] == ["FromAsCasing",
                                                               "JSONArgsRecommended"]
    assert finding.warnings[1].startswith("JSONArgsRecommended at line 2")


def test_the_check_fails_when_a_from_image_cannot_be_resolved(tmp_path: Path,
                                                               stand_in_bases: set[str]) -> None:
    # a FROM image the check cannot resolve (a closed port on loopback: no traffic leaves
    # the machine) stops it: that must count as a failure, never as "no warnings"
    (tmp_path / "Dockerfile").write_text('FROM 127.0.0.1:9/none/base:1\nCMD ["true"]\n')
    finding = check(tmp_path / "Dockerfile", tmp_path)
    assert not finding.clean and finding.error
