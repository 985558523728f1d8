"""`build --platform` and the profile's `build.platform`: one machine's facts judge a build.

The profile's platform is the machine its facts and checks were read for; a build for
another machine without those checks is what the per-platform facts exist to prevent.
"""

from __future__ import annotations

import pytest

from dockergen.build.options import platforms_judged
from dockergen.errors import ProfileError, UsageError
from dockergen.pipeline import resolution
from dockergen.resolve.buildid import engine_platform
from tests.conftest import PROFILES, run_cli

H100 = PROFILES / "h100-fp8.yaml"  # linux/amd64 (the default)
GH200 = PROFILES / "gh200-vllm.yaml"  # linux/arm64


def test_a_single_platform_other_than_the_profiles_is_refused_with_the_field_to_set() -> None:
    with pytest.raises(UsageError) as exc:
        platforms_judged(resolution(H100), "linux/arm64")
    assert "the profile's build.platform is linux/amd64" in str(exc.value)
    assert "--set build.platform=linux/arm64" in str(exc.value)


def test_a_list_is_judged_on_every_platform_before_the_build() -> None:
    """h100-fp8 on arm64: its H100 runs vLLM's aarch64 kernels too, so the index passes;
    l40s-awq with a T4 passes on amd64, but vLLM's aarch64 wheel (no sm_75) refuses the
    arm64 half."""
    assert platforms_judged(resolution(H100), "linux/amd64,linux/arm64") == \
        "linux/amd64,linux/arm64"
    t4 = resolution(PROFILES / "l40s-awq.yaml", ("gpu.targets=[l40s,t4]",))
    with pytest.raises(ProfileError) as exc:
        platforms_judged(t4, "linux/amd64,linux/arm64")
    assert any("cannot run on t4 (7.5) on aarch64" in p.message
               for p in exc.value.problems), exc.value.problems


def test_without_platform_the_engine_is_asked_for_the_profiles_own() -> None:
    assert platforms_judged(resolution(GH200), None) == "linux/arm64"
    assert platforms_judged(resolution(H100), None) is None  # the engine's default
    assert engine_platform("linux/arm64", "linux/amd64") == "linux/arm64"


def test_the_bake_file_builds_a_gh200_profile_for_arm64(tmp_path: object) -> None:
    run = run_cli("render", str(GH200), "-q", "-o", str(tmp_path))
    assert run.rc == 0, run.err
    bake = (tmp_path / "docker-bake.hcl").read_text()  # type: ignore[operator]
    assert 'platforms = ["linux/arm64"]' in bake


def test_an_index_of_a_profile_that_installs_from_its_python_lock_is_refused() -> None:
    """The lock is resolved for one machine's wheels: the arm64 half would install x86_64
    wheels (or fail its hashes an hour in). Refused before anything is built."""
    import dataclasses

    res = resolution(H100)
    engine = dataclasses.replace(res.resolved.engine, lock="/opt/dockergen/python.lock")
    locked = dataclasses.replace(res, resolved=dataclasses.replace(res.resolved, engine=engine))
    with pytest.raises(UsageError) as exc:
        platforms_judged(locked, "linux/amd64,linux/arm64")
    assert "resolved for linux/amd64 only" in str(exc.value)
    assert platforms_judged(locked, None) is None  # one platform: the lock's own


def test_the_fix_for_a_platform_dockergen_does_not_build_is_no_field_value() -> None:
    with pytest.raises(UsageError) as exc:
        platforms_judged(resolution(H100), "linux/riscv64")
    assert "--set build.platform" not in str(exc.value)
    assert "dockergen builds linux/amd64 and linux/arm64 images" in str(exc.value)
    assert platforms_judged(resolution(GH200), "linux/arm64/v8") == "linux/arm64/v8"
