"""The manifest of ``dockergen deploy --format k8s``: Deployment, Service, NetworkPolicy.

The pod meets the Pod Security Standards "restricted" profile (src:
kubernetes.io/docs/concepts/security/pod-security-standards/): runAsNonRoot, a non-zero
runAsUser, allowPrivilegeEscalation false, capabilities drop ALL, seccomp RuntimeDefault,
only emptyDir/persistentVolumeClaim/secret volumes, no host namespaces (unless opted in).
With ``--openshift`` the pod fixes no runAsUser, runAsGroup or fsGroup: OpenShift's
restricted-v2 SCC assigns them (an arbitrary UID from the namespace's range, GID 0) and
refuses a pod whose fixed UID is outside that range (src: OpenShift 4 docs, "Managing
security context constraints", restricted-v2).
"""

from __future__ import annotations

import math
from typing import Any

import yaml

from dockergen.outputs import kube
from dockergen.outputs.deploy import DeployFacts, DeployOptions, admission, comment
from dockergen.outputs.deploy.facts import (
    GFD_COMPUTE_MAJOR,
    GFD_COMPUTE_MINOR,
    GFD_DRIVER_MAJOR,
    GFD_PRODUCT,
    GFD_PRODUCT_WEIGHT,
    NODE_ARCH,
    SHM_SRC,
)

PROBE_PERIOD_S = 10
CACHE_LIMITS = {"tmp": "4Gi", "cache": "16Gi", "triton": "2Gi", "config": "64Mi", "jit": "2Gi"}


def node_affinity(f: DeployFacts) -> dict[str, Any]:
    """One GFD term per audited compute capability, each with the driver floor (required),
    and the GFD products of the profile's GPUs (preferred: see facts.GFD_PRODUCT).

    Terms are ORed, expressions within a term ANDed (Kubernetes nodeSelectorTerms). ``Gt``
    compares integers, so "driver major >= M" is ``Gt M-1``.
    """
    driver_major = int(f.min_driver.split(".")[0])
    terms = []
    for cc in f.ccs:
        major, minor = cc.split(".")
        terms.append({"matchExpressions": [
            {"key": GFD_DRIVER_MAJOR, "operator": "Gt", "values": [str(driver_major - 1)]},
            {"key": GFD_COMPUTE_MAJOR, "operator": "In", "values": [major]},
            {"key": GFD_COMPUTE_MINOR, "operator": "In", "values": [minor]},
        ]})
    affinity: dict[str, Any] = {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": terms}}
    if f.gpu_products:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [{
            "weight": GFD_PRODUCT_WEIGHT, "preference": {"matchExpressions": [
                {"key": GFD_PRODUCT, "operator": "In", "values": list(f.gpu_products)}]}}]
    return {"nodeAffinity": affinity}


def security_context(f: DeployFacts, o: DeployOptions, pod: bool) -> dict[str, Any]:
    """The pod's (``pod``) or the server container's security context.

    Both: non-root, RuntimeDefault seccomp; the container also no privilege escalation, no
    capabilities, a read-only root. The image's UID (and, for the pod, fsGroup) only where
    the platform does not assign one (OpenShift does).
    """
    ctx: dict[str, Any] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    if not o.openshift:
        ctx.update({"runAsGroup": f.uid, "runAsUser": f.uid})
        if pod:
            ctx["fsGroup"] = f.uid
    if not pod:
        ctx.update({"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                    "privileged": False, "readOnlyRootFilesystem": True})
    return ctx


def _probe(f: DeployFacts, period: int, failures: int, timeout: int = 5) -> dict[str, Any]:
    return {"httpGet": {"path": f.health_path, "port": kube.SERVER_PORT_NAME},
            "periodSeconds": period, "timeoutSeconds": timeout, "failureThreshold": failures}


def _volumes_and_mounts(f: DeployFacts,
                        o: DeployOptions) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pod's volumes and the server's mounts of them, in the same order."""
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    for c, path in f.caches():
        volumes.append({"name": c.name, "emptyDir": {"sizeLimit": CACHE_LIMITS.get(c.name,
                                                                                  "1Gi")}})
        mounts.append({"name": c.name, "mountPath": path})
    if "ipc-host" not in o.opt_in:
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory",
                                                     "sizeLimit": f"{f.shm_gib}Gi"}})
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    if f.model_dir:
        volumes.append({"name": "model", "persistentVolumeClaim": {
            "claimName": o.model_claim or f"{f.name}-model", "readOnly": True}})
        mounts.append({"name": "model", "mountPath": f.model_dir, "readOnly": True})
    return volumes, mounts


def _server_container(f: DeployFacts, o: DeployOptions,
                      mounts: list[dict[str, Any]]) -> dict[str, Any]:
    env: list[dict[str, Any]] = [{"name": n, "value": v} for n, v, _ in f.env()]
    env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {
        "name": o.hf_secret, "key": "token", "optional": True}}})
    resources = {"cpu": str(o.cpus), "memory": f"{o.memory_gib}Gi"}
    return {
        "name": "server",
        "image": f.image,
        "imagePullPolicy": "Always",
        "ports": [{"name": kube.SERVER_PORT_NAME, "containerPort": f.port, "protocol": "TCP"}],
        "env": sorted(env, key=lambda e: e["name"]),
        "resources": {"limits": {**resources, "nvidia.com/gpu": str(f.tensor_parallel)},
                      "requests": {**resources, "nvidia.com/gpu": str(f.tensor_parallel)}},
        "securityContext": security_context(f, o, pod=False),
        # The startup budget covers model loading (serving.health_start_period_s); the
        # liveness probe only starts once the startup probe has succeeded.
        "startupProbe": _probe(f, PROBE_PERIOD_S,
                               max(1, math.ceil(f.start_period_s / PROBE_PERIOD_S))),
        "readinessProbe": _probe(f, PROBE_PERIOD_S, 3),
        "livenessProbe": _probe(f, 30, 3, timeout=10),
        "volumeMounts": mounts,
    }


def _pod_spec(f: DeployFacts, o: DeployOptions, container: dict[str, Any],
              volumes: list[dict[str, Any]]) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "affinity": node_affinity(f),
        "containers": [container],
        # the image is built for one architecture (an amd64 image on an arm64 node fails
        # with "exec format error")
        "nodeSelector": {NODE_ARCH: f.arch},
        "securityContext": security_context(f, o, pod=True),
        "terminationGracePeriodSeconds": 30,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                         "effect": "NoSchedule"}],
        "volumes": volumes,
    }
    if o.runtime_class:
        pod["runtimeClassName"] = o.runtime_class
    if "ipc-host" in o.opt_in:
        pod["hostIPC"] = True
    if "host-network" in o.opt_in:
        pod["hostNetwork"] = True
    return pod


def _deployment(f: DeployFacts, o: DeployOptions, labels: dict[str, str],
                selector: dict[str, str], pod: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f.name, "namespace": o.namespace, "labels": labels,
                     "annotations": {"dockergen.profile.hash": f.profile_hash}},
        "spec": {
            "replicas": 1,
            # Recreate: a rolling update would need a second set of GPUs.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


def _service(f: DeployFacts, o: DeployOptions, labels: dict[str, str],
             selector: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f.name, "namespace": o.namespace, "labels": labels},
        "spec": {"type": "ClusterIP", "selector": selector,
                 "ports": [{"name": kube.SERVER_PORT_NAME, "port": f.port,
                            "targetPort": kube.SERVER_PORT_NAME,
                            "protocol": "TCP"}]},
    }


def _network_policy(f: DeployFacts, o: DeployOptions, labels: dict[str, str],
                    selector: dict[str, str]) -> dict[str, Any]:
    # Only the server port is reachable; every other ingress to the pod is denied.
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f.name, "namespace": o.namespace, "labels": labels},
        "spec": {"podSelector": {"matchLabels": selector}, "policyTypes": ["Ingress"],
                 "ingress": [{"ports": [{"port": f.port, "protocol": "TCP"}]}]},
    }


def manifests(f: DeployFacts, o: DeployOptions) -> list[dict[str, Any]]:
    """Deployment, Service and NetworkPolicy as plain data."""
    labels = kube.labels(f.name)
    selector = kube.selector(f.name)
    volumes, mounts = _volumes_and_mounts(f, o)
    pod = _pod_spec(f, o, _server_container(f, o, mounts), volumes)
    docs = [_deployment(f, o, labels, selector, pod), _service(f, o, labels, selector),
            _network_policy(f, o, labels, selector)]
    if f.signature_key is not None:  # the same image the Deployment runs
        docs.append(admission.cluster_image_policy(f.name, f.image, f.signature_key))
    return docs


def _header(f: DeployFacts, o: DeployOptions) -> str:
    lines = [
        f"# Generated by `dockergen deploy --format k8s` from profile {f.name} "
        f"({f.profile_hash}).",
        "# image: " + ("pinned by digest from the build record" if f.pinned
                       else "TAG, NOT PINNED: pass --record build-record.json"),
        f"# Needs: namespace {comment(o.namespace)}; secret {comment(o.hf_secret)} (key token) "
        "if the model is gated;",
        f"#   PVC {comment(o.model_claim or f.name + '-model')} holding the model (mounted "
        "read-only).",
        *_security_lines(f, o),
        *_placement_lines(f),
        f"# /dev/shm: {f.shm_gib}Gi memory emptyDir (src: {SHM_SRC}).",
        f"# health: {f.health_path} (src: {f.run.health_src})",
        f"# pull: {f.layers}.",
        "# Writable emptyDir mounts (the root filesystem is read-only):",
    ]
    for c, path in f.caches():
        lines.append(f"#   {path}: {c.why} (src: {c.src})")
    for opt in o.opt_in:
        lines.append(f"# OPT-IN {comment(opt)}: enabled on request")
    if f.signature_key is not None:
        lines += admission.header_lines(f.image)
    return "\n".join(lines) + "\n"


def _placement_lines(f: DeployFacts) -> list[str]:
    preferred = (f"preferred: {GFD_PRODUCT} in {comment(', '.join(f.gpu_products))} (the "
                 "profile's GPUs; not required: form factors and sharing change the product)."
                 if f.gpu_products else
                 f"no {GFD_PRODUCT} preference (no product known for the profile's GPUs).")
    return [f"# Nodes: {NODE_ARCH} {f.arch} (the image's architecture) and, by GPU Feature "
            "Discovery labels,",
            f"#   compute capability in {', '.join(f.ccs)} (the image's audited archs) and "
            f"driver major >= {f.min_driver.split('.')[0]} (CUDA floor {f.min_driver});",
            f"#   {preferred}"]


def _security_lines(f: DeployFacts, o: DeployOptions) -> list[str]:
    if not o.openshift:
        return [f"# Pod Security 'restricted'; runs as the image's uid {f.uid} (fsGroup {f.uid})."]
    return ["# Pod Security 'restricted', OpenShift restricted-v2: no runAsUser, runAsGroup or",
            "#   fsGroup; OpenShift assigns a UID from the namespace's range with GID 0, and the",
            "#   image's HOME and caches are group-0 writable (the emptyDir mounts are too)."]


class _NoAliases(yaml.SafeDumper):
    """Write repeated values out in full (no &id001 anchors: plainer for reviewers)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _text_block(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    """A text of several lines (a PEM key) as a literal block, as people paste it."""
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_NoAliases.add_representer(str, _text_block)


def render_kubernetes(f: DeployFacts, o: DeployOptions) -> str:
    """The manifest text: a commented header and sorted-key YAML documents."""
    docs = [yaml.dump(d, Dumper=_NoAliases, sort_keys=True, default_flow_style=False,
                      width=100) for d in manifests(f, o)]
    return _header(f, o) + "---\n" + "---\n".join(docs)
