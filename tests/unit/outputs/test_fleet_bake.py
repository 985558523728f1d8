"""The generated docker-bake.hcl, read back by the real `docker buildx bake --print`.

Every field buildx prints is compared with what dockergen resolved for that profile (the
resolve API, and the rendered Dockerfile's own LABEL instruction), not with the bake
writer's own data. Also: checkov's Dockerfile checks on every rendered example.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import dockerfile
import pytest

from dockergen.api import resolve_profile, shipped_renderable
from dockergen.files.owned import MANIFEST
from dockergen.knowledge import layers
from dockergen.resolve.buildid import content_tag, engine_platform
from tests.conftest import EXAMPLES, PROFILES, lint, run_cli

# The shipped matrix, written out by hand: variant -> the --set values of its point.
FLEET = {
    "fleet-a100-bf16": ("gpu.targets=[a100]", "quantization.weights=bf16"),
    "fleet-h100-bf16": ("gpu.targets=[h100]", "quantization.weights=bf16"),
    "fleet-h100-fp8": ("gpu.targets=[h100]", "quantization.weights=fp8"),
    "fleet-l40s-bf16": ("gpu.targets=[l40s]", "quantization.weights=bf16"),
    "fleet-l40s-fp8": ("gpu.targets=[l40s]", "quantization.weights=fp8"),
}


def _buildx() -> list[str]:
    if shutil.which("docker") is None:
        pytest.fail("the docker CLI with the buildx plugin is missing: run "
                    "tests/infra/provision.sh")
    probe = subprocess.run(["docker", "buildx", "version"], capture_output=True, text=True,
                           check=False)
    assert probe.returncode == 0, "docker buildx is missing: run tests/infra/provision.sh"
    return ["docker", "buildx", "bake"]


def bake_print(folder: Path, *args: str) -> dict:  # type: ignore[type-arg]
    """`docker buildx bake --print` run in ``folder`` (buildx resolves contexts from the cwd)."""
    proc = subprocess.run([*_buildx(), "--print", *args], cwd=folder, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def _attrs(text: str) -> dict[str, str]:
    """``type=registry,ref=R,mode=max`` as buildx 0.29's --print shows it: an object."""
    return dict(part.split("=", 1) for part in text.split(","))


def _expected(name: str, dockerfile_text: str,
              context: dict[str, bytes]) -> dict:  # type: ignore[type-arg]
    """What the target must be, from dockergen's resolver and the rendered context."""
    if name in FLEET:
        resolved = resolve_profile(PROFILES / "fleet.yaml",
                                   ("matrix=null", f"name={name}", *FLEET[name]))
    else:
        resolved = resolve_profile(PROFILES / f"{name}.yaml")
    p = resolved.profile
    label_cmd = [c for c in dockerfile.parse_string(dockerfile_text) if c.cmd == "LABEL"][-1]
    in_dockerfile = {k: json.loads(v) for k, v in zip(label_cmd.value[::2],
                                                      label_cmd.value[1::2], strict=True)}
    keys = ["dockergen.engine", "dockergen.profile.hash", "dockergen.profile.name",
            "org.opencontainers.image.title", "org.opencontainers.image.version"]
    if p.description:
        keys.append("org.opencontainers.image.description")
    cache = f"{p.image.name}:buildcache-{name}"
    return {
        "context": name,
        "dockerfile": "Dockerfile",
        "target": "runtime",
        "platforms": [p.build.platform],  # the profile's machine (gh200-vllm: linux/arm64)
        # the release tags, then the content-hash tag of the context (dockergen/resolve/buildid.py),
        # which covers the platform the engine is asked for
        "tags": [*(f"{p.image.name}:{t}" for t in resolved.tags),
                 f"{p.image.name}:" + content_tag(
                     context, mode="buildkit",
                     platform=engine_platform(None, p.build.platform))],
        "labels": {k: in_dockerfile[k] for k in sorted(keys)},
        "cache-from": [_attrs(f"type=registry,ref={cache}")],
        "cache-to": [_attrs(f"type=registry,ref={cache},mode=max")],
        # the image output with the profile's layer compression (dockergen/knowledge/layers.py)
        "output": [_attrs("type=image," + layers.exporter_attrs(p.image.compression))],
    }


def test_every_shipped_target_prints_what_dockergen_resolved(tmp_path: Path) -> None:
    assert run_cli("render", "--all", "-q", "-o", str(tmp_path)).rc == 0
    printed = bake_print(tmp_path)
    plain = [p.stem for p in shipped_renderable() if p.stem != "fleet"]
    names = sorted(plain + list(FLEET))
    assert printed["group"] == {"default": {"targets": names}}
    assert sorted(printed["target"]) == names
    for name in names:
        got = printed["target"][name]
        folder = tmp_path / name
        # the manifest of what dockergen wrote is bookkeeping: .dockerignore keeps it out
        # of every build, so the content tag does not cover it
        context = {str(f.relative_to(folder)): f.read_bytes()
                   for f in sorted(folder.rglob("*")) if f.is_file() and f.name != MANIFEST}
        want = _expected(name, (folder / "Dockerfile").read_text(), context)
        assert got == want, name
        assert got["tags"][-1].split(":")[-1].startswith("dg-")  # the content-hash tag
    fleet = bake_print(tmp_path, "fleet")
    assert fleet["group"]["fleet"] == {"targets": list(FLEET)}
    assert sorted(fleet["target"]) == list(FLEET)


def test_examples_bake_file_prints_every_shipped_target() -> None:
    """examples/docker-bake.hcl (regenerated by CI's drift check) is valid for buildx."""
    printed = bake_print(EXAMPLES)
    assert sorted(printed["target"]) == printed["group"]["default"]["targets"]
    assert set(FLEET) <= set(printed["target"])


def test_single_profile_bake_file_uses_its_own_folder(tmp_path: Path) -> None:
    out = tmp_path / "ctx"
    result = run_cli("render", "-q", str(PROFILES / "h100-fp8.yaml"), "-o", str(out),
                     "--set", "image.attest=[sbom, provenance]",
                     "--set", "image.cache_ref=registry.example.com/cache/{engine.name}:{name}")
    assert result.rc == 0, result.err
    target = bake_print(out)["target"]["h100-fp8"]
    assert target["context"] == "."
    assert target["attest"] == [_attrs("type=provenance,mode=max"), _attrs("type=sbom")]
    assert target["cache-to"] == [
        _attrs("type=registry,ref=registry.example.com/cache/vllm:h100-fp8,mode=max")]
    assert target["output"] == [{"type": "image", "compression": "zstd",
                                 "force-compression": "true", "oci-mediatypes": "true"}]
    assert "docker-bake.hcl" not in (out / ".dockerignore").read_text()  # not sent to builders


def test_label_text_cannot_start_an_hcl_template(tmp_path: Path) -> None:
    tricky = 'costs ${HOME} %{if x} $${y} "q" \\ back é'
    profile = tmp_path / "p.yaml"
    profile.write_text("extends: h100-fp8\nname: tricky\nimage:\n  labels:\n"
                       f"    com.example.note: {json.dumps(tricky)}\n")
    assert run_cli("render", "-q", str(profile), "-o", str(tmp_path / "ctx")).rc == 0
    labels = bake_print(tmp_path / "ctx")["target"]["tricky"]["labels"]
    # buildx (0.29) prints a JSON bake definition, which is interpolated as HCL is when read,
    # so it shows the text escaped again; an interpolated ${HOME} would show the home folder
    assert labels["com.example.note"] == tricky.replace("${", "$${").replace("%{", "%%{")


def test_two_targets_sharing_a_cache_ref_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "shared.yaml").write_text(
        "extends: fleet\nimage:\n  cache_ref: registry.example.com/cache/vllm:shared\n")
    result = run_cli("render", "-q", "shared.yaml", "-o", "out", cwd=tmp_path)
    assert result.rc == 2
    assert result.err.splitlines()[0] == (
        "shared.yaml:3:14: image.cache_ref: fleet-a100-bf16 and fleet-h100-bf16 share the "
        "cache ref registry.example.com/cache/vllm:shared: each mode=max export replaces the "
        "ref, so they would bust each other's cache; put {name} in image.cache_ref")
    assert not (tmp_path / "out").exists()
    (tmp_path / "shared.yaml").write_text(
        "extends: h100-fp8\nimage:\n  cache_ref: registry.example.com/llm/vllm:{nme}\n")
    result = run_cli("render", "-q", "shared.yaml", "-o", "out", cwd=tmp_path)
    assert result.rc == 2
    assert result.err.splitlines()[0].startswith(
        "shared.yaml:3:14: image.cache_ref: unknown placeholder {nme}; use one of: ")


def test_render_all_keeps_a_foreign_bake_file(tmp_path: Path) -> None:
    (tmp_path / "docker-bake.hcl").write_text('target "mine" {}\n')
    result = run_cli("render", "--all", "-q", "-o", str(tmp_path))
    assert result.rc == 4
    assert result.err.strip() == (f"{tmp_path / 'docker-bake.hcl'}: exists and was not "
                                  "written by dockergen; move it away or choose another -o "
                                  "folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docker-bake.hcl"]


@pytest.fixture(scope="module")
def checkov() -> str:
    found = shutil.which("checkov", path=str(Path(os.sys.executable).parent))
    if not found:
        pytest.fail("checkov is not installed: pip install -e '.[test]'")
    return found


def _checkov_failed(checkov: str, folder: Path) -> list[tuple[str, str]]:
    proc = subprocess.run([checkov, "--framework", "dockerfile", "-d", str(folder), "--quiet",
                           "--compact", "-o", "json"], capture_output=True, text=True,
                          env={**os.environ, "BC_SKIP_MAPPING": "TRUE"}, check=False)
    data = json.loads(proc.stdout)
    reports = data if isinstance(data, list) else [data]
    return sorted((c["check_id"], c["file_path"]) for r in reports
                  for c in r["results"]["failed_checks"])


def test_checkov_finds_nothing_in_the_rendered_examples(checkov: str, tmp_path: Path) -> None:
    assert _checkov_failed(checkov, EXAMPLES) == []
    # the check is live: the previous ARG-interpolated FROM line is what it flagged
    (tmp_path / "Dockerfile").write_text(
        "ARG BUILD_IMAGE=nvidia/cuda:13.0.2-devel-ubuntu22.04\nFROM ${BUILD_IMAGE} AS b\n"
        "USER 1000\nHEALTHCHECK CMD [\"true\"]\n")
    assert _checkov_failed(checkov, tmp_path) == [("CKV_DOCKER_7", "/Dockerfile")]


def test_checkov_accepts_digest_pinned_from_lines(checkov: str, tmp_path: Path) -> None:
    digest = "sha256:" + "ab" * 32
    (tmp_path / "Dockerfile").write_text(
        f"FROM nvidia/cuda:13.0.2-devel-ubuntu22.04@{digest} AS b\nUSER 1000\n"
        "HEALTHCHECK CMD [\"true\"]\n")
    assert _checkov_failed(checkov, tmp_path) == []


def test_matrix_variants_parse_and_lint_clean(hadolint: str) -> None:
    """The shipped matrix's variants get the hadolint/BuildKit checks the other profiles get."""

    for name in FLEET:
        text = (EXAMPLES / name / "Dockerfile").read_text()
        stages = [c.value[-1] for c in dockerfile.parse_string(text) if c.cmd == "FROM"]
        # base.yaml builds no flash-attn (vLLM 0.33.0's torch 2.14 headers reject every
        # released flash-attn's C++17; a100-h100 is the shipped profile that builds it), and
        # vLLM 0.33.0's start-up sampler kernels ahead of time
        assert stages == ["build-base", "engine", "flashinfer-aot", "runtime"]
        result = lint(hadolint, text)
        assert (result.returncode, result.stdout, result.stderr) == (0, "", ""), name


def test_validate_runs_the_bake_checks_render_runs(tmp_path: Path) -> None:
    """validate said ok, then render -o refused the cache ref; and matrix variants could
    share a fixed tag with nothing catching it (the last push took it)."""
    base = "extends: base\nname: t\nserving: {model: /models/m}\n"
    cases = {
        "cache-is-tag": (base + "gpu: {targets: [h100]}\n"
                         "image: {cache_ref: 'registry.example.com/llm/vllm:0.33.0-cu130-t'}\n",
                         "is also an image tag of t"),
        "placeholder": (base + "gpu: {targets: [h100]}\nimage: {cache_ref: 'reg.io/x:{bogus}'}\n",
                        "unknown placeholder {bogus}"),
        "shared-tag": (base + "matrix: {axes: {gpu.targets: {h100: [h100], h: [h100]}}}\n"
                       "image: {tags: [fixed]}\n", "t-h and t-h100 share the tag "
                       "registry.example.com/llm/vllm:fixed"),
    }
    for name, (text, message) in cases.items():
        (tmp_path / f"{name}.yaml").write_text(text)
        for command in (("validate",), ("render", "-o", str(tmp_path / f"out-{name}"))):
            result = run_cli(*command, f"{name}.yaml", cwd=tmp_path)
            assert result.rc == 2 and message in result.err, (name, command, result.err)
        assert not (tmp_path / f"out-{name}").exists()
    fixed = base + ("matrix: {axes: {gpu.targets: {h100: [h100], h: [h100]}}}\n"
                    "image: {tags: ['fixed-{name}']}\n")
    (tmp_path / "fixed.yaml").write_text(fixed)
    assert run_cli("validate", "fixed.yaml", cwd=tmp_path).rc == 0  # the fix it names


def test_bake_file_for_two_platforms_builds_one_index_per_target(tmp_path: Path) -> None:
    """`render --platform linux/amd64,linux/arm64`: buildx reads both platforms for every
    target (one image index each); without it, linux/amd64 alone."""
    out = tmp_path / "ctx"
    result = run_cli("render", "-q", str(PROFILES / "h100-fp8.yaml"), "-o", str(out),
                     "--platform", "linux/amd64,linux/arm64")
    assert result.rc == 0, result.err
    assert bake_print(out)["target"]["h100-fp8"]["platforms"] == ["linux/amd64", "linux/arm64"]
    assert run_cli("render", "-q", str(PROFILES / "h100-fp8.yaml"), "-o", str(out)).rc == 0
    assert bake_print(out)["target"]["h100-fp8"]["platforms"] == ["linux/amd64"]
    refused = run_cli("render", "-q", str(PROFILES / "h100-fp8.yaml"), "-o", str(out),
                      "--platform", "linux/amd64,linux/s390x")
    assert refused.rc == 64 and "linux/s390x" in refused.err and "Traceback" not in refused.err
