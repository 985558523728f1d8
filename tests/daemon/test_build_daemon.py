"""`dockergen build` against a real engine, real BuildKit and real registries.

Needs what tests/infra/provision.sh sets up (dockerd, registries on 127.0.0.1:5000 and
:5001 with htpasswd, local/debian:bookworm). Skips only where no engine can run; in CI
(DOCKERGEN_REQUIRE_ALL=1) a skip fails the run. The shipped templates are built with the
stand-ins of tests/support/standin.py; everything else is real.
"""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, Run, run_cli
from tests.support.registries import ANON, AUTH, PASSWORD, USER
from tests.support.standin import IndexServer, build_index

pytestmark = [pytest.mark.daemon, pytest.mark.usefixtures("registries")]

PROFILE = ROOT / "tests" / "profiles" / "standin.yaml"


@pytest.fixture(scope="session")
def forked_index(docker_client, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """An index whose flash-attn build only knows 80;90 (a patched mirror copy)."""
    root = tmp_path_factory.mktemp("forked-index")
    build_index(root, fa_archs=("80", "90"))
    server = IndexServer(root)
    yield server.url
    server.close()


def _docker_config(tmp: Path, password: str | None) -> dict[str, str]:
    """A DOCKER_CONFIG folder holding credentials for the authenticated registry."""
    folder = tmp / f"docker-config-{password or 'none'}"
    folder.mkdir(exist_ok=True)
    auths = {}
    if password is not None:
        token = base64.b64encode(f"{USER}:{password}".encode()).decode()
        auths = {AUTH: {"auth": token}}
    (folder / "config.json").write_text(json.dumps({"auths": auths}))
    return {"DOCKER_CONFIG": str(folder)}


def _build(index_url: str, *args: str, env: dict[str, str] | None = None,
           cwd: Path | None = None) -> Run:
    return run_cli("build", str(PROFILE), "--network", "host", "-q",
                   "--set", f"build.pip_index_url={index_url}/simple",
                   "--set", f"build.torch_index_url={index_url}", *args, env=env, cwd=cwd)


def _registry_tags(registry: str, repo: str, auth: tuple[str, str] | None = None) -> list[str]:
    request = urllib.request.Request(f"http://{registry}/v2/{repo}/tags/list")
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return list(json.loads(resp.read()).get("tags") or [])
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return []
        raise


def _our_containers(docker_client) -> list[str]:  # type: ignore[no-untyped-def]
    return [c.name for c in docker_client.containers.list(
        all=True, filters={"label": "dockergen.run-id"})]


def test_build_smoke_push_to_both_registries_and_pull_back(
        index: str, docker_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    auth_ref = f"{AUTH}/dockergen-test/standin:pushed"
    ctx = tmp_path / "ctx"
    # --no-cache: the progress events checked below are the steps' own, which a build of the
    # same profile earlier in the session (the deploy tests) would leave as CACHED
    result = _build(index, "--push", "--no-cache", "--tag", auth_ref, "-o", str(ctx),
                    "--progress", "json", env=_docker_config(tmp_path, PASSWORD))
    assert result.rc == 0, result.err[-3000:]
    assert PASSWORD not in result.err + result.out

    pushed = dict(line.split("@", 1) for line in result.out.split())
    assert len(pushed) == 3 and auth_ref in pushed
    assert f"{ANON}/dockergen-test/standin:0.30.0-cu130-standin" in pushed
    assert any(ref.startswith(f"{ANON}/dockergen-test/standin:dg-") for ref in pushed)
    assert len(set(pushed.values())) == 1  # one image, one digest everywhere

    events = [json.loads(line) for line in result.err.splitlines() if line.startswith("{")]
    assert any(e["event"] == "done" and e.get("stage") == "flash-attn" for e in events)
    assert any("arch audit: ok: sm_80, sm_90" in e.get("log", "") for e in events)

    record = json.loads((ctx / "build-record.json").read_text())
    assert record["status"] == "pushed" and record["pushed"] == pushed
    assert record["image_id"].startswith("sha256:")
    assert record["steps_by_stage"]["flash-attn"] == 3
    assert set(record["stage_seconds"]) <= {"build-base", "flash-attn", "engine", "runtime"}
    assert record["smoke"] and all(check["ok"] for check in record["smoke"])
    # vLLM's Triton builds a C launcher at run time: the image proves it can
    names = [check["name"] for check in record["smoke"]]
    assert "a C extension compiles and imports (what Triton does at its first kernel)" in names
    assert "no compilers in the runtime image" not in names
    # ... and nothing but that C compiler: g++, clang and nvcc stay out
    assert "no compiler but the C compiler in the runtime image" in names
    assert (ctx / "build.log").stat().st_size > 0

    # pull both back (the authenticated one with credentials) and compare digests
    digest = next(iter(pushed.values()))
    for ref, auth in ((f"{ANON}/dockergen-test/standin:0.30.0-cu130-standin", None),
                      (auth_ref, {"username": USER, "password": PASSWORD})):
        docker_client.api.remove_image(ref, force=True)
        repo, tag = ref.rsplit(":", 1)
        docker_client.api.pull(repo, tag=tag, auth_config=auth)
        repo_digests = docker_client.api.inspect_image(ref)["RepoDigests"]
        assert f"{repo}@{digest}" in repo_digests
    assert _our_containers(docker_client) == []


def test_arch_audit_fails_the_build_when_an_arch_is_missing(
        forked_index: str, tmp_path: Path) -> None:
    result = _build(forked_index, "--set", "gpu.targets=[h100, b200]", "--progress", "plain",
                    "-o", str(tmp_path / "ctx"))
    assert result.rc == 5, result.err[-2000:]
    lines = [line for line in result.err.splitlines() if not line.startswith("#")]
    assert "[flash-attn 3/3] RUN /opt/venv/bin/python /opt/dockergen/arch_audit.py" in lines[0]
    assert lines[0].startswith("Dockerfile:")
    line_no = int(lines[0].split(":")[1])
    dockerfile = (tmp_path / "ctx" / "Dockerfile").read_text().splitlines()
    assert "arch_audit.py" in dockerfile[line_no - 1]
    assert ("arch audit: FAILED: no code for sm_100 (found sm_90)" in result.err)
    assert "Traceback" not in result.err


def test_failing_run_step_names_step_line_and_log_tail(index: str, docker_client,
                                                       tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # vLLM 0.24.0 pins torch 2.11.0, which the stand-in index does not carry
    ref = f"{ANON}/dockergen-test/standin:should-not-exist"
    result = _build(index, "--set", "engine.version=0.24.0", "--tag", ref, "--progress",
                    "plain", "-o", str(tmp_path / "ctx"))
    assert result.rc == 5
    first = next(line for line in result.err.splitlines() if line.startswith("Dockerfile:"))
    assert "[build-base 5/5] RUN" in first and "torch==2.11.0" in first
    assert "--- last" in result.err and "torch" in result.err.split("--- last", 1)[1]
    assert "Traceback" not in result.err
    with pytest.raises(Exception, match="No such image"):
        docker_client.api.inspect_image(ref)  # no tag of ours left behind
    assert _our_containers(docker_client) == []
    record = json.loads((tmp_path / "ctx" / "build-record.json").read_text())
    assert record["status"] == "failed"


def test_classic_builder_renders_classic_and_builds(index: str, tmp_path: Path) -> None:
    # the classic builder writes gzip layers only: the profile has to say so
    result = _build(index, "--builder", "classic", "--progress", "plain", "-o",
                    str(tmp_path / "ctx"), "--tag", "dockergen-test/classic:1",
                    "--set", "image.compression=gzip")
    assert result.rc == 0, result.err[-3000:]
    dockerfile = (tmp_path / "ctx" / "Dockerfile").read_text()
    assert "--mount" not in dockerfile and "Build mode: classic" in dockerfile
    assert "Step 1/" in result.err  # the classic builder's own progress
    record = json.loads((tmp_path / "ctx" / "build-record.json").read_text())
    assert record["builder"] == "classic" and all(c["ok"] for c in record["smoke"])


def test_smoke_failure_blocks_the_push(index: str, tmp_path: Path) -> None:
    repo = "dockergen-test/smokefail"
    result = _build(index, "--push", "--set", f"image.name={ANON}/{repo}",
                    "--set", "smoke.commands=[{name: must fail, command: [sh, -c, exit 3]}]",
                    "-o", str(tmp_path / "ctx"))
    assert result.rc == 6, result.err[-2000:]
    assert "smoke FAILED must fail: exit code 3, expected 0" in result.err
    assert "nothing was pushed" in result.err
    assert result.out == ""
    assert _registry_tags(ANON, repo) == []
    record = json.loads((tmp_path / "ctx" / "build-record.json").read_text())
    assert record["status"] == "smoke-failed" and "pushed" not in record


def test_private_base_image_needs_credentials(index: str, docker_client,
                                              tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    private = f"{AUTH}/private/standin-runtime:bookworm"
    docker_client.api.tag("local/standin-runtime:bookworm", *private.rsplit(":", 1))
    for _ in docker_client.api.push(private.rsplit(":", 1)[0], tag="bookworm", stream=True,
                                    auth_config={"username": USER, "password": PASSWORD}):
        pass
    docker_client.api.remove_image(private)
    without = _build(index, "--set", f"cuda.runtime_image={private}", "--no-smoke",
                     "-o", str(tmp_path / "a"), env=_docker_config(tmp_path, None))
    assert without.rc == 5
    assert f"cannot pull base image {private}" in without.err
    assert f"log in first: docker login {AUTH}" in without.err
    with_creds = _build(index, "--set", f"cuda.runtime_image={private}", "--no-smoke",
                        "-o", str(tmp_path / "b"), env=_docker_config(tmp_path, PASSWORD))
    assert with_creds.rc == 0, with_creds.err[-2000:]
    assert PASSWORD not in with_creds.err + with_creds.out


def test_push_to_a_closed_port_fails_cleanly(index: str, tmp_path: Path) -> None:
    result = _build(index, "--push", "--tag", "localhost:5999/dockergen-test/x:1", "-o",
                    str(tmp_path / "ctx"))
    assert result.rc == 7, result.err[-2000:]
    assert "cannot push localhost:5999/dockergen-test/x:1" in result.err
    assert "retrying (1/3)" in result.err and "Traceback" not in result.err
    record = json.loads((tmp_path / "ctx" / "build-record.json").read_text())
    assert record["status"] == "push-failed"


def test_wrong_registry_credentials(index: str, tmp_path: Path) -> None:
    wrong = "not-the-password"
    result = _build(index, "--push", "--set", f"image.name={AUTH}/dockergen-test/wrongcreds",
                    "-o", str(tmp_path / "ctx"), env=_docker_config(tmp_path, wrong))
    assert result.rc == 7, result.err[-2000:]
    assert f"log in first: docker login {AUTH}" in result.err
    assert wrong not in result.err + result.out
    assert "retrying" not in result.err  # authentication errors are not retried


def test_engine_unreachable() -> None:
    result = run_cli("build", str(PROFILE), env={"DOCKER_HOST": "tcp://127.0.0.1:9"})
    assert result.rc == 3
    assert result.err.startswith("cannot reach the Docker engine")
    assert "start dockerd or set DOCKER_HOST" in result.err and "Traceback" not in result.err


def test_timeout_cancels_and_cleans_up(index: str, docker_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ref = f"{ANON}/dockergen-test/standin:timeout"
    result = _build(index, "--no-cache", "--timeout", "1", "--tag", ref, "-o",
                    str(tmp_path / "ctx"))
    assert result.rc == 124, result.err[-2000:]
    assert "ran past --timeout 1s and was cancelled" in result.err
    with pytest.raises(Exception, match="No such image"):
        docker_client.api.inspect_image(ref)
    assert _our_containers(docker_client) == []


def test_ctrl_c_cancels_and_cleans_up(index: str, docker_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ref = f"{ANON}/dockergen-test/standin:interrupted"
    proc = subprocess.Popen(
        [sys.executable, "-m", "dockergen", "build", str(PROFILE), "--network", "host", "-q",
         "--set", f"build.pip_index_url={index}/simple", "--set",
         f"build.torch_index_url={index}", "--no-cache", "--tag", ref, "--progress", "json",
         "-o", str(tmp_path / "ctx")], cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    deadline = time.monotonic() + 120
    for line in proc.stderr:  # wait until a step is really running, then press Ctrl-C
        if '"event": "running"' in line and "build-base" in line:
            break
        assert time.monotonic() < deadline
    proc.send_signal(signal.SIGINT)
    rest = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 130, rest[-2000:]
    assert "interrupted" in rest and "Traceback" not in rest
    with pytest.raises(Exception, match="No such image"):
        docker_client.api.inspect_image(ref)
    assert _our_containers(docker_client) == []


def test_dry_run_needs_no_engine() -> None:
    result = run_cli("build", str(PROFILE), "--dry-run", "-q",
                     env={"DOCKER_HOST": "tcp://127.0.0.1:9"})
    assert result.rc == 0, result.err
    assert "local/standin-devel:bookworm" in result.out
    assert "localhost:5000/dockergen-test/standin:0.30.0-cu130-standin" in result.out


def test_secret_build_args_are_refused() -> None:
    result = run_cli("build", str(PROFILE), "--dry-run", "--build-arg", "HF_TOKEN=hf_x",
                     env={"DOCKER_HOST": "tcp://127.0.0.1:9"})
    assert result.rc == 64
    assert "--build-arg 'HF_TOKEN': looks like a secret" in result.err
    assert "hf_x" not in result.err


def test_tensorrt_llm_path_builds_and_passes_smoke(index: str, docker_client,
                                                   tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ctx = tmp_path / "ctx"
    result = run_cli("build", str(ROOT / "tests" / "profiles" / "standin-trtllm.yaml"),
                     "--network", "host", "-q", "--progress", "plain", "-o", str(ctx),
                     "--set", f"build.pip_index_url={index}/simple",
                     "--set", f"build.torch_index_url={index}",
                     "--set", f"build.engine_index_url={index}/simple")
    assert result.rc == 0, result.err[-3000:]
    record = json.loads((ctx / "build-record.json").read_text())
    assert all(check["ok"] for check in record["smoke"]), record["smoke"]
    assert "flash-attn" not in record["steps_by_stage"]
    image = docker_client.api.inspect_image(record["image_id"])
    assert image["Config"]["Entrypoint"] == ["trtllm-serve"]
    assert "--extra_llm_api_options" in image["Config"]["Cmd"]


def test_server_check_sees_health_and_one_token(index: str, docker_client,  # type: ignore[no-untyped-def]
                                                 tmp_path: Path) -> None:
    """The --gpus server check, run here against the stand-in server (no GPU needed)."""
    from dockergen.build.daemon.docker import DockerDaemon

    result = _build(index, "-o", str(tmp_path / "ctx"), "--no-smoke")
    assert result.rc == 0, result.err[-2000:]
    image = result.out.strip()
    daemon = DockerDaemon()
    ok, detail = daemon.serve_check(image, 8000, "/models/none", timeout=60, run_id="t")
    assert ok, detail
    bad, why = daemon.serve_check(image, 8000, "wrong-model", timeout=60, run_id="t")
    assert not bad and "/v1/completions failed" in why
    # the check fails where the real server would not start: a flag the release lacks (the
    # stand-in parses with vLLM 0.30.0's real flag list), and no C compiler for Triton
    client = docker_client
    cmd = client.api.inspect_image(image)["Config"]["Cmd"]
    for change, cause in ((f"CMD {json.dumps([*cmd, '--swap-space', '4'])}",
                           "unrecognized arguments: --swap-space 4"),
                          ("ENV PATH=/opt/venv/bin", "Failed to find C compiler")):
        holder = client.containers.create(image)
        broken = holder.commit(changes=[change])
        holder.remove()
        try:
            bad, why = daemon.serve_check(broken.id, 8000, "/models/none", timeout=60,
                                          run_id="t")
        finally:
            client.images.remove(broken.id, force=True)
        assert not bad and why.startswith("the server exited: ") and cause in why, why
    client.close()
