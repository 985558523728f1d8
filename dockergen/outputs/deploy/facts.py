"""Run-time facts every engine shares, each with its source: shm, ulimits, node labels,
opt-ins. An engine's own run facts (health endpoint, writable caches, environment) are in
its folder (:attr:`dockergen.parts.engines.base.ServingEngine.run`).
"""

from __future__ import annotations

from dockergen.platforms import BY_MACHINE

# /dev/shm: Docker's default is 64 MB; NVIDIA recommends --shm-size=1g for NGC containers
# (NGC banner quoted in awslabs/benchmark-ai#17), vLLM's Kubernetes example mounts a 2Gi
# memory emptyDir for tensor parallelism (vllm docs/deployment/k8s.md). vLLM's own
# shared-memory queues need 160 MiB + 240 MiB per rank (below); PyTorch and NCCL's SHM
# transport use /dev/shm on top. dockergen sizes 1 GiB plus 1 GiB per additional
# tensor-parallel rank, which covers both examples and the queues with room to spare.
SHM_BASE_GIB = 1
SHM_PER_EXTRA_RANK_GIB = 1
SHM_SRC = ("NGC: --shm-size=1g (awslabs/benchmark-ai#17); vLLM docs/deployment/k8s.md: 2Gi "
           "memory emptyDir at /dev/shm; vLLM queues 160 MiB + 240 MiB per rank; dockergen: "
           "1 GiB + 1 GiB per extra TP rank")
# vLLM 0.33.0 wheel: vllm/v1/executor/multiproc_executor.py rpc_broadcast_mq =
# MessageQueue(..., max_chunk_bytes=VLLM_MQ_MAX_CHUNK_BYTES_MB (16, vllm/envs.py) MiB) and
# one worker_response_mq = MessageQueue(1, 1) per rank; vllm/distributed/
# device_communicators/shm_broadcast.py MessageQueue defaults max_chunk_bytes 24 MiB,
# max_chunks 10; each ring buffer is max_chunks x max_chunk_bytes of shared memory.
VLLM_SHM_QUEUES_MIB = (16 * 10, 24 * 10)  # (broadcast queue, per-rank response queue)

# NCCL-friendly ulimits (NGC banner: --ulimit memlock=-1 --ulimit stack=67108864). memlock
# matters only for RDMA/InfiniBand transports, and raising it fails on engines that may not
# raise RLIMIT_MEMLOCK (rootless Docker; measured here: "error setting rlimit type 8:
# operation not permitted" with dockerd's hard limit at 8 MiB), so it is an opt-in.
ULIMITS = {"memlock": -1, "stack": 67108864}
ULIMITS_SRC = "NGC banner quoted in awslabs/benchmark-ai#17 (NVIDIA DGX user guide)"

# GPU Feature Discovery node labels (src: NVIDIA/gpu-feature-discovery README "Generated
# Labels"; cuda.driver.major is the driver's major version, e.g. 580).
GFD_COMPUTE_MAJOR = "nvidia.com/gpu.compute.major"
GFD_COMPUTE_MINOR = "nvidia.com/gpu.compute.minor"
GFD_DRIVER_MAJOR = "nvidia.com/cuda.driver.major"
# The board's product (NVML name, blanks as '-'); values per GPU model are in
# dockergen/parts/cuda.yaml (gfd_product) with their source. Preferred, never required:
# one model has several products (H100: NVIDIA-H100-80GB-HBM3 for SXM, NVIDIA-H100-PCIe),
# time-slicing appends -SHARED and MIG -MIG-<profile>, and the compute capability terms
# already require what the image's kernels need; a hard match would strand a pod on a
# cluster of the model's other form factor.
GFD_PRODUCT = "nvidia.com/gpu.product"
GFD_PRODUCT_WEIGHT = 50  # of 1..100: steers where the scheduler has a choice

# Node and image architecture: Kubernetes' well-known label kubernetes.io/arch and an OCI
# platform's architecture are Go's GOARCH names (src: kubernetes.io/docs/reference/labels-
# annotations-taints/#kubernetes-io-arch "set by the kubelet to runtime.GOARCH"; OCI
# image-index spec platform.architecture). The image's machine is the one its wheels are
# resolved for (the Python lock's platform, e.g. x86_64-manylinux_2_35).
NODE_ARCH = "kubernetes.io/arch"
GOARCH_OF_MACHINE = {machine: a.goarch for machine, a in BY_MACHINE.items()}

# Opt-ins: settings that share host namespaces; each prints a warning when used.
OPT_INS: dict[str, str] = {
    "ipc-host": "shares the host's IPC namespace (CIS Docker 5.17; Pod Security baseline "
                "forbids hostIPC); use only where /dev/shm sizing is not enough",
    "memlock-unlimited": "ulimit memlock=-1 for RDMA/InfiniBand NCCL transports; the engine "
                         "must be allowed to raise RLIMIT_MEMLOCK (fails on rootless Docker)",
    "host-network": "shares the host's network namespace (CIS Docker 5.10; Pod Security "
                    "baseline forbids hostNetwork); e.g. for multi-node NCCL over the host NIC",
}


def shm_gib(tensor_parallel: int) -> int:
    """/dev/shm size in GiB for a tensor-parallel degree."""
    return SHM_BASE_GIB + SHM_PER_EXTRA_RANK_GIB * (tensor_parallel - 1)
