"""Derive every setting of the image from a checked profile.

Python decides here; the templates only format. The result is a :class:`Resolved` with
one slice per template partial, the lock data written next to the Dockerfile, and the
list of derivations that ``dockergen explain`` prints (each with the rule and source).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from dockergen import __version__
from dockergen.errors import Problem, ProfileError
from dockergen.knowledge import Knowledge, cc_tuple, load_knowledge
from dockergen.loader import LoadedProfile
from dockergen.profile import Profile
from dockergen.rules import check, expand_tag, fa_arch_of, tag_values, torch_pin

Mode = Literal["buildkit", "classic"]

VENV = "/opt/venv"
PYTHON_HOME = "/opt/python"
APP_HOME = "/home/app"
AUDIT_SCRIPT = "arch_audit.py"
LLM_API_OPTIONS = "llm_api_options.yaml"
CERT_DIR = "certs"


@dataclass(frozen=True)
class Derivation:
    """One derived setting and why it has that value."""

    key: str
    value: str
    reason: str
    src: str = ""


@dataclass
class Resolved:
    """Everything the templates need, computed once."""

    profile: Profile
    mode: Mode
    source_name: str  # profile file name for the banner (machine-independent)
    chain: tuple[str, ...]
    base: dict[str, Any]
    flash_attn: dict[str, Any] | None
    engine: dict[str, Any]
    runtime: dict[str, Any]
    context_files: dict[str, bytes]  # extra files of the build context
    tags: list[str]
    lock: dict[str, Any]
    profile_hash: str
    derivations: list[Derivation] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)


def _json(values: list[str]) -> str:
    return json.dumps(values)


def _serve_vllm(p: Profile, kb: Knowledge, out: list[Derivation]) -> tuple[list[str],
                                                                            list[str]]:
    s, q = p.serving, p.quantization
    args: list[str] = [s.model, "--host", s.host, "--port", str(s.port)]

    def flag(name: str, value: object, source: str) -> None:
        args.extend([name, str(value)])
        out.append(Derivation(f"serve {name}", str(value), f"from {source}",
                              "VLLM-WHEEL 0.33.0 engine/arg_utils.py"))

    if s.served_model_name:
        flag("--served-model-name", s.served_model_name, "serving.served_model_name")
    if s.max_model_len is not None:
        flag("--max-model-len", s.max_model_len, "serving.max_model_len")
    if s.gpu_memory_utilization is not None:
        flag("--gpu-memory-utilization", s.gpu_memory_utilization,
             "serving.gpu_memory_utilization")
    if s.max_num_batched_tokens is not None:
        flag("--max-num-batched-tokens", s.max_num_batched_tokens,
             "serving.max_num_batched_tokens")
    if s.max_num_seqs is not None:
        flag("--max-num-seqs", s.max_num_seqs, "serving.max_num_seqs")
    flag("--tensor-parallel-size", s.tensor_parallel_size, "serving.tensor_parallel_size")
    if s.enable_chunked_prefill is not None:
        name = "--enable-chunked-prefill" if s.enable_chunked_prefill else (
            "--no-enable-chunked-prefill")
        args.append(name)
        out.append(Derivation(f"serve {name}", "", "from serving.enable_chunked_prefill",
                              "VLLM-WHEEL 0.33.0 SchedulerConfig"))
    weights = kb.quant("vllm", "quantization", q.weights) or {}
    if weights.get("flag"):
        flag("--quantization", weights["flag"], f"quantization.weights={q.weights}")
    elif weights.get("dtype"):
        flag("--dtype", weights["dtype"], f"quantization.weights={q.weights}")
    elif q.weights != "auto":
        out.append(Derivation("serve --quantization", "(from the checkpoint)",
                              f"quantization.weights={q.weights}: vLLM reads "
                              "quantization_config from the checkpoint", weights.get("src", "")))
    kv = kb.quant("vllm", "kv_cache", q.kv_cache) or {}
    if kv.get("flag"):
        flag("--kv-cache-dtype", kv["flag"], f"quantization.kv_cache={q.kv_cache}")
    args.extend(s.extra_args)
    return ["vllm", "serve"], args


def _serve_trtllm(p: Profile, out: list[Derivation]) -> tuple[list[str], list[str],
                                                              dict[str, Any]]:
    s, q = p.serving, p.quantization
    args: list[str] = [s.model, "--host", s.host, "--port", str(s.port), "--backend", "pytorch",
                       "--tp_size", str(s.tensor_parallel_size)]
    src = "doc:nvidia.github.io/TensorRT-LLM commands/trtllm-serve"
    out.append(Derivation("serve --backend", "pytorch", "the default LLM backend since 1.0",
                          src))
    mapping = (("--max_seq_len", s.max_model_len, "serving.max_model_len"),
               ("--max_num_tokens", s.max_num_batched_tokens, "serving.max_num_batched_tokens"),
               ("--max_batch_size", s.max_num_seqs, "serving.max_num_seqs"),
               ("--kv_cache_free_gpu_memory_fraction", s.gpu_memory_utilization,
                "serving.gpu_memory_utilization (closest equivalent: fraction of the memory "
                "left after weights that the KV cache may take)"))
    for name, value, source in mapping:
        if value is not None:
            args.extend([name, str(value)])
            out.append(Derivation(f"serve {name}", str(value), f"from {source}", src))
    options: dict[str, Any] = {}
    if q.kv_cache != "auto":
        options["kv_cache_config"] = {"dtype": q.kv_cache}
    if s.enable_chunked_prefill is not None:
        options["enable_chunked_prefill"] = s.enable_chunked_prefill
    if options:
        args.extend(["--extra_llm_api_options", f"/etc/dockergen/{LLM_API_OPTIONS}"])
        out.append(Derivation("serve --extra_llm_api_options", json.dumps(options,
                              sort_keys=True), "kv cache dtype / chunked prefill are LLM API "
                              "options, not trtllm-serve flags", src))
    if q.weights not in ("auto", "fp16", "bf16"):
        out.append(Derivation("weights", q.weights, "TensorRT-LLM reads the quantization of a "
                              "ModelOpt-quantized checkpoint (hf_quant_config.json); serve a "
                              "checkpoint made with quantize.py --qformat",
                              "TRTLLM:examples/quantization/quantize.py@059c97c"))
    args.extend(s.extra_args)
    return ["trtllm-serve"], args, options


def _options_yaml(options: dict[str, Any]) -> bytes:
    lines = ["# Generated by dockergen: TensorRT-LLM LLM API options (--extra_llm_api_options)"]
    for key in sorted(options):
        value = options[key]
        if isinstance(value, dict):
            lines.append(f"{key}:")
            lines.extend(f"  {k}: {json.dumps(v)}" for k, v in sorted(value.items()))
        else:
            lines.append(f"{key}: {json.dumps(value)}")
    return ("\n".join(lines) + "\n").encode()


def resolve(loaded: LoadedProfile, mode: Mode = "buildkit",
            kb: Knowledge | None = None) -> Resolved:
    """Check a loaded profile and derive everything; raise :class:`ProfileError` on errors."""
    kb = kb or load_knowledge()
    ctx = check(loaded, kb)
    errors = [pr for pr in ctx.problems if pr.severity == "error"]
    if errors:
        raise ProfileError(ctx.problems)
    p = loaded.profile
    d: list[Derivation] = []
    targets = ctx.targets
    for t in targets:
        d.append(Derivation(f"gpu {t.given}", f"compute capability {t.cc}",
                            f"{t.family}", t.src))
    ccs = sorted({t.cc for t in targets}, key=cc_tuple)
    arch_list = ";".join(ccs)
    d.append(Derivation("TORCH_CUDA_ARCH_LIST", arch_list,
                        "one entry per distinct compute capability of gpu.targets",
                        "torch/utils/cpp_extension.py _get_cuda_arch_flags"))

    cuda = p.cuda
    cuda_info = kb.cuda(cuda.version) or {}
    major, minor = cuda.version.split(".")[:2]
    cu_tag = f"cu{major}{minor}"
    devel_image = cuda.devel_image or f"nvidia/cuda:{cuda.version}-devel-{cuda.os}"
    runtime_image = cuda.runtime_image or (
        f"nvidia/cuda:{cuda.version}-{cuda.runtime_flavor}-{cuda.os}")
    d.append(Derivation("build image", devel_image, "cuda.devel_image" if cuda.devel_image
                        else "nvidia/cuda devel flavour of cuda.version and cuda.os (nvcc and "
                        "headers for the CUDA compiles)", "engines-compat.md §5.3"))
    d.append(Derivation("runtime image", runtime_image, "cuda.runtime_image"
                        if cuda.runtime_image else f"nvidia/cuda {cuda.runtime_flavor} "
                        "flavour: no compilers", "engines-compat.md §5.3"))
    d.append(Derivation("minimum host driver", cuda_info["min_driver"],
                        f"CUDA {cuda.version} (12.x/13.x minor-version compatibility allows "
                        "older drivers with a reduced feature set)", cuda_info["src"]))

    torch = torch_pin(p, kb) or ""
    release = kb.engine_release(p.engine.name, p.engine.version) or {}
    d.append(Derivation("torch", torch, f"pinned by {p.engine.name}=={p.engine.version}"
                        if not p.engine.torch else "engine.torch", release.get("src", "")))
    torch_index = f"{p.build.torch_index_url}/{cu_tag}"
    d.append(Derivation("torch index", torch_index, f"CUDA-matched wheels for {cuda.version}",
                        "engines-compat.md §6 pytorch_index"))
    tools = kb.tools
    apt_build = ["ca-certificates", "ccache", "g++", "python3-venv"]
    if p.build.python_from == "image":
        apt_build += ["python3-dev"]
    base = {
        "image": devel_image,
        "mode": mode,
        "python": p.python,
        "python_from": p.build.python_from,
        "python_home": PYTHON_HOME,
        "venv": VENV,
        "uv_version": tools["uv"],
        "torch": torch,
        "torch_index": torch_index,
        "pip_index_url": p.build.pip_index_url,
        "apt": sorted(apt_build),
        "ca_certificates": bool(p.build.ca_certificates),
        "cert_dir": CERT_DIR,
    }

    fa_slice: dict[str, Any] | None = None
    if p.flash_attn.build == "source":
        fa = kb.fa
        fa_archs = sorted({a for t in targets if (a := fa_arch_of(t.cc))}, key=int)
        jobs = p.flash_attn.max_jobs
        auto_jobs = max(1, p.build.memory_gib // int(fa["job_gib"]))
        max_jobs = auto_jobs if jobs == "auto" else int(jobs)
        covered = {t.cc: fa_arch_of(t.cc) for t in targets}
        d.append(Derivation("FLASH_ATTN_CUDA_ARCHS", ";".join(fa_archs),
                            "8.x -> 80, 9.0 -> 90, 10.x -> 100, 12.x -> 120 (flash-attn honours "
                            "only these; " + ", ".join(f"{cc} runs sm_{a}" for cc, a in
                                                        sorted(covered.items())) + ")",
                            "FA@v2.7.3..v2.8.3:setup.py add_cuda_gencodes"))
        d.append(Derivation("MAX_JOBS", str(max_jobs),
                            f"build.memory_gib {p.build.memory_gib} / {fa['job_gib']} GiB per job"
                            if jobs == "auto" else "flash_attn.max_jobs",
                            "FA@v2.8.3:setup.py NinjaBuildExtension ('~8-9GB when threads = 4')"))
        d.append(Derivation("NVCC_THREADS", str(p.flash_attn.nvcc_threads),
                            "flash_attn.nvcc_threads", "FA@v2.8.0..HEAD:setup.py"))
        fa_slice = {
            "version": p.flash_attn.version,
            "archs": ";".join(fa_archs),
            "torch_arch_list": arch_list,
            "expect": ",".join(f"sm_{a}" for a in fa_archs),
            "max_jobs": max_jobs,
            "max_jobs_reason": (f"{p.build.memory_gib} GiB build memory / {fa['job_gib']} GiB "
                                "per job" if jobs == "auto" else "set in the profile"),
            "job_gib": fa["job_gib"],
            "nvcc_threads": p.flash_attn.nvcc_threads,
            "deps": [f"{k}=={v}" for k, v in sorted(fa["build_deps"].items())],
            "pip": f"pip=={tools['pip']}",
            "venv": VENV,
            "mode": mode,
            "audit_script": AUDIT_SCRIPT,
        }

    engine_info = kb.engine(p.engine.name)
    indexes = [torch_index]
    if p.build.engine_index_url:
        indexes.append(p.build.engine_index_url)
    elif engine_info.get("extra_index_url"):
        indexes.append(engine_info["extra_index_url"])
    engine = {
        "name": p.engine.name,
        "requirement": f"{engine_info['package']}=={p.engine.version}",
        "torch": torch,
        "indexes": indexes,
        "venv": VENV,
        "mode": mode,
        "flash_attn": fa_slice is not None,
    }

    context_files: dict[str, bytes] = {}
    if p.engine.name == "vllm":
        entrypoint, cmd = _serve_vllm(p, kb, d)
        options: dict[str, Any] = {}
    else:
        entrypoint, cmd, options = _serve_trtllm(p, d)
    if options:
        context_files[LLM_API_OPTIONS] = _options_yaml(options)

    env = {
        "HF_HOME": f"{APP_HOME}/.cache/huggingface",
        "HOME": APP_HOME,
        "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
        "PYTHONUNBUFFERED": "1",
        "VIRTUAL_ENV": VENV,
    }
    if p.engine.name == "vllm":
        env["VLLM_NO_USAGE_STATS"] = "1"  # air-gapped fleets: no usage-stats phone-home
    env.update(p.serving.env)

    values = tag_values(p)
    tags = [expand_tag(t, values) for t in p.image.tags]

    fa_archs_label = fa_slice["archs"] if fa_slice else "none"
    lock_core: dict[str, Any] = {
        # matrix: variants are resolved with it removed; cache_ref/attest only steer the
        # bake target, not the image content, so they leave the hash (and dg- tag) alone.
        "profile": p.model_dump(mode="json", exclude={
            "extends": True, "abstract": True, "matrix": True,
            "image": {"cache_ref", "attest"}}),
        "resolved": {
            "gpu": [{"target": t.given, "cc": t.cc} for t in targets],
            "torch_cuda_arch_list": arch_list,
            "flash_attn_cuda_archs": fa_slice["archs"] if fa_slice else None,
            "flash_attn_expected_sass": fa_slice["expect"].split(",") if fa_slice else [],
            "max_jobs": fa_slice["max_jobs"] if fa_slice else None,
            "devel_image": devel_image,
            "runtime_image": runtime_image,
            "min_driver": cuda_info["min_driver"],
            "torch": torch,
            "torch_index": torch_index,
            "engine": engine["requirement"],
            "package_indexes": indexes,
            "uv": tools["uv"],
            "entrypoint": entrypoint,
            "cmd": cmd,
            "tags": tags,
        },
    }
    canonical = json.dumps(lock_core, sort_keys=True, separators=(",", ":"))
    profile_hash = "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    hash_tag = f"dg-{profile_hash[7:19]}"
    tags.append(hash_tag)
    lock_core["resolved"]["tags"] = tags

    labels = {
        "org.opencontainers.image.title": p.name,
        "org.opencontainers.image.version": p.engine.version,
        "org.opencontainers.image.base.name": runtime_image,
        "dockergen.profile.name": p.name,
        "dockergen.profile.hash": profile_hash,
        "dockergen.cuda.archs": arch_list,
        "dockergen.cuda.min-driver": cuda_info["min_driver"],
        "dockergen.flash-attn.archs": fa_archs_label,
        "dockergen.engine": engine["requirement"],
        "dockergen.torch": torch,
        "dockergen.quantization": f"weights={p.quantization.weights},"
                                  f"kv_cache={p.quantization.kv_cache}",
        "dockergen.runtime.uid": str(p.runtime.uid),
        "dockergen.version": __version__,
    }
    if p.description:
        labels["org.opencontainers.image.description"] = p.description
    for key, value in p.image.labels.items():
        labels.setdefault(key, value)  # ours win: they are what the smoke tests check

    apt_runtime = ["ca-certificates"] + list(engine_info.get("runtime_apt", []))
    if p.build.python_from == "image":
        apt_runtime.append("python3")
    if p.runtime.jit_toolchain:
        apt_runtime += ["g++", f"cuda-nvcc-{major}-{minor}"]
    health = (f"import urllib.request; urllib.request.urlopen("
              f"'http://127.0.0.1:{p.serving.port}/health', timeout=5)")
    runtime = {
        "image": runtime_image,
        "apt": sorted(apt_runtime),
        "uid": p.runtime.uid,
        "home": APP_HOME,
        "python_from": p.build.python_from,
        "python_home": PYTHON_HOME,
        "venv": VENV,
        "env": dict(sorted(env.items())),
        "labels": dict(sorted(labels.items())),
        "port": p.serving.port,
        "health_cmd": _json([f"{VENV}/bin/python", "-c", health]),
        "health_start_period": p.serving.health_start_period_s,
        "entrypoint": _json(entrypoint),
        "cmd": _json(cmd),
        "flash_attn": fa_slice is not None,
        "llm_api_options": LLM_API_OPTIONS if options else None,
        "jit_toolchain": p.runtime.jit_toolchain,
    }
    lock = {"dockergen": __version__, "mode": mode, "profile_hash": profile_hash, **lock_core}
    return Resolved(
        profile=p, mode=mode, source_name=loaded.path.name,
        chain=tuple(c.rsplit("/", 1)[-1] for c in loaded.chain),
        base=base, flash_attn=fa_slice, engine=engine, runtime=runtime,
        context_files=context_files, tags=tags, lock=lock, profile_hash=profile_hash,
        derivations=d, warnings=[pr for pr in ctx.problems if pr.severity == "warning"],
    )
