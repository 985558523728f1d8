"""``dockergen deploy``: hardened Compose and Kubernetes run configurations.

Written from the same profile as the image, and from the build record when given (the
image is then pinned by the pushed digest). Python decides here and in
:mod:`dockergen.deploy.facts`; :mod:`.compose` and :mod:`.kubernetes` only lay the decided
values out. Library code: raises :class:`DeployError`, never prints.
May import: :mod:`dockergen.api` (the resolved model), :mod:`dockergen.errors` and the
modules of this package.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dockergen.deploy.facts import ENGINES, OPT_INS, CacheDir, EngineRun, shm_gib
from dockergen.errors import DockergenError, ExitCode

FORMATS = ("compose", "k8s")


class DeployError(DockergenError):
    """A deploy input (build record, option) is wrong; nothing was written."""

    exit_code = ExitCode.INVALID_PROFILE


@dataclass(frozen=True)
class DeployOptions:
    """Command-line choices of ``dockergen deploy`` (all have safe defaults)."""

    record: Path | None = None
    opt_in: tuple[str, ...] = ()
    gpu_ids: tuple[str, ...] = ()  # Compose: explicit device ids; default: a count
    bind_address: str = "127.0.0.1"
    namespace: str = "llm-serving"
    runtime_class: str | None = None
    hf_secret: str = "hf-token"
    model_claim: str | None = None  # Kubernetes PVC; default "<name>-model"
    cpus: int = 8
    memory_gib: int = 64


@dataclass(frozen=True)
class DeployFacts:
    """Everything the writers need, read from the resolved profile in one place.

    :func:`facts_from_profile` is the only code that reads the resolved model
    (:class:`dockergen.model.Resolved`); re-point it when that model changes.
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
    ccs: tuple[str, ...]  # compute capabilities the image was audited for
    min_driver: str
    health_cmd: tuple[str, ...]
    # the image compiles and loads code at run time (Triton's launcher, inductor, JIT
    # kernels): its cache mounts must allow exec (see deploy/facts.py CacheDir.loads_code)
    jit: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def model_dir(self) -> str | None:
        """The folder mounted read-only for a local model path (None: a Hub id)."""
        return posixpath.dirname(self.model) if self.model.startswith("/") else None

    @property
    def shm_gib(self) -> int:
        return shm_gib(self.tensor_parallel)

    def caches(self) -> list[tuple[CacheDir, str]]:
        return [(c, c.path.replace("{home}", self.home)) for c in self.run.caches]

    def env(self) -> list[tuple[str, str, str]]:
        return [(n, v.replace("{home}", self.home), why) for n, v, why in self.run.env]


def _read_record(path: Path, profile_hash: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DeployError(f"{path}: no such build record; run `dockergen build PROFILE "
                          "--push` (it writes build-record.json) or leave out --record") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DeployError(f"{path}: not a dockergen build record ({exc}); pass the "
                          "build-record.json that `dockergen build` wrote") from None
    if not isinstance(data, dict):
        raise DeployError(f"{path}: not a dockergen build record; pass build-record.json")
    if data.get("profile_hash") != profile_hash:
        raise DeployError(f"{path}: built from another profile (hash "
                          f"{data.get('profile_hash')}, this profile resolves to "
                          f"{profile_hash}); rebuild, or pass the same --set overrides")
    status = data.get("status")
    if status in ("failed", "smoke-failed", "started"):
        raise DeployError(f"{path}: the build ended with status {status!r}; deploy only an "
                          "image that built and passed its smoke tests")
    return data


def _image_ref(repo: str, hash_tag: str, record: dict[str, Any] | None,
               warnings: list[str]) -> tuple[str, bool]:
    """``repo@sha256:...`` from the record's pushed digests, else the immutable tag."""
    if record is not None:
        pushed = record.get("pushed") or {}
        if isinstance(pushed, dict) and pushed:
            def repo_of(ref: str) -> str:
                head, _, tail = ref.rpartition(":")
                return head if head and "/" not in tail else ref
            refs = sorted(pushed, key=lambda r: (repo_of(r) != repo, r))
            digest = str(pushed[refs[0]])
            if not digest.startswith("sha256:") or len(digest) != 71:
                raise DeployError(f"build record: pushed digest {digest!r} of {refs[0]} is "
                                  "not sha256:<64 hex>; rebuild with --push")
            return f"{repo_of(refs[0])}@{digest}", True
        warnings.append("warning: the build record has no pushed digest (built without --push); "
                        f"using the tag {repo}:{hash_tag}, which a registry can move; "
                        "push and pass the new record to pin by digest")
        return f"{repo}:{hash_tag}", False
    warnings.append(f"warning: no --record: image {repo}:{hash_tag} is a tag, not a digest; "
                    "pass the build-record.json of `dockergen build --push` to pin it")
    return f"{repo}:{hash_tag}", False


def facts_from_profile(path: Path, overrides: tuple[str, ...],
                       options: DeployOptions) -> DeployFacts:
    """Resolve the profile (and record) into :class:`DeployFacts`."""
    from dockergen.api import immutable_tag, resolve_profile

    resolved = resolve_profile(path, overrides)
    p = resolved.profile
    warnings = [str(w) for w in resolved.warnings]
    for name in options.opt_in:
        if name not in OPT_INS:
            raise DeployError(f"--opt-in {name}: unknown; choose from "
                              f"{', '.join(sorted(OPT_INS))}")
        warnings.append(f"warning: opt-in {name}: {OPT_INS[name]}")
    run = ENGINES.get(p.engine.name)
    if run is None:
        raise DeployError(f"engine.name {p.engine.name}: no run facts for this engine; "
                          f"supported: {', '.join(sorted(ENGINES))}")
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
    # the build's own immutable tag (it hashes the build's inputs), else the one a default
    # `dockergen build` of this profile gives
    recorded = str((record or {}).get("immutable_tag") or "")
    hash_tag = recorded.rpartition(":")[2] if recorded else immutable_tag(path, overrides)
    image, pinned = _image_ref(p.image.name, hash_tag, record, warnings)
    rt = resolved.runtime  # the image's own user, HOME, port and HEALTHCHECK command
    return DeployFacts(
        name=p.name, profile_hash=resolved.profile_hash, image=image, pinned=pinned,
        uid=rt.uid, home=rt.home, port=rt.port,
        tensor_parallel=p.serving.tensor_parallel_size, model=p.serving.model,
        start_period_s=rt.health_start_period, engine=p.engine.name, run=run,
        ccs=tuple(sorted({t.cc for t in resolved.targets})),
        min_driver=str(resolved.lock["resolved"]["min_driver"]),
        health_cmd=tuple(json.loads(rt.health_cmd)),
        jit=rt.jit_c_compiler or rt.jit_toolchain, warnings=warnings)


@dataclass(frozen=True)
class DeployOutput:
    """A generated run configuration and the warnings to show."""

    name: str
    filename: str
    text: str
    warnings: list[str]


def deploy_profile(path: Path, fmt: str, overrides: tuple[str, ...] = (),
                   options: DeployOptions | None = None) -> DeployOutput:
    """Generate the Compose file or Kubernetes manifest of a profile."""
    options = options or DeployOptions()
    facts = facts_from_profile(path, overrides, options)
    if fmt == "compose":
        from dockergen.deploy.compose import render_compose
        return DeployOutput(facts.name, "compose.yaml", render_compose(facts, options),
                            facts.warnings)
    if fmt == "k8s":
        from dockergen.deploy.kubernetes import render_kubernetes
        return DeployOutput(facts.name, "k8s.yaml", render_kubernetes(facts, options),
                            facts.warnings)
    raise DeployError(f"--format {fmt}: choose from {', '.join(FORMATS)}")
