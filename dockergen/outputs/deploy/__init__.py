"""``dockergen deploy``: hardened Compose and Kubernetes run configurations.

Written from the same profile as the image, and from the build record when given (the
image is then pinned by the pushed digest). Python decides here and in
:mod:`dockergen.outputs.deploy.facts`; :mod:`.compose` and :mod:`.kubernetes` only lay the decided
values out. Library code: raises :class:`DeployError`, never prints.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dockergen import refs
from dockergen.errors import DockergenError, ExitCode, shown_value
from dockergen.files import inputs
from dockergen.input.buildrecord import BuildRecord, RecordProblem, read_record
from dockergen.knowledge import facts as knowledge
from dockergen.knowledge import layers
from dockergen.outputs import kube
from dockergen.outputs.deploy.facts import GOARCH_OF_MACHINE, OPT_INS, shm_gib
from dockergen.parts.engines.run import CacheDir, EngineRun

if TYPE_CHECKING:
    from dockergen.pipeline import Resolution
    from dockergen.resolve.model import Resolved

FORMATS = ("compose", "k8s")

# Compose device_ids are what the NVIDIA container toolkit accepts in
# NVIDIA_VISIBLE_DEVICES: an index, a GPU UUID, or a MIG device (`MIG-<UUID>` since driver
# R470, `MIG-GPU-<UUID>/<GI>/<CI>` before); nvidia-smi -L prints them.
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_GPU_ID = re.compile(rf"\d{{1,4}}|GPU-{_UUID}|MIG-(?:{_UUID}|GPU-{_UUID}/\d+/\d+)")


class DeployError(DockergenError, code=ExitCode.INVALID_PROFILE):
    """A deploy input (build record, option) is wrong; nothing was written."""


class DeployUsageError(DeployError, code=ExitCode.USAGE):
    """A ``dockergen deploy`` option has the wrong form; nothing was read or written."""


def _check_k8s_name(option: str, value: str, label: bool, example: str,
                    what: str) -> None:
    problem = kube.name_problem(option, value, label, example, what)
    if problem:
        raise DeployUsageError(problem)


def check_options(options: DeployOptions) -> None:
    """Refuse option values of the wrong form before anything is read or written.

    Each value lands in the YAML written and in its header comments: only shapes that
    cannot change that YAML's structure get through.
    """
    _check_k8s_name("--namespace", options.namespace, True, kube.DEFAULT_NAMESPACE,
                    "a namespace")
    _check_k8s_name("--hf-secret", options.hf_secret, False, "hf-token", "a Secret")
    if options.model_claim is not None:
        _check_k8s_name("--model-claim", options.model_claim, False, "llama-3-8b-model",
                        "a PersistentVolumeClaim")
    if options.runtime_class is not None:
        _check_k8s_name("--runtime-class", options.runtime_class, False, "nvidia",
                        "a RuntimeClass")
    try:
        address = ipaddress.ip_address(options.bind_address)
    except ValueError:
        address = None
    # a scoped IPv6 address (fe80::1%eth0) takes any text after the '%'
    if address is None or getattr(address, "scope_id", None):
        raise DeployUsageError(f"--bind {shown_value(options.bind_address)}: not an IP address; "
                               "give the host address to publish the port on, e.g. "
                               "--bind 127.0.0.1 (this host only) or --bind 0.0.0.0 (all)")
    for gpu in options.gpu_ids:
        if not _GPU_ID.fullmatch(gpu):
            raise DeployUsageError(
                f"--gpu-ids: {shown_value(gpu) if gpu else 'an empty id'} is not a GPU index, "
                "GPU UUID or MIG device; give a comma-separated list without blanks as "
                "`nvidia-smi -L` names them, e.g. --gpu-ids 0,1 or --gpu-ids "
                "GPU-6f2a7c3e-0b1d-4e5f-8a9b-0c1d2e3f4a5b")
    if len(set(options.gpu_ids)) != len(options.gpu_ids):
        raise DeployUsageError("--gpu-ids: a GPU is listed twice; give each device once, "
                               "e.g. --gpu-ids 0,1")


def comment(value: str) -> str:
    """Text safe inside a ``#`` comment line: a value with a line break (or any other
    non-printable character) is shown escaped, so it cannot start a YAML line."""
    return value if value.isprintable() else ascii(value)


@dataclass(frozen=True)
class DeployOptions:
    """Command-line choices of ``dockergen deploy`` (all have safe defaults)."""

    record: Path | None = None
    opt_in: tuple[str, ...] = ()
    gpu_ids: tuple[str, ...] = ()  # Compose: explicit device ids; default: a count
    bind_address: str = "127.0.0.1"
    namespace: str = kube.DEFAULT_NAMESPACE
    runtime_class: str | None = None
    hf_secret: str = "hf-token"
    model_claim: str | None = None  # Kubernetes PVC; default "<name>-model"
    cpus: int = 8
    memory_gib: int = 64
    # Kubernetes: OpenShift's restricted-v2 SCC assigns the UID (from the namespace's range),
    # GID 0 and the fsGroup; a pod that fixes them is refused there
    openshift: bool = False
    # Kubernetes: a public key file or KMS reference; the manifest then carries an admission
    # policy that admits the image only with a cosign signature by that key (deploy/admission.py)
    require_signature: str | None = None


@dataclass(frozen=True)
class DeployFacts:
    """Everything the writers need, read from the resolved profile in one place.

    :func:`facts_of` is the only code that reads the resolution
    (:class:`dockergen.pipeline.Resolution`); re-point it when that model changes.
    """

    name: str
    profile_hash: str
    image: str
    pinned: bool
    uid: int
    home: str
    port: int
    tensor_parallel: int
    model: str
    start_period_s: int
    engine: str
    run: EngineRun
    health_path: str  # the engine's probe path, the one the image's HEALTHCHECK asks
    ccs: tuple[str, ...]  # compute capabilities the image was audited for
    min_driver: str
    health_cmd: tuple[str, ...]
    # the image compiles and loads code at run time (Triton's launcher, inductor, JIT
    # kernels): its cache mounts must allow exec (see deploy/facts.py CacheDir.loads_code)
    jit: bool = False
    # the image's layer compression and what pulling it needs (dockergen/knowledge/layers.py)
    layers: str = ""
    # the image's architecture as Kubernetes and OCI name it (GOARCH: amd64, arm64)
    arch: str = "amd64"
    # GPU Feature Discovery products of the profile's named GPUs (preferred nodes)
    gpu_products: tuple[str, ...] = ()
    # folders the image writes beyond its engine's own (the engine's JIT cache, unseeded)
    extra_caches: tuple[CacheDir, ...] = ()
    # the admission policy's verifying key (``key`` of a ClusterImagePolicy authority);
    # None: no policy is written
    signature_key: dict[str, str] | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def model_dir(self) -> str | None:
        """The folder mounted read-only for a local model path (None: a Hub id)."""
        return posixpath.dirname(self.model) if self.model.startswith("/") else None

    @property
    def shm_gib(self) -> int:
        return shm_gib(self.tensor_parallel)

    def caches(self) -> list[tuple[CacheDir, str]]:
        return [(c, c.path.replace("{home}", self.home))
                for c in (*self.run.caches, *self.extra_caches)]

    def env(self) -> list[tuple[str, str, str]]:
        return [(n, v.replace("{home}", self.home), why) for n, v, why in self.run.env]


def _read_record(path: Path, profile_hash: str) -> BuildRecord:
    """The build record at ``path``, refused unless it is what ``dockergen build`` wrote for
    this profile and the image got past its smoke tests."""
    again = "pass the build-record.json that `dockergen build` wrote"
    try:
        data = inputs.loads_json(inputs.read_bytes(path, "record"))
    except FileNotFoundError:
        raise DeployError(f"{path}: no such build record; run `dockergen build PROFILE "
                          "--push` (it writes build-record.json) or leave out --record") from None
    except inputs.InputError as exc:  # a device, FIFO, link loop, huge file
        raise DeployError(f"{exc.path}: {exc.problem}; {again}") from None
    except (OSError, ValueError) as exc:  # ValueError: bad UTF-8, malformed or deep JSON
        raise DeployError(f"{path}: not a dockergen build record ({str(exc)[:120]}); "
                          f"{again}") from None
    if isinstance(data, dict) and data.get("profile_hash") != profile_hash:
        raise DeployError(f"{path}: built from another profile (hash "
                          f"{shown_value(str(data.get('profile_hash')))}, this profile "
                          f"resolves to {profile_hash}); rebuild, or pass the same --set "
                          "overrides")
    try:
        record = read_record(data)
    except RecordProblem as exc:
        raise DeployError(f"{path}: {exc}; {again}") from None
    if not record.status.deployable:
        raise DeployError(f"{path}: the build ended with status {record.status.value!r}; "
                          "deploy only an image that built and passed its smoke tests")
    return record


def _image_ref(repo: str, hash_tag: str, record: BuildRecord | None,
               warnings: list[str]) -> tuple[str, bool]:
    """``repo@sha256:...`` from the record's pushed digests, else the immutable tag."""
    if record is not None:
        pinned = record.pinned_image(repo)
        if pinned is not None:
            return pinned, True
        warnings.append("warning: the build record has no pushed digest (built without --push); "
                        f"using the tag {repo}:{hash_tag}, which a registry can move; "
                        "push and pass the new record to pin by digest")
        return f"{repo}:{hash_tag}", False
    warnings.append(f"warning: no --record: image {repo}:{hash_tag} is a tag, not a digest; "
                    "pass the build-record.json of `dockergen build --push` to pin it")
    return f"{repo}:{hash_tag}", False


def facts_of(res: Resolution, options: DeployOptions) -> DeployFacts:
    """The resolved profile (and the build record) as :class:`DeployFacts`."""
    resolved = res.resolved
    p = resolved.profile
    warnings = [str(w) for w in resolved.warnings]
    for name in options.opt_in:
        if name not in OPT_INS:
            raise DeployError(f"--opt-in {name}: unknown; choose from "
                              f"{', '.join(sorted(OPT_INS))}")
        warnings.append(f"warning: opt-in {name}: {OPT_INS[name]}")
    from dockergen.parts.engines import engine_for

    engine = engine_for(p.engine.name)  # every registered engine has its run facts
    if options.gpu_ids and len(options.gpu_ids) != p.serving.tensor_parallel_size:
        raise DeployError(f"--gpu-ids {','.join(options.gpu_ids)}: "
                          f"{len(options.gpu_ids)} device(s) for tensor_parallel_size "
                          f"{p.serving.tensor_parallel_size}; give exactly "
                          f"{p.serving.tensor_parallel_size}")
    if not p.serving.model.startswith("/"):
        warnings.append(f"warning: serving.model {p.serving.model} is a Hugging Face Hub id: "
                        "the download lands in the ~/.cache tmpfs/emptyDir (memory, size-capped) "
                        "on every start; serve a local folder (mounted read-only) instead")
    record = _read_record(options.record, resolved.profile_hash) if options.record else None
    signature_key = None
    if options.require_signature is not None:  # read before anything is written
        from dockergen.outputs.deploy.admission import key_material

        signature_key = key_material(options.require_signature)
    # the build's own immutable tag (it hashes the build's inputs), else the one a default
    # `dockergen build` of this profile gives
    hash_tag = str(refs.parse(record.immutable_tag).tag) if record else res.content_tag
    image, pinned = _image_ref(p.image.name, hash_tag, record, warnings)
    rt = resolved.runtime  # the image's own user, HOME, port and HEALTHCHECK command
    return DeployFacts(
        name=p.name, profile_hash=resolved.profile_hash, image=image, pinned=pinned,
        uid=rt.uid, home=rt.home, port=rt.port,
        tensor_parallel=p.serving.tensor_parallel_size, model=p.serving.model,
        start_period_s=rt.health_start_period, engine=p.engine.name, run=engine.run,
        health_path=engine.probe_path(knowledge.facts(res.loaded.user_facts)),
        ccs=tuple(sorted({t.cc for t in resolved.gpus})),
        min_driver=resolved.min_driver, health_cmd=rt.health_cmd,
        jit=rt.jit_c_compiler or rt.jit_toolchain,
        layers=layers.summary(p.image.compression),
        arch=GOARCH_OF_MACHINE[resolved.python_lock_inputs.platform.split("-", 1)[0]],
        gpu_products=tuple(sorted({g for t in resolved.gpus for g in t.gfd_products})),
        extra_caches=_jit_cache(resolved), signature_key=signature_key, warnings=warnings)


def _jit_cache(resolved: Resolved) -> tuple[CacheDir, ...]:
    """The engine's JIT cache as a writable mount where the image seeds nothing (the first
    start compiles into it; on the read-only root it would fail). A seeded cache stays the
    image's: a mount would hide it, and every lookup works read-only."""
    jit = resolved.engine_jit
    if jit is None or jit.kernels:
        return ()
    return (CacheDir("jit", jit.cache_dir, f"{jit.engine} compiles its start-up kernels into "
                     "it (nothing seeded: serving.hf_config unset)", jit.engine,
                     loads_code=True),)


@dataclass(frozen=True)
class DeployOutput:
    """A generated run configuration and the warnings to show."""

    name: str
    filename: str
    text: str
    warnings: list[str]


def deploy(res: Resolution, fmt: str, options: DeployOptions | None = None) -> DeployOutput:
    """Generate the Compose file or Kubernetes manifest of a resolved profile."""
    options = options or DeployOptions()
    check_options(options)
    if options.require_signature is not None and fmt != "k8s":
        raise DeployUsageError("--require-signature writes a Kubernetes admission policy; "
                               "use it with --format k8s")
    facts = facts_of(res, options)
    if fmt == "compose":
        from dockergen.outputs.deploy.compose import render_compose
        return DeployOutput(facts.name, "compose.yaml", render_compose(facts, options),
                            facts.warnings)
    if fmt == "k8s":
        from dockergen.outputs.deploy.kubernetes import render_kubernetes
        return DeployOutput(facts.name, "k8s.yaml", render_kubernetes(facts, options),
                            facts.warnings)
    raise DeployError(f"--format {fmt}: choose from {', '.join(FORMATS)}")
