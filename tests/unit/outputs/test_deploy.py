"""`dockergen deploy`: hardened Compose and Kubernetes, checked by the real tools.

Real checkers: `docker compose config` (Compose v2 plugin), `kubernetes-validate` (bundled
Kubernetes 1.37 schemas) and `checkov --framework kubernetes` (with the repository's
.checkov.yaml). A missing tool fails these tests; it never skips them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import EXAMPLES, PROFILES, ROOT, run_cli, shipped_names
from tests.support.records import DIGEST, write_record

PSS_VOLUME_TYPES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                    "persistentVolumeClaim", "projected", "secret"}


def _deploy(profile: str, fmt: str, *args: str, env: dict[str, str] | None = None) -> Any:
    out = run_cli("deploy", str(PROFILES / f"{profile}.yaml"), "--format", fmt, *args, env=env)
    assert out.rc == 0, out.err
    assert "Traceback" not in out.err
    return out


def _docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def _hash(profile: str) -> str:
    lock = json.loads((EXAMPLES / profile / "dockergen.resolved.json").read_text())
    return str(lock["profile_hash"])


def _record(tmp: Path, profile: str, **fields: Any) -> Path:
    return write_record(tmp, profile, **fields)


def test_compose_hardening(tmp_path: Path) -> None:
    svc = yaml.safe_load(_deploy("a100-bf16", "compose", "--set",
                                 "serving.tensor_parallel_size=4").out)["services"]["a100-bf16"]
    assert svc["user"] == "10001:10001"
    assert svc["read_only"] is True and svc["cap_drop"] == ["ALL"]
    assert svc["security_opt"] == ["no-new-privileges:true"]
    assert svc["shm_size"] == "4gb" and "ipc" not in svc  # 1 GiB + 1 per extra rank
    assert svc["ulimits"] == {"stack": 67108864}  # memlock=-1 is an opt-in
    rdma = yaml.safe_load(_deploy("a100-bf16", "compose", "--opt-in", "memlock-unlimited").out)
    assert rdma["services"]["a100-bf16"]["ulimits"]["memlock"] == {"soft": -1, "hard": -1}
    (device,) = svc["deploy"]["resources"]["reservations"]["devices"]
    assert device == {"driver": "nvidia", "count": 4, "capabilities": ["gpu"]}
    assert svc["ports"] == [{"target": 8000, "published": "8000", "host_ip": "127.0.0.1",
                             "protocol": "tcp"}]
    (model,) = svc["volumes"]
    assert model["read_only"] is True and model["target"] == "/models"
    mounts = {t.split(":")[0] for t in svc["tmpfs"]}
    assert mounts == {"/tmp", "/home/app/.cache", "/home/app/.triton", "/home/app/.config"}
    assert "HF_TOKEN" in svc["environment"]  # by name only
    assert svc["healthcheck"]["test"][-1].endswith("'http://127.0.0.1:8000/health', "
                                                   "timeout=5)")
    uuids = ["GPU-6f2a7c3e-0b1d-4e5f-8a9b-0c1d2e3f4a5b", "GPU-0c1d2e3f-4a5b-4e5f-8a9b-6f2a7c3e0b1d"]
    ids = yaml.safe_load(_deploy("a100-bf16", "compose", "--gpu-ids", ",".join(uuids), "--set",
                                 "serving.tensor_parallel_size=2").out)
    (device,) = ids["services"]["a100-bf16"]["deploy"]["resources"]["reservations"]["devices"]
    assert device["device_ids"] == uuids and "count" not in device
    # one device per tensor-parallel rank: two ids for tensor_parallel_size 1 are refused
    wrong = run_cli("deploy", str(PROFILES / "a100-bf16.yaml"), "--format", "compose",
                    "--gpu-ids", "0,1")
    assert wrong.rc == 2 and "give exactly 1" in wrong.err


def test_a_hub_model_id_mounts_no_model_folder_and_warns() -> None:
    out = _deploy("h100-fp8", "compose", "--set", "serving.model=meta-llama/Meta-Llama-3-8B")
    assert "volumes" not in yaml.safe_load(out.out)["services"]["h100-fp8"]
    assert "is a Hugging Face Hub id" in out.err
    k8s = _docs(_deploy("h100-fp8", "k8s", "--set", "serving.model=org/model").out)
    assert "model" not in {v["name"] for v in k8s[0]["spec"]["template"]["spec"]["volumes"]}


def test_secrets_never_reach_the_output() -> None:
    token = "hf_" + "Q" * 30
    for fmt in ("compose", "k8s"):
        out = _deploy("h100-fp8", fmt, env={"HF_TOKEN": token})
        assert token not in out.out and token not in out.err
    k8s = _docs(_deploy("h100-fp8", "k8s").out)
    env = {e["name"]: e for e in k8s[0]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["HF_TOKEN"] == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {
        "name": "hf-token", "key": "token", "optional": True}}}


def test_opt_ins_are_named_and_warned() -> None:
    out = _deploy("h100-fp8", "compose", "--opt-in", "ipc-host")
    svc = yaml.safe_load(out.out)["services"]["h100-fp8"]
    assert svc["ipc"] == "host" and "shm_size" not in svc
    assert "warning: opt-in ipc-host: shares the host's IPC namespace" in out.err
    k8s = _deploy("h100-fp8", "k8s", "--opt-in", "host-network")
    assert _docs(k8s.out)[0]["spec"]["template"]["spec"]["hostNetwork"] is True
    assert "warning: opt-in host-network" in k8s.err
    for doc in _docs(_deploy("h100-fp8", "k8s").out):  # nothing host-shared by default
        spec = doc["spec"].get("template", {}).get("spec", {})
        assert not {"hostNetwork", "hostIPC", "hostPID"} & set(spec)
    bad = run_cli("deploy", str(PROFILES / "h100-fp8.yaml"), "--format", "k8s",
                  "--opt-in", "privileged")
    assert bad.rc == 64


def test_record_pins_the_digest(tmp_path: Path) -> None:
    out = _deploy("h100-fp8", "k8s", "--record", str(_record(tmp_path, "h100-fp8")))
    image = _docs(out.out)[0]["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"registry.example.com/llm/vllm@{DIGEST}"
    assert "no --record" not in out.err
    unpinned = _deploy("h100-fp8", "compose")
    assert "warning: no --record: image registry.example.com/llm/vllm:dg-" in unpinned.err
    built = _deploy("h100-fp8", "compose", "--record",
                    str(_record(tmp_path, "h100-fp8", status="built", pushed={})))
    assert "no pushed digest" in built.err
    other = run_cli("deploy", str(PROFILES / "a100-bf16.yaml"), "--format", "compose",
                    "--record", str(_record(tmp_path, "h100-fp8")))
    assert other.rc == 2 and "built from another profile" in other.err
    failed = run_cli("deploy", str(PROFILES / "h100-fp8.yaml"), "--format", "compose",
                     "--record", str(_record(tmp_path, "h100-fp8", status="smoke-failed")))
    assert failed.rc == 2 and "passed its smoke tests" in failed.err
    missing = run_cli("deploy", str(PROFILES / "h100-fp8.yaml"), "--format", "compose",
                      "--record", str(tmp_path / "nope.json"))
    assert missing.rc == 2 and "no such build record" in missing.err


def test_kubernetes_restricted_profile_and_gfd_affinity() -> None:
    deployment, service, policy = _docs(_deploy("a100-h100", "k8s").out)
    assert [d["kind"] for d in (deployment, service, policy)] == [
        "Deployment", "Service", "NetworkPolicy"]
    pod = deployment["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    psc, csc = pod["securityContext"], c["securityContext"]
    # Pod Security Standards, restricted (kubernetes.io/docs/concepts/security/
    # pod-security-standards/), rule by rule:
    assert psc["runAsNonRoot"] is True and csc["runAsNonRoot"] is True  # Running as Non-root
    assert psc["runAsUser"] != 0 and csc["runAsUser"] != 0  # Running as Non-root user
    assert csc["allowPrivilegeEscalation"] is False  # Privilege Escalation
    assert csc["capabilities"] == {"drop": ["ALL"]}  # Capabilities: drop ALL, add nothing
    assert psc["seccompProfile"] == {"type": "RuntimeDefault"}  # Seccomp
    assert csc["seccompProfile"] == {"type": "RuntimeDefault"}
    for volume in pod["volumes"]:  # Volume Types
        assert set(volume) - {"name"} <= PSS_VOLUME_TYPES, volume
    # baseline rules the restricted profile includes
    assert not {"hostNetwork", "hostIPC", "hostPID"} & set(pod)
    assert csc["privileged"] is False
    assert all("hostPort" not in p for p in c["ports"])
    assert csc["readOnlyRootFilesystem"] is True
    assert pod["automountServiceAccountToken"] is False
    # GFD affinity: one term per audited arch (8.0 and 9.0), each with the driver floor of
    # CUDA 13.0.2 (min driver 580.95.05 -> cuda.driver.major > 579)
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    seen = []
    for term in terms:
        expr = {e["key"]: (e["operator"], e["values"]) for e in term["matchExpressions"]}
        assert expr["nvidia.com/cuda.driver.major"] == ("Gt", ["579"])
        seen.append((expr["nvidia.com/gpu.compute.major"], expr["nvidia.com/gpu.compute.minor"]))
    assert seen == [(("In", ["8"]), ("In", ["0"])), (("In", ["9"]), ("In", ["0"]))]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"
    shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "1Gi"}
    # startup budget covers serving.health_start_period_s (600 s): 60 x 10 s
    probe = c["startupProbe"]
    assert probe["failureThreshold"] * probe["periodSeconds"] >= 600
    assert probe["httpGet"] == {"path": "/health", "port": "http"}
    assert c["livenessProbe"]["httpGet"]["path"] == "/health"
    model = next(v for v in pod["volumes"] if v["name"] == "model")
    assert model["persistentVolumeClaim"]["readOnly"] is True
    tp4 = _docs(_deploy("a100-h100", "k8s", "--set", "serving.tensor_parallel_size=4",
                        "--runtime-class", "nvidia").out)[0]["spec"]["template"]["spec"]
    assert tp4["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert tp4["runtimeClassName"] == "nvidia"


def test_nodes_follow_the_image_platform_and_prefer_the_profiles_gpu_products() -> None:
    """The architecture is required (an amd64 image cannot run on arm64); the GFD product is
    only preferred (an H100 is NVIDIA-H100-80GB-HBM3 or NVIDIA-H100-PCIe, -SHARED under
    time-slicing): the compute capability terms are what the image needs."""
    pod = _docs(_deploy("a100-h100", "k8s").out)[0]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/arch": "amd64"}
    affinity = pod["affinity"]["nodeAffinity"]
    (preferred,) = affinity["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred["weight"] == 50
    assert preferred["preference"]["matchExpressions"] == [{
        "key": "nvidia.com/gpu.product", "operator": "In",
        "values": ["NVIDIA-A100-80GB-PCIe", "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3",
                   "NVIDIA-H100-PCIe"]}]
    required = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert all(e["key"] != "nvidia.com/gpu.product"
               for term in required for e in term["matchExpressions"])
    # GPUs given as compute capabilities have no known product: no preference at all
    bare = _docs(_deploy("a100-h100", "k8s", "--set", 'gpu.targets=["8.0", "9.0"]').out)
    bare_affinity = bare[0]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    assert "preferredDuringSchedulingIgnoredDuringExecution" not in bare_affinity
    compose = yaml.safe_load(_deploy("a100-h100", "compose").out)
    assert compose["services"]["a100-h100"]["platform"] == "linux/amd64"


def test_openshift_lets_the_platform_assign_uid_gid_and_fsgroup() -> None:
    """restricted-v2 assigns an arbitrary UID from the namespace's range with GID 0 and
    refuses a pod that fixes a UID outside it; everything else stays as hardened."""
    default = _docs(_deploy("h100-fp8", "k8s").out)
    shift = _docs(_deploy("h100-fp8", "k8s", "--openshift").out)
    pod = shift[0]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    psc, csc = pod["securityContext"], c["securityContext"]
    assert psc == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert csc == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                   "privileged": False, "readOnlyRootFilesystem": True,
                   "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    for volume in pod["volumes"]:  # restricted-v2 allows these volume types
        assert set(volume) - {"name"} <= PSS_VOLUME_TYPES, volume
    # the default output fixes the image's uid; nothing but the security contexts differs
    dpod = default[0]["spec"]["template"]["spec"]
    assert dpod["securityContext"]["runAsUser"] == dpod["securityContext"]["fsGroup"] == 10001
    assert dpod["containers"][0]["securityContext"]["runAsUser"] == 10001
    for d in (default, shift):
        del d[0]["spec"]["template"]["spec"]["securityContext"]
        del d[0]["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    assert default == shift
    # a Kubernetes option: with --format compose it would be dropped without a word
    refused = run_cli("deploy", str(PROFILES / "h100-fp8.yaml"), "--format", "compose",
                      "--openshift")
    assert refused.rc == 64 and "--openshift applies to --format k8s only" in refused.err


def _tool(name: str) -> str:
    path = shutil.which(name) or str(Path(sys.executable).parent / name)
    assert Path(path).exists(), f"{name} is missing: pip install -e '.[test]'"
    return path


def test_generated_manifests_pass_kubernetes_validate_and_checkov(tmp_path: Path) -> None:
    files = []
    for name in shipped_names():
        target = tmp_path / f"{name}.yaml"
        target.write_text(_deploy(name, "k8s").out)
        files.append(target)
    pinned = tmp_path / "pinned.yaml"
    pinned.write_text(_deploy("h100-fp8", "k8s", "--record",
                              str(_record(tmp_path, "h100-fp8"))).out)
    files.append(pinned)
    openshift = tmp_path / "openshift" / "openshift.yaml"
    openshift.parent.mkdir()
    openshift.write_text(_deploy("h100-fp8", "k8s", "--openshift").out)
    kv = subprocess.run([_tool("kubernetes-validate"), "--strict", *map(str, files),
                         str(openshift)],
                        capture_output=True, text=True, check=False)
    assert kv.returncode == 0, kv.stdout + kv.stderr
    assert kv.stdout.count("passed for resource") == 3 * (len(files) + 1)
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE"}
    # the OpenShift manifest fixes no UID (the platform assigns one from the namespace's
    # range, 1000000000 and up): CKV_K8S_40 "run as a high UID" cannot see it, and is the
    # only check it fails
    ck_shift = subprocess.run([_tool("checkov"), "--config-file", str(ROOT / ".checkov.yaml"),
                               "-d", str(openshift.parent), "-o", "json", "--quiet"],
                              capture_output=True, text=True, check=False, env=env)
    shift_report = json.loads(ck_shift.stdout)
    failed = shift_report["results"]["failed_checks"]
    assert [f["check_id"] for f in failed] == ["CKV_K8S_40"], ck_shift.stdout[:4000]
    assert shift_report["summary"]["passed"] >= 80
    ck = subprocess.run([_tool("checkov"), "--config-file", str(ROOT / ".checkov.yaml"),
                         "-d", str(tmp_path), "--skip-path", "openshift", "-o", "json",
                         "--quiet"], capture_output=True, text=True, check=False, env=env)
    report = json.loads(ck.stdout)
    summary = report["summary"] if isinstance(report, dict) else report[0]["summary"]
    assert summary["failed"] == 0, ck.stdout[:4000]
    assert summary["passed"] >= 80 * len(files)  # ~90 checks per manifest: all were scanned
    assert ck.returncode == 0
    # the checker does fail where it should: a root, privileged pod
    bad = _docs(files[0].read_text())
    bad[0]["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {
        "privileged": True}
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "bad.yaml").write_text(yaml.safe_dump_all(bad))
    ck_bad = subprocess.run([_tool("checkov"), "--config-file", str(ROOT / ".checkov.yaml"),
                             "-d", str(tmp_path / "bad"), "-o", "json", "--quiet"],
                            capture_output=True, text=True, check=False, env=env)
    bad_report = json.loads(ck_bad.stdout)
    assert bad_report["summary"]["failed"] > 0


def test_docker_compose_config_accepts_every_generated_file(tmp_path: Path) -> None:
    docker = shutil.which("docker")
    assert docker, "the docker CLI with the compose plugin is required (provision.sh)"
    env = {**os.environ, "MODEL_DIR": str(tmp_path)}
    for name in shipped_names():
        path = tmp_path / f"{name}.yaml"
        path.write_text(_deploy(name, "compose").out)
        out = subprocess.run([docker, "compose", "-f", str(path), "config", "--format",
                              "json"], capture_output=True, text=True, check=False, env=env)
        assert out.returncode == 0, out.stderr
        svc = json.loads(out.stdout)["services"][name]
        assert svc["read_only"] is True and svc["cap_drop"] == ["ALL"]
        # the platform the profile builds for (build.platform: GH200 hosts are arm64)
        assert svc["platform"] == ("linux/arm64" if name == "gh200-vllm" else "linux/amd64")
    # and it refuses a file without the model folder (the ${MODEL_DIR:?} guard)
    no_model = {k: v for k, v in env.items() if k != "MODEL_DIR"}
    out = subprocess.run([docker, "compose", "-f", str(path), "config"], capture_output=True,
                         text=True, check=False, env=no_model)
    assert out.returncode != 0 and "MODEL_DIR" in out.stderr


def test_examples_are_what_deploy_generates(tmp_path: Path) -> None:
    for fmt in ("compose", "k8s"):
        out = run_cli("deploy", "--all", "--format", fmt, "-q", "-o", str(tmp_path))
        assert out.rc == 0, out.err
    for name in shipped_names():
        for filename in ("compose.yaml", "k8s.yaml"):
            committed = EXAMPLES / "deploy" / name / filename
            assert committed.read_text() == (tmp_path / name / filename).read_text(), (
                f"{committed} is stale: run dockergen deploy --all --format ... "
                "-o examples/deploy")


@pytest.mark.parametrize("fmt", ["compose", "k8s"])
def test_deterministic(fmt: str) -> None:
    assert _deploy("a100-h100", fmt).out == _deploy("a100-h100", fmt).out


@pytest.mark.parametrize("profile", ["h100-fp8", "h100-sglang-fp8", "h100-trtllm-fp8"])
def test_the_probes_ask_what_the_images_healthcheck_asks(profile: str) -> None:
    """One engine each: the Kubernetes probes and the Compose health check ask the path and
    port the image's own HEALTHCHECK asks."""
    from dockergen.api import resolve_profile

    health = resolve_profile(PROFILES / f"{profile}.yaml").runtime.health_cmd
    url = re.search(r"'(http://127\.0\.0\.1:(\d+)(/[^']*))'", health[-1])
    assert url, health
    (c,) = _docs(_deploy(profile, "k8s").out)[0]["spec"]["template"]["spec"]["containers"]
    assert c["ports"][0]["containerPort"] == int(url.group(2))
    assert c["startupProbe"]["httpGet"] == {"path": url.group(3), "port": "http"}
    compose = yaml.safe_load(_deploy(profile, "compose").out)
    (service,) = compose["services"].values()
    assert service["healthcheck"]["test"] == ["CMD", *health]


def test_sglang_is_probed_on_its_port() -> None:
    sglang = _docs(_deploy("h100-sglang-fp8", "k8s").out)[0]["spec"]["template"]["spec"]
    (c,) = sglang["containers"]
    assert c["ports"][0]["containerPort"] == 30000
    assert c["startupProbe"]["httpGet"] == {"path": "/health", "port": "http"}


def test_shm_covers_vllms_own_shared_memory_queues() -> None:
    """/dev/shm holds at least vLLM's message queues (160 MiB + 240 MiB per rank, read from
    the 0.33.0 wheel) for every tensor-parallel size, and is never Docker's 64 MB default."""
    from dockergen.outputs.deploy.facts import VLLM_SHM_QUEUES_MIB, shm_gib

    broadcast, per_rank = VLLM_SHM_QUEUES_MIB
    for tp in (1, 2, 4, 8, 16):
        assert shm_gib(tp) * 1024 >= broadcast + per_rank * tp, tp
    assert shm_gib(1) * 1024 > 64
