"""Compatibility rules: every choice of a profile checked against the knowledge base.

Each check appends :class:`Problem` objects (errors stop the render, warnings explain a
legal but surprising choice). The rule ids and their sources are listed in
``data/compat.yaml`` and in the README; each message says what is wrong and what to do.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from packaging.version import Version

from dockergen.errors import Location, Problem
from dockergen.knowledge import GpuTarget, Knowledge, cc_tuple, in_range
from dockergen.loader import LoadedProfile
from dockergen.profile import Profile

TAG_FIELDS = ("name", "engine.name", "engine.version", "cuda.version", "cuda.major_minor",
              "python", "quantization.weights", "quantization.kv_cache")
_TAG_VALUE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


@dataclass
class Context:
    """What the rules share: the profile, where its values are, and what was derived."""

    loaded: LoadedProfile
    kb: Knowledge
    problems: list[Problem] = field(default_factory=list)
    targets: list[GpuTarget] = field(default_factory=list)

    @property
    def p(self) -> Profile:
        return self.loaded.profile

    def at(self, *path: str | int) -> Location:
        return self.loaded.at(*path)

    def error(self, path: tuple[str | int, ...], message: str, fix: str) -> None:
        self.problems.append(Problem(self.at(*path), _dotted(path), message, fix))

    def warn(self, path: tuple[str | int, ...], message: str, fix: str = "") -> None:
        self.problems.append(Problem(self.at(*path), _dotted(path), message, fix, "warning"))


def _dotted(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def torch_pin(p: Profile, kb: Knowledge) -> str | None:
    """The torch version the image gets: the engine release's pin unless overridden."""
    if p.engine.torch:
        return p.engine.torch
    release = kb.engine_release(p.engine.name, p.engine.version)
    return str(release["torch"]) if release else None


def fa_arch_of(cc: str) -> str | None:
    """The FLASH_ATTN_CUDA_ARCHS value that covers a compute capability.

    flash-attn's setup.py only honours 80/90/100/120 (FA@v2.7.3..v2.8.3 add_cuda_gencodes);
    8.6 and 8.9 run the sm_80 code (same major), 10.x the sm_100 code, 12.x sm_120.
    """
    major, _minor = cc_tuple(cc)
    return {8: "80", 9: "90", 10: "100", 12: "120"}.get(major)


def _describe(t: GpuTarget) -> str:
    return f"{t.name} ({t.cc})" if t.name else t.cc


def _list(targets: list[GpuTarget]) -> str:
    return ", ".join(_describe(t) for t in targets)


# --- the rules --------------------------------------------------------------------------

def check_gpus(c: Context) -> None:
    """gpu-known: every target is a known GPU name or a compute capability."""
    for i, given in enumerate(c.p.gpu.targets):
        target = c.kb.gpu(given)
        if target is None:
            guess = difflib.get_close_matches(given.lower(), c.kb.gpu_names(), n=1, cutoff=0.5)
            hint = f"did you mean {guess[0]!r}? " if guess else ""
            c.error(("gpu", "targets", i), f"unknown GPU {given!r}",
                    f"{hint}use a GPU name ({', '.join(c.kb.gpu_names())}) or a compute "
                    "capability like \"9.0\"")
            continue
        if c.kb.cc_arch(target.cc) is None:
            c.error(("gpu", "targets", i), f"compute capability {target.cc} is not in the "
                    "knowledge base", "use one of: " + ", ".join(sorted(
                        c.kb.data["cuda_archs"], key=cc_tuple)))
            continue
        c.targets.append(target)
    c.targets.sort(key=lambda t: (t.cc_tuple, t.given))


def check_cuda(c: Context) -> None:
    """cuda-known, cuda-os, cuda-arch-vs-toolkit."""
    version = c.p.cuda.version
    info = c.kb.cuda(version)
    if info is None:
        c.error(("cuda", "version"), f"CUDA {version} is not in the knowledge base",
                "use one of: " + ", ".join(c.kb.cuda_versions()))
        return
    if c.p.cuda.os not in info["os"]:
        c.error(("cuda", "os"), f"nvidia/cuda {version} images are not published for "
                f"{c.p.cuda.os}", "use one of: " + ", ".join(info["os"]))
    cuda = Version(version)
    for t in c.targets:
        arch = c.kb.cc_arch(t.cc) or {}
        if cuda < Version(arch["min_cuda"]):
            c.error(("cuda", "version"), f"CUDA {version} cannot compile for compute capability "
                    f"{t.cc}, but gpu.targets includes {_describe(t)}",
                    f"use CUDA >= {arch['min_cuda']} (e.g. {c.kb.cuda_versions()[-1]}), or drop "
                    f"{t.given}")
        if "max_cuda" in arch and cuda > Version(arch["max_cuda"] + ".99"):
            c.error(("cuda", "version"), f"CUDA {version} dropped compute capability {t.cc}, "
                    f"but gpu.targets includes {_describe(t)}",
                    f"use CUDA <= {arch['max_cuda']}, or drop {t.given}")


def check_engine(c: Context) -> None:
    """engine-release-known, engine-python, engine-cuda-major, torch pins and indexes."""
    p = c.p
    release = c.kb.engine_release(p.engine.name, p.engine.version)
    if release is None:
        c.error(("engine", "version"), f"{p.engine.name} {p.engine.version} is not in the "
                "knowledge base", "use one of: " + ", ".join(
                    c.kb.engine_versions(p.engine.name)) + " (or add the release with its "
                "source to dockergen/data/compat.yaml)")
        return
    if release.get("unverified"):
        c.warn(("engine", "version"), f"the pins of {p.engine.name} {p.engine.version} are "
               f"partly unverified ({release['src']})", "confirm them before a long build")
    if not in_range(p.python + ".0", release["python"]):
        c.error(("python",), f"{p.engine.name} {p.engine.version} requires Python "
                f"{release['python']}, but python is {p.python}",
                "pick a Python version inside that range")
    major = Version(p.cuda.version).major
    if c.kb.cuda(p.cuda.version) is not None and major != release["cuda_major"]:
        newer_ok = [v for v in c.kb.engine_versions(p.engine.name)
                    if c.kb.engine_release(p.engine.name, v)["cuda_major"] == major]  # type: ignore[index]
        alt = f", or {p.engine.name} {newer_ok[-1]}" if newer_ok else ""
        want = [v for v in c.kb.cuda_versions() if Version(v).major == release["cuda_major"]]
        c.error(("cuda", "version"), f"{p.engine.name} {p.engine.version} wheels are built for "
                f"CUDA {release['cuda_major']}.x, but cuda.version is {p.cuda.version}",
                f"use CUDA {want[-1] if want else str(release['cuda_major']) + '.x'}{alt}")
    pin = str(release["torch"])
    if p.engine.torch and Version(p.engine.torch) != Version(pin):
        c.error(("engine", "torch"), f"{p.engine.name}=={p.engine.version} requires "
                f"torch=={pin}, not {p.engine.torch}",
                "remove engine.torch (it is derived) or change engine.version")
        return
    torch_info = c.kb.torch_minor(pin)
    if torch_info is None:
        c.error(("engine", "version"), f"torch {pin} is not in the knowledge base",
                "add its release row to dockergen/data/compat.yaml")
        return
    mm = ".".join(p.cuda.version.split(".")[:2])
    if mm not in torch_info["cuda"]:
        c.error(("cuda", "version"), f"torch {pin} has no wheels for CUDA {mm} "
                f"(download.pytorch.org/whl/cu{mm.replace('.', '')} does not carry it)",
                "use a CUDA version whose major.minor is one of: "
                + ", ".join(torch_info["cuda"]))
    if not in_range(p.python + ".0", torch_info["python"]):
        c.error(("python",), f"torch {pin} supports Python {torch_info['python']}, "
                f"but python is {p.python}", "pick a Python version inside that range")


def check_python_source(c: Context) -> None:
    """python-from-image: the base image's python3 must be the profile's version."""
    if c.p.build.python_from != "image":
        return
    if c.p.cuda.devel_image:
        return  # OS unknown; the build-base stage asserts the version itself
    os_python = c.kb.os_python(c.p.cuda.os)
    if os_python != c.p.python:
        c.error(("build", "python_from"), f"{c.p.cuda.os} ships Python {os_python}, "
                f"but python is {c.p.python}",
                f"use build.python_from: uv, or python: \"{os_python}\"")


def check_flash_attn(c: Context) -> None:
    """fa2-*: version, GPUs, archs, toolkit, Python, torch and build memory."""
    p, fa = c.p, c.kb.fa
    if p.flash_attn.build == "none":
        return
    version = Version(p.flash_attn.version)
    if p.flash_attn.version not in fa["releases"]:
        c.error(("flash_attn", "version"), f"flash-attn {p.flash_attn.version} is not in the "
                "knowledge base", "use one of: " + ", ".join(fa["releases"]))
        return
    old = [t for t in c.targets if cc_tuple(t.cc) < cc_tuple(fa["min_cc"])]
    for t in old:
        c.error(("gpu", "targets"), f"FlashAttention-2 needs compute capability >= "
                f"{fa['min_cc']} (Ampere or newer), but gpu.targets includes {_describe(t)}",
                f"set flash_attn.build: none, or drop {t.given}")
    if old:
        return
    unmapped = [t for t in c.targets if fa_arch_of(t.cc) is None]
    for t in unmapped:
        c.error(("gpu", "targets"), f"released flash-attn has no build for compute "
                f"capability {t.cc} ({_describe(t)})",
                f"set flash_attn.build: none, or drop {t.given}")
    archs: set[str] = {a for t in c.targets if (a := fa_arch_of(t.cc)) is not None}
    if version < Version(fa["archs_env_since"]):
        beyond = sorted(a for a in archs if a not in ("80", "90"))
        if beyond:
            c.error(("flash_attn", "version"), f"flash-attn {version} always builds sm_80 and "
                    f"sm_90 only and cannot build {', '.join(beyond)}",
                    f"use flash-attn >= {fa['archs_env_since']}")
        else:
            c.warn(("flash_attn", "version"), f"flash-attn {version} ignores "
                   f"FLASH_ATTN_CUDA_ARCHS (added in {fa['archs_env_since']}) and always "
                   "builds sm_80 and sm_90", f"use flash-attn >= {fa['archs_env_since']} to "
                   "build only the targets' archs")
    cuda = Version(p.cuda.version)
    if cuda < Version(fa["nvcc_min"]):
        c.error(("cuda", "version"), f"flash-attn needs nvcc >= {fa['nvcc_min']}",
                f"use CUDA >= {fa['nvcc_min']}")
    for arch in sorted(archs, key=int):
        need = fa["arch_min_nvcc"][arch]
        if cuda < Version(need):  # flash-attn would silently skip it
            c.error(("cuda", "version"), f"flash-attn skips arch {arch} without an error when "
                    f"nvcc < {need}; CUDA {p.cuda.version} would ship no kernels for it",
                    f"use CUDA >= {need}")
    if not in_range(p.python + ".0", fa["python"]):
        c.error(("python",), f"flash-attn {version} requires Python {fa['python']}",
                "pick a newer Python")
    pin = torch_pin(p, c.kb)
    if pin and Version(pin) < Version(fa["torch_min"]):
        c.error(("engine", "version"), f"flash-attn {version} needs torch >= {fa['torch_min']},"
                f" but the image gets torch {pin}", "use a newer engine release")
    jobs = p.flash_attn.max_jobs
    need_per_job = fa["job_gib"]
    if isinstance(jobs, int) and jobs * need_per_job > p.build.memory_gib:
        c.error(("flash_attn", "max_jobs"), f"{jobs} jobs need about {jobs * need_per_job} GiB "
                f"({need_per_job} GiB per flash-attn compile job at NVCC_THREADS=4), but "
                f"build.memory_gib is {p.build.memory_gib}",
                f"use max_jobs: auto (= {max(1, p.build.memory_gib // need_per_job)}) or "
                "raise build.memory_gib")
    if p.build.memory_gib < need_per_job:
        c.warn(("build", "memory_gib"), f"{p.build.memory_gib} GiB is below the ~"
               f"{need_per_job} GiB one flash-attn compile job can peak at",
               "expect the OOM killer; build on a host with more memory")
    if p.engine.name == "vllm":
        c.warn(("flash_attn", "build"), "vLLM's own attention uses its bundled "
               "vllm-flash-attn, not this package; this FlashAttention-2 build serves other "
               "code in the image (e.g. transformers attn_implementation=\"flash_attention_2\")",
               "set flash_attn.build: none if nothing else needs it")


def check_quantization(c: Context) -> None:
    """fp8-w8a8, trtllm-fp8, int4-awq, bf16-cc, kv-cache-dtype."""
    p = c.p
    for kind, value, path in (("quantization", p.quantization.weights, ("quantization",
                                                                       "weights")),
                              ("kv_cache", p.quantization.kv_cache, ("quantization",
                                                                    "kv_cache"))):
        entry = c.kb.quant(p.engine.name, kind, value)
        if entry is None:
            known = ", ".join(c.kb.engine(p.engine.name)[kind])
            c.error(path, f"{p.engine.name} has no {value} "
                    f"{'KV cache' if kind == 'kv_cache' else 'weight quantization'}",
                    f"use one of: {known}")
            continue
        too_old = [t for t in c.targets if cc_tuple(t.cc) < cc_tuple(entry["min_cc"])]
        if too_old:
            c.error(path, f"{value} needs compute capability >= {entry['min_cc']} on "
                    f"{p.engine.name}, but gpu.targets includes {_list(too_old)}",
                    _quant_fix(kind, value, too_old))
            continue
        fast = entry.get("fast_cc")
        slow = [t for t in c.targets if fast and cc_tuple(t.cc) < cc_tuple(fast)]
        if slow:
            what = ("runs weight-only (W8A16 FP8-Marlin): memory savings, no FP8 speedup"
                    if kind == "quantization" else
                    "is stored in fp8 but attention runs without FP8 kernels")
            c.warn(path, f"{value} on {_list(slow)} {what} (FP8 compute needs compute "
                   f"capability >= {fast})", "expected on Ampere; use bf16 for full speed")


def _quant_fix(kind: str, value: str, too_old: list[GpuTarget]) -> str:
    drop = " or ".join(t.given for t in too_old)
    if kind == "kv_cache":
        return f"use kv_cache: auto, or drop {drop}"
    alt = "bf16 or int8" if value == "fp8" else "fp16"
    return f"use {alt}, or drop {drop}"


def check_serving(c: Context) -> None:
    """vllm-batched-tokens: what vLLM's SchedulerConfig would reject at start-up."""
    s = c.p.serving
    if s.max_num_batched_tokens is not None:
        if (s.enable_chunked_prefill is False and s.max_model_len is not None
                and s.max_num_batched_tokens < s.max_model_len):
            c.error(("serving", "max_num_batched_tokens"), f"{s.max_num_batched_tokens} is "
                    f"below max_model_len ({s.max_model_len}) with chunked prefill disabled; "
                    "the server refuses to start",
                    "raise it to >= max_model_len or enable chunked prefill")
        if s.max_num_seqs is not None and s.max_num_batched_tokens < s.max_num_seqs:
            c.error(("serving", "max_num_batched_tokens"), f"{s.max_num_batched_tokens} is "
                    f"below max_num_seqs ({s.max_num_seqs}); the server refuses to start",
                    "raise max_num_batched_tokens or lower max_num_seqs")


def check_tags(c: Context) -> None:
    """image-tags: tag templates use known placeholders and give valid tags."""
    values = tag_values(c.p)
    for i, template in enumerate(c.p.image.tags):
        names = re.findall(r"{([^{}]*)}", template)
        unknown = [n for n in names if n not in values]
        if unknown or template.count("{") != len(names) or template.count("}") != len(names):
            c.error(("image", "tags", i), "unknown placeholder "
                    + (repr("{" + unknown[0] + "}") if unknown else "(unbalanced braces)"),
                    "use " + ", ".join("{" + f + "}" for f in TAG_FIELDS))
            continue
        tag = expand_tag(template, values)
        if not _TAG_VALUE.fullmatch(tag):
            c.error(("image", "tags", i), f"gives {tag!r}, which is not a valid image tag",
                    "tags are letters, digits, '_', '.', '-' (at most 128), not starting "
                    "with '.' or '-'")


def expand_tag(template: str, values: dict[str, str]) -> str:
    """Replace ``{field}`` placeholders of a tag template."""
    return re.sub(r"{([^{}]*)}", lambda m: values[m.group(1)], template)


def tag_values(p: Profile) -> dict[str, str]:
    """Values of the placeholders allowed in ``image.tags``."""
    return {
        "name": p.name, "engine.name": p.engine.name, "engine.version": p.engine.version,
        "cuda.version": p.cuda.version,
        "cuda.major_minor": ".".join(p.cuda.version.split(".")[:2]).replace(".", ""),
        "python": p.python, "quantization.weights": p.quantization.weights,
        "quantization.kv_cache": p.quantization.kv_cache,
    }


def check_ca_certificates(c: Context) -> None:
    """ca-certificates: each listed file exists and holds a PEM certificate."""
    base = c.loaded.path.parent
    for i, name in enumerate(c.p.build.ca_certificates):
        path = base / name
        try:
            text = path.read_text(encoding="ascii")
        except FileNotFoundError:
            c.error(("build", "ca_certificates", i), f"{name} does not exist next to "
                    f"{c.loaded.path.name}", "give a path relative to the profile file")
            continue
        except (OSError, UnicodeDecodeError):
            c.error(("build", "ca_certificates", i), f"{name} is not a readable PEM file",
                    "give a PEM certificate (-----BEGIN CERTIFICATE-----)")
            continue
        if "-----BEGIN CERTIFICATE-----" not in text or "PRIVATE KEY" in text:
            c.error(("build", "ca_certificates", i), f"{name} is not a PEM certificate",
                    "give a PEM certificate (-----BEGIN CERTIFICATE-----), never a key")


RULES: tuple[Callable[[Context], None], ...] = (
    check_gpus, check_cuda, check_engine, check_python_source, check_flash_attn,
    check_quantization, check_serving, check_tags, check_ca_certificates,
)


def check(loaded: LoadedProfile, kb: Knowledge) -> Context:
    """Run every rule; the returned context holds all problems and the GPU targets."""
    ctx = Context(loaded, kb)
    for rule in RULES:
        rule(ctx)
    return ctx
