"""Every shipped profile renders, parses with BuildKit's parser and passes hadolint."""

from __future__ import annotations

import filecmp
import re
from pathlib import Path

import dockerfile
import pytest

from dockergen.api import resolve_profile
from dockergen.outputs.dockerfile import render_dockerfile
from dockergen.resolve.model import Mode, Resolved
from tests.conftest import EXAMPLES, PROFILES, ROOT, lint, run_cli, shipped_names

NAMES = shipped_names()


def render_profile(path: Path, overrides: tuple[str, ...] = (), mode: Mode = "buildkit",
                   syntax: str | None = None) -> tuple[Resolved, str]:
    """The resolved profile and its Dockerfile text, as `render` writes it."""
    resolved = resolve_profile(path, overrides, mode)
    return resolved, render_dockerfile(resolved, syntax)


STAGES = ["build-base", "flash-attn", "engine", "flashinfer-aot", "jit-toolchain", "runtime"]


def test_required_profiles_are_shipped() -> None:
    assert {"h100-fp8", "a100-bf16", "a100-h100", "l40s-awq", "h100-trtllm-fp8",
            "h100-standalone"} <= set(NAMES)


def test_a_standalone_profile_needs_only_what_it_deploys(tmp_path: Path) -> None:
    """The only example used `extends: base`, which hid that a profile naming the headline
    vLLM release without it failed on the `flash_attn.build: source` default (and had to
    repeat cuda.version and python)."""
    shipped = PROFILES / "h100-standalone.yaml"
    text = shipped.read_text()
    assert "\nextends:" not in text and not text.startswith("extends:")
    assert run_cli("validate", str(shipped)).rc == 0
    (tmp_path / "least.yaml").write_text(
        "name: least\ngpu: {targets: [h100]}\nengine: {name: vllm, version: \"0.33.0\"}\n"
        "serving: {model: /models/m}\nimage: {name: registry.example.com/llm/vllm}\n")
    result = run_cli("render", "-q", "least.yaml", cwd=tmp_path)
    assert result.rc == 0, result.err
    assert "flash-attn" not in [line.split()[-1] for line in result.out.splitlines()
                                if line.startswith("FROM ")]
    page = (ROOT / "docs" / "profiles.md").read_text()
    assert "\n".join(line for line in text.splitlines() if not line.startswith("#")) in page


@pytest.mark.parametrize("mode", ["buildkit", "classic"])
@pytest.mark.parametrize("name", NAMES)
def test_renders_parses_and_lints_clean(name: str, mode: str, hadolint: str) -> None:
    resolved, text = render_profile(PROFILES / f"{name}.yaml", mode=mode)  # type: ignore[arg-type]
    commands = dockerfile.parse_string(text)
    stages = [c.value[-1] for c in commands if c.cmd == "FROM"]
    expected = [s for s in STAGES if (s != "flash-attn" or resolved.flash_attn)
                and (s != "flashinfer-aot" or resolved.flashinfer_aot)
                and (s != "jit-toolchain" or resolved.engine_jit)]
    assert stages == expected
    assert all(c.cmd == c.cmd.upper() for c in commands)
    result = lint(hadolint, text)
    assert result.stdout == "" and result.stderr == "", result.stdout + result.stderr
    assert result.returncode == 0


@pytest.mark.parametrize("name", NAMES)
def test_runtime_stage_is_hardened(name: str) -> None:
    resolved, text = render_profile(PROFILES / f"{name}.yaml")
    commands = dockerfile.parse_string(text)
    runtime = commands[max(i for i, c in enumerate(commands) if c.cmd == "FROM"):]
    by_cmd = {c.cmd: c for c in runtime}
    assert re.fullmatch(r"[1-9]\d*:[1-9]\d*", by_cmd["USER"].value[0])
    assert by_cmd["ENTRYPOINT"].json and by_cmd["CMD"].json
    assert by_cmd["HEALTHCHECK"].json
    assert "EXPOSE" in by_cmd
    env = dict(zip(by_cmd["ENV"].value[::2], by_cmd["ENV"].value[1::2], strict=True))
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == '"compute,utility"'
    labels = by_cmd["LABEL"].value[::2]
    for key in ("org.opencontainers.image.title", "dockergen.profile.name",
                "dockergen.profile.hash", "dockergen.cuda.archs", "dockergen.engine",
                "dockergen.quantization"):
        assert key in labels
    runtime_text = "\n".join(c.original for c in runtime)
    if resolved.engine_jit is None:
        assert "g++" not in runtime_text and "nvcc" not in runtime_text  # no compilers
    else:  # the engine JIT-builds at start-up: g++, and CUDA's compiler off PATH
        path = next(c.value[1] for c in runtime if c.cmd == "ENV" and c.value[0] == "PATH")
        assert "g++" in resolved.runtime.apt and "nvcc" not in path
        assert env["CUDA_HOME"].strip('"').startswith(resolved.engine_jit.target)


@pytest.mark.parametrize("name", NAMES)
def test_home_is_group_0_writable_and_the_cache_mount_points_are_left_to_the_mounts(
        name: str) -> None:
    """OpenShift runs the image as an arbitrary UID with GID 0: HOME (where the engine makes
    its caches) belongs to group 0 with the owner's rights, and torch's inductor cache does
    not need a user name. The cache folders the run configurations mount are not made in the
    image: a tmpfs over an existing folder takes its mode, owned by root, and locked the
    image's own user out (tests/daemon/test_deploy_daemon.py runs that)."""
    from dockergen.parts.engines import engine_for

    resolved, text = render_profile(PROFILES / f"{name}.yaml")
    home, uid = resolved.runtime.home, resolved.runtime.uid
    runtime = dockerfile.parse_string(text)
    runtime = runtime[max(i for i, c in enumerate(runtime) if c.cmd == "FROM"):]
    run = next(c.value[0] for c in runtime if c.cmd == "RUN" and "useradd" in c.value[0])
    steps = [s.strip() for s in run.split("&&")]
    assert steps[-3:-1] == [f"chown -R {uid}:0 {home}", f"chmod -R g=u {home}"]
    assert steps[-1] == "rm -rf " + " ".join(resolved.runtime.build_noise)  # then the noise
    caches = [c.path.replace("{home}", home)
              for c in engine_for(resolved.profile.engine.name).run.caches]
    assert f"{home}/.cache" in caches
    runtime_text = "\n".join(c.original for c in runtime)
    assert not any(f"{path} " in runtime_text or f"{path}\n" in runtime_text
                   for path in caches if path.startswith(home + "/"))
    env = next(c for c in runtime if c.cmd == "ENV" and "HOME" in c.value).value
    env_map = dict(zip(env[::2], env[1::2], strict=True))
    assert env_map["TORCHINDUCTOR_CACHE_DIR"] == '"/tmp/torchinductor"'
    assert env_map["HOME"] == f'"{home}"'


def test_classic_mode_has_no_buildkit_syntax() -> None:
    for name in NAMES:
        _, text = render_profile(PROFILES / f"{name}.yaml", mode="classic")
        assert "--mount" not in text and "# syntax" not in text and "<<" not in text
        _, bk = render_profile(PROFILES / f"{name}.yaml", mode="buildkit")
        assert "--mount=type=cache" in bk


def test_syntax_directive_only_when_asked() -> None:
    _, plain = render_profile(PROFILES / "h100-fp8.yaml")
    assert "# syntax" not in plain
    _, asked = render_profile(PROFILES / "h100-fp8.yaml", syntax="docker/dockerfile:1.10")
    first, second = asked.splitlines()[:2]
    assert first == "# syntax=docker/dockerfile:1.10"
    assert second.startswith("# Generated by dockergen")  # banner after the directive


def test_flash_attn_stage_does_not_depend_on_engine_version() -> None:
    def stage(text: str, name: str) -> str:
        start = text.index(f"AS {name}\n")
        return text[start:text.index("\nFROM ", start)]

    _, old = render_profile(PROFILES / "a100-h100.yaml", ("engine.version=0.30.0",))
    _, new = render_profile(PROFILES / "a100-h100.yaml", ("engine.version=0.24.0",))
    # 0.30.0 and 0.27.1 pin torch 2.13.0, 0.24.0 torch 2.11.0: only a bump within one torch
    # pin is cached
    _, same_torch = render_profile(PROFILES / "a100-h100.yaml", ("engine.version=0.27.1",))
    assert stage(old, "flash-attn") == stage(same_torch, "flash-attn")
    assert stage(old, "build-base") == stage(same_torch, "build-base")
    assert stage(old, "engine") != stage(same_torch, "engine")
    assert stage(new, "build-base") != stage(old, "build-base")  # torch changed: rebuild


def test_examples_are_regenerated_by_the_product(tmp_path: Path) -> None:
    """Golden files: `dockergen render --all -o examples` must reproduce examples/."""
    result = run_cli("render", "--all", "-q", "-o", str(tmp_path))
    assert result.rc == 0, result.err
    schema = run_cli("schema", "-o", str(tmp_path / "profile.schema.json"))
    assert schema.rc == 0, schema.err
    # examples/<output kind>/ trees come from other commands, each with its own drift test
    # (deploy: tests/unit/outputs/test_deploy.py, observe:
    # tests/unit/outputs/test_observe.py::test_examples_are_current)
    other_outputs = ["deploy", "observe"]
    cmp = filecmp.dircmp(EXAMPLES, tmp_path, ignore=[*filecmp.DEFAULT_IGNORES, *other_outputs])
    stale = []

    def walk(c: filecmp.dircmp[str], prefix: str) -> None:
        stale.extend(prefix + n for n in c.left_only + c.right_only + c.diff_files)
        _, mismatch, errors = filecmp.cmpfiles(c.left, c.right, c.common_files, shallow=False)
        stale.extend(prefix + n for n in mismatch + errors)
        for name, sub in c.subdirs.items():
            walk(sub, prefix + name + "/")

    walk(cmp, "")
    assert not stale, f"examples/ drifted; run `dockergen render --all -o examples`: {stale}"


def test_every_ignored_hadolint_rule_has_a_reason() -> None:
    lines = (ROOT / ".hadolint.yaml").read_text().splitlines()
    ignored = [i for i, line in enumerate(lines) if re.match(r"\s*- (DL|SC)\d{4}\s*$", line)]
    assert ignored, "expected the ignored list to be present"
    for i in ignored:
        assert lines[i - 1].strip().startswith("#"), f"no reason above {lines[i]!r}"
