"""Bad build options are refused before anything runs: no render written, no build, no pull."""

from __future__ import annotations

from pathlib import Path

import pytest

from dockergen.build.options import BuildOptions
from dockergen.build.orchestrate import build_profile
from dockergen.errors import ExitCode, UsageError
from tests.conftest import ROOT, run_cli
from tests.support.fake_daemon import FakeDaemon

PROFILE = ROOT / "tests" / "profiles" / "standin.yaml"


class _NoBuild(FakeDaemon):
    def build(self, *args: object, **kwargs: object):  # type: ignore[no-untyped-def, override]
        raise AssertionError("nothing may be built")


@pytest.mark.parametrize("tag", ["BAD TAG", "repo:", "upper/Case:1", "my_registry:5000/x",
                                 "repo:-x", "a:" + "x" * 129])
def test_bad_tag_is_refused_before_the_build(tag: str, tmp_path: Path) -> None:
    """Before the fix: `--tag 'BAD TAG'` built the whole image, then died with a traceback."""
    with pytest.raises(UsageError, match="not a valid image reference") as exc:
        build_profile(PROFILE, (), BuildOptions(tags=(tag,)), output=tmp_path / "ctx",
                      echo=lambda _: None, out=lambda _: None, daemon=_NoBuild())
    assert exc.value.exit_code == ExitCode.USAGE
    assert not (tmp_path / "ctx").exists()


def test_unknown_target_is_refused_before_the_build(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as exc:
        build_profile(PROFILE, (), BuildOptions(stage="nosuchstage"), output=tmp_path / "ctx",
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


@pytest.mark.parametrize(("option", "message"), [
    (("--platform", "linux/amd64;rm -rf /"),
     "--platform 'linux/amd64;rm -rf /': not a platform; write OS/ARCH[/VARIANT] in lowercase, "
     "e.g. linux/amd64 or linux/arm64/v8"),
    (("--platform", "linux"), "--platform 'linux': not a platform"),
    (("--platform", "Linux/AMD64"), "--platform 'Linux/AMD64': not a platform"),
    (("--platform", "linux/arm64/v8/x"), "--platform 'linux/arm64/v8/x': not a platform"),
    (("--platform", "linux/amd64\nx"), "--platform 'linux/amd64\\nx': not a platform"),
    (("--build-arg", "FOO=a\nb"), "--build-arg FOO: the value 'a\\nb' holds a control character "
                                  "(a newline or tab); give it on one line"),
    (("--build-arg", "HTTP_PROXY=a\tb"), "--build-arg HTTP_PROXY: the value 'a\\tb' holds a "
                                         "control character"),
    (("--build-arg", "FOO=1"), "--build-arg FOO: the rendered Dockerfile declares no ARG FOO, "
                               "so it would change nothing but the tag; remove it (declared: "
                               "DEBIAN_FRONTEND, SOURCE_DATE_EPOCH; Docker also takes HTTP_PROXY"),
    (("--build-arg", "A B=1"), "--build-arg 'A B': not an ARG name; write NAME=VALUE"),
    (("--build-arg", "X\nRUN=1"), "--build-arg 'X\\nRUN': not an ARG name"),
], ids=["platform-injection", "platform-no-arch", "platform-case", "platform-too-long",
        "platform-newline", "arg-newline", "arg-tab", "arg-undeclared", "arg-name-space",
        "arg-name-newline"])
def test_platform_and_build_args_are_checked_in_dry_run(option: tuple[str, str],
                                                        message: str) -> None:
    """--dry-run accepted these and printed the newline raw; an undeclared build arg changed
    only the immutable tag."""
    result = run_cli("build", str(PROFILE), "--dry-run", "-q", *option)
    assert result.rc == 64, result.out + result.err
    assert message in result.err and "Traceback" not in result.err
    assert result.out == ""


@pytest.mark.parametrize("options", [BuildOptions(platform="linux/amd64;rm -rf /"),
                                     BuildOptions(build_args={"FOO": "1"}),
                                     BuildOptions(build_args={"FOO": "a\nb"})])
def test_platform_and_build_args_are_checked_before_the_build(options: BuildOptions,
                                                              tmp_path: Path) -> None:
    with pytest.raises(UsageError) as exc:
        build_profile(PROFILE, (), options, output=tmp_path / "ctx", echo=lambda _: None,
                      out=lambda _: None, daemon=_NoBuild())
    assert exc.value.exit_code == ExitCode.USAGE
    assert not (tmp_path / "ctx").exists()


def test_good_platforms_and_declared_build_args_pass() -> None:
    for option in (("--platform", "linux/amd64"),
                   # arm64's one variant, as containerd writes it: the profile's linux/arm64
                   ("--platform", "linux/arm64/v8", "--set", "build.platform=linux/arm64"),
                   ("--build-arg", "DEBIAN_FRONTEND=noninteractive"),
                   ("--build-arg", "HTTPS_PROXY=http://proxy.example.com:3128"),
                   ("--build-arg", "no_proxy=localhost,127.0.0.1")):
        result = run_cli("build", str(PROFILE), "--dry-run", "-q", *option)
        assert result.rc == 0, (option, result.err)


@pytest.mark.parametrize(("platforms", "message"), [
    ("linux/amd64,linux/amd64", "a platform is named twice; name each once"),
    ("linux/amd64,windows/amd64", "'windows/amd64': an image index is built only for "
                                  "linux/amd64, linux/arm64"),
    ("linux/amd64,", "'' is not a platform"),
])
def test_platform_lists_are_checked_in_dry_run(platforms: str, message: str) -> None:
    result = run_cli("build", str(PROFILE), "--dry-run", "-q", "--platform", platforms)
    assert result.rc == 64, result.out + result.err
    assert message in result.err and "Traceback" not in result.err
    assert result.out == ""


def test_a_platform_list_passes_the_dry_run() -> None:
    result = run_cli("build", str(PROFILE), "--dry-run", "-q", "--platform",
                     "linux/amd64,linux/arm64")
    assert result.rc == 0, result.err
