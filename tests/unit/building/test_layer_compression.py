"""image.compression: what the build asks BuildKit for, and the engines it refuses up front.

An engine that cannot write zstd (the classic image store, the classic builder) would write
gzip without a word: the build stops before anything is written or built, naming the field
and both fixes. Against the fake daemon (tests/support/fake_daemon.py); the layers a real
engine writes are read from a real registry in tests/daemon/test_layer_compression.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dockergen.build.options import BuildOptions
from dockergen.build.orchestrate import build_profile
from dockergen.errors import ExitCode
from dockergen.knowledge import layers
from tests.conftest import ROOT, run_cli
from tests.support.fake_daemon import FakeDaemon

PROFILE = ROOT / "tests" / "profiles" / "standin.yaml"
ONE_CHECK = ("smoke.defaults=false",
             "smoke.commands=[{name: python runs, command: [python3, -c, pass]}]")


def _build(daemon: FakeDaemon, tmp_path: Path, *overrides: str, builder: str = "auto") -> None:
    build_profile(PROFILE, (*ONE_CHECK, *overrides), BuildOptions(progress="plain",
                                                                  builder=builder),
                  output=tmp_path / "ctx", echo=lambda _: None, out=lambda _: None,
                  daemon=daemon)


def test_zstd_is_the_default_and_asks_for_oci_zstd_layers(tmp_path: Path) -> None:
    daemon = FakeDaemon()
    _build(daemon, tmp_path)
    # with the timestamp rewrite the containerd store honours (dockergen/knowledge/reproducible.py)
    assert daemon.exporters == [{"compression": "zstd", "force-compression": "true",
                                 "oci-mediatypes": "true", "rewrite-timestamp": "true"}]
    assert daemon.buildargs == [{"SOURCE_DATE_EPOCH": "0"}]


def test_gzip_is_forced_too(tmp_path: Path) -> None:
    # without force-compression a layer BuildKit's cache holds as zstd would stay zstd
    daemon = FakeDaemon(store="classic")  # gzip needs no containerd store
    _build(daemon, tmp_path, "image.compression=gzip")
    # the classic store ignores rewrite-timestamp: it is not asked for (the epoch still is)
    assert daemon.exporters == [{"compression": "gzip", "force-compression": "true"}]
    assert daemon.buildargs == [{"SOURCE_DATE_EPOCH": "0"}]


def test_a_given_epoch_is_kept(tmp_path: Path) -> None:
    daemon = FakeDaemon()
    build_profile(PROFILE, ONE_CHECK, BuildOptions(progress="plain", build_args={
                      "SOURCE_DATE_EPOCH": "1764547200"}),
                  output=tmp_path / "ctx", echo=lambda _: None, out=lambda _: None,
                  daemon=daemon)
    assert daemon.buildargs == [{"SOURCE_DATE_EPOCH": "1764547200"}]


@pytest.mark.parametrize(("store", "builder", "why"), [
    ("classic", "auto", "this Docker engine keeps images in its classic store (e.g. overlay2), "
                        "whose image exporter writes gzip whatever it is asked"),
    ("containerd", "classic", "the classic builder (no BuildKit) writes gzip layers only")])
def test_an_engine_that_cannot_write_zstd_is_refused_before_the_build(
        store: str, builder: str, why: str, tmp_path: Path) -> None:
    daemon = FakeDaemon(store=store)
    with pytest.raises(layers.EngineCannotWrite) as caught:
        _build(daemon, tmp_path, builder=builder)
    assert caught.value.exit_code == ExitCode.MISSING_TOOL
    # the nearest written parent of the field: standin.yaml's image section
    text = str(caught.value)  # the file as the user named it, then its position
    assert text[text.index("standin.yaml:"):] == (
        f"standin.yaml:23:3: image.compression: zstd layers cannot be built here: {why}; build "
        f"with {layers.BUILD_ENGINE_REQUIREMENT}, or set image.compression: gzip (nodes then "
        "need no zstd support)")
    assert daemon.exporters == [] and daemon.tags == {}  # nothing built, nothing tagged
    assert not (tmp_path / "ctx").exists()  # nothing written


def test_the_command_line_says_it_with_its_exit_code(tmp_path: Path) -> None:
    done = run_cli("build", str(PROFILE), "--builder", "classic", "-q",
                   "--set", "image.compression=zstd", "-o", str(tmp_path / "ctx"))
    assert done.rc == ExitCode.MISSING_TOOL, done.err
    assert done.err.startswith("--set image.compression: image.compression: zstd layers "
                               "cannot be built here: the classic builder"), done.err
    assert "Traceback" not in done.err and not (tmp_path / "ctx").exists()


def test_dry_run_and_explain_state_what_nodes_need(tmp_path: Path) -> None:
    plan = run_cli("build", str(PROFILE), "--dry-run", "-q",
                   env={"DOCKER_HOST": "tcp://127.0.0.1:9"})
    assert plan.rc == 0, plan.err
    assert ("layers: zstd layers; nodes need containerd >= 1.5 or Docker Engine >= 23 "
            "(Docker 20.10's image store cannot pull zstd layers)") in plan.out.splitlines()
    explained = run_cli("explain", str(PROFILE), "--set", "image.compression=gzip")
    assert explained.rc == 0, explained.err
    assert "  layers: gzip (image.compression)" in explained.out.splitlines()
    assert "      nodes need: any container engine" in explained.out.splitlines()
