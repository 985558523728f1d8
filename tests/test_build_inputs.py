"""Bad build options are refused before anything runs: no render written, no build, no pull."""

from __future__ import annotations

from pathlib import Path

import pytest

from dockergen.build import BuildOptions, UnsafeInput, build_profile
from dockergen.errors import ExitCode
from tests.conftest import ROOT, run_cli
from tests.fake_daemon import FakeDaemon

PROFILE = ROOT / "tests" / "profiles" / "standin.yaml"


class _NoBuild(FakeDaemon):
    def build(self, *args: object, **kwargs: object):  # type: ignore[no-untyped-def, override]
        raise AssertionError("nothing may be built")


@pytest.mark.parametrize("tag", ["BAD TAG", "repo:", "upper/Case:1", "my_registry:5000/x",
                                 "repo:-x", "a:" + "x" * 129])
def test_bad_tag_is_refused_before_the_build(tag: str, tmp_path: Path) -> None:
    """Issue 7: `--tag 'BAD TAG'` built the whole image, then died with a traceback."""
    with pytest.raises(UnsafeInput, match="not a valid image reference") as exc:
        build_profile(PROFILE, (), BuildOptions(tags=(tag,)), output=tmp_path / "ctx",
                      echo=lambda _: None, out=lambda _: None, daemon=_NoBuild())
    assert exc.value.exit_code == ExitCode.USAGE
    assert not (tmp_path / "ctx").exists()


def test_unknown_target_is_refused_before_the_build(tmp_path: Path) -> None:
    with pytest.raises(UnsafeInput) as exc:
        build_profile(PROFILE, (), BuildOptions(target="nosuchstage"), output=tmp_path / "ctx",
                      echo=lambda _: None, out=lambda _: None, daemon=_NoBuild())
    assert str(exc.value) == ("--target 'nosuchstage': no such stage; the stages are "
                              "build-base, flash-attn, engine, runtime")
    assert not (tmp_path / "ctx").exists()


@pytest.mark.parametrize(("option", "message"), [
    (("--tag", "BAD TAG"), "--tag 'BAD TAG': not a valid image reference"),
    (("--target", "nosuchstage"), "--target 'nosuchstage': no such stage"),
])
def test_dry_run_refuses_them_too(option: tuple[str, str], message: str) -> None:
    result = run_cli("build", str(PROFILE), "--dry-run", "-q", *option)
    assert result.rc == 64
    assert message in result.err and "Traceback" not in result.err
    assert result.out == ""


def test_good_tags_and_targets_pass(tmp_path: Path) -> None:
    result = run_cli("build", str(PROFILE), "--dry-run", "-q", "--tag",
                     "localhost:5000/team/vllm:candidate-1", "--target", "flash-attn")
    assert result.rc == 0, result.err
    assert "  localhost:5000/team/vllm:candidate-1" in result.out.splitlines()
