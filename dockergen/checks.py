"""The one list of what a profile must pass, whoever owns the check.

A profile is resolved first (:data:`RESOLUTION`: the rules of every component and of the
serving engine, ``dockergen.parts.lineup.for_engine``); then each command that takes a resolved
profile may refuse it for reasons of its own output: the bake file's cache references and
shared tags, observe's settings, the capacity plan of a model the profile names. Each such
check registers here (:data:`CHECKS`) with the commands that refuse on it, and ``validate``
runs them all (:func:`validate_profile`), so a profile that validates is one every command
takes: ``tests/cli/test_validate_agrees.py`` enumerates this registry and runs an example of
each entry through its commands and through ``validate``. ``docs/reference/checks.md`` is
written from it (:func:`checks_reference`), with the resolution rules in detail
(:data:`RULE_DETAILS`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dockergen.errors import Problem, ProfileError

if TYPE_CHECKING:
    from dockergen.outputs.fleet.project import Fleet


@dataclass(frozen=True)
class ProfileCheck:
    """One check every profile must pass: what it refuses and which commands refuse on it."""

    name: str
    commands: tuple[str, ...]  # the commands that refuse a profile this check fails
    what: str
    owner: str  # the module that holds it
    # raises ProfileError with every problem it finds in the resolved profiles (RESOLUTION
    # has none: collect runs it)
    run: Callable[[Fleet], None] | None = None


def _bake(fleet: Fleet) -> None:
    from dockergen.outputs.fleet.project import check_bake

    check_bake(fleet)


def _observe(fleet: Fleet) -> None:
    from dockergen.outputs.observe.generate import monitored, settings_problems

    found = {}
    for member in fleet.members:
        if member.resolution.resolved.profile.observe is not None:
            service = monitored(member.resolution)
            for pr in settings_problems(service.observe, service.where("observe.rate_window")):
                found[str(pr)] = pr
    if found:
        raise ProfileError(list(found.values()))


def _capacity(fleet: Fleet) -> None:
    # a matrix's variants are not planned yet: each may name another model
    first = fleet.members[0].resolution
    if not fleet.matrices and getattr(first.resolved.profile.serving, "hf_config", None):
        from dockergen.outputs.plan import validate_capacity

        validate_capacity(first)


RESOLUTION = ProfileCheck(
    "resolution", ("render", "build", "deploy", "explain", "lock", "plan", "observe"),
    "every rule of the components and the serving engine (listed below): "
    "GPUs, CUDA, the base-image lock, the engine release, its kernels and pins, torch, "
    "Python, FlashAttention-2, quantization, the server's flags and scheduler limits, the "
    "model mount, extra packages, tags, certificates, the Python lock",
    "dockergen.resolve.fold")
CHECKS: tuple[ProfileCheck, ...] = (
    ProfileCheck("bake", ("render -o",),
                 "the bake file's targets: cache references and tags no two targets share",
                 "dockergen.outputs.fleet.project", _bake),
    ProfileCheck("observe", ("observe",),
                 "the observe: section: rate window, budgets and scrape settings a "
                 "Prometheus accepts", "dockergen.outputs.observe.generate", _observe),
    ProfileCheck("capacity", ("plan",),
                 "with serving.hf_config: the model's weights and KV cache fit the GPUs at "
                 "serving.max_model_len, and its heads divide by the tensor-parallel size",
                 "dockergen.outputs.plan", _capacity),
)


@dataclass(frozen=True)
class RuleDetail:
    """What one resolution rule (or a family of them) refuses, in more detail than its
    function's summary: the limits, versions and sources it goes by."""

    rules: str  # the rule names its problems and docstrings use
    kind: str  # error, warning, both, or (derived) for what a rule decides, not refuses
    what: str


# The rules in detail (docs/reference/checks.md shows them; docs/knowledge.md links there).
RULE_DETAILS: tuple[RuleDetail, ...] = (
    RuleDetail("gpu-known", "error",
               "every target is a known GPU or compute capability"),
    RuleDetail("cuda-known, cuda-os", "error",
               "CUDA release known; `nvidia/cuda` image exists for the OS"),
    RuleDetail("gpu-platform", "error",
               "a GPU sold only inside one kind of host runs only images of that host's "
               "platform: GH200, GB200 and GB10 (DGX Spark) need `build.platform: linux/arm64`"),
    RuleDetail("cuda-arch-vs-toolkit", "error",
               "sm_89/90 need CUDA >= 11.8, sm_100/120 >= 12.8, sm_103/121 >= 12.9 (read from "
               "`ptxas --help` of the nvcc wheels), sm_70 gone in 13.0"),
    RuleDetail("engine-release, engine-python, engine-cuda-major", "error",
               "release known; Python in its `Requires-Python`; vLLM >= 0.21 wheels need CUDA 13"),
    RuleDetail("engine-platform", "error",
               "the release publishes a wheel for `build.platform`'s machine (vLLM 0.9.1: "
               "x86_64 only) whose manylinux glibc the base OS has (SGLang's manylinux_2_34 "
               "needs ubuntu22.04 or newer); read per release from the index's files"),
    RuleDetail("closure-wheels", "error",
               "every member of the engine release's whole resolved closure has a wheel for "
               "the profile's Python and wheel platform, where that triple was read "
               "(`closure_wheels`, tools/closure_wheels.py); `lock --python` judges the real "
               "closure the same way online"),
    RuleDetail("engine-kernel-archs", "error",
               "every target runs the GPU code of the compiled library every model loads, read "
               "from the release's wheel for the image's machine (docs/knowledge.md tells "
               "how): SGLang (sglang-kernel's `common_ops`: sm_80 and newer, no PTX) cannot "
               "run on a T4; vLLM >= 0.21 (sm_75 and newer) cannot run on a V100; on aarch64 "
               "vLLM has no sm_75 and sglang-kernel starts at sm_90; a release whose code "
               "was not read warns"),
    RuleDetail("engine-pin-on-pypi", "error / warning",
               "a release pinning a `flashinfer-python` PyPI never carried (vLLM 0.34.0: 0.7.3) "
               "cannot be installed from PyPI; with `build.pip_index_url` (a mirror: PyPI's "
               "own URL, `https://pypi.org/simple` with or without its slash, is PyPI) or "
               "`build.flashinfer_index_url` it warns that the index must carry it"),
    RuleDetail("torch-pin, torch-python", "error",
               "the engine's exact torch pin; Python range of its wheels"),
    RuleDetail("torch-cuda-index", "warning",
               "that torch has a `cuXYZ` index for the CUDA (unverified: download.pytorch.org "
               "cannot be read where the knowledge is checked)"),
    RuleDetail("fa2-file-clash", "error",
               "a FlashAttention-2 source build installs no file a distribution the engine "
               "release requires ships too: flash-attn >= 2.8.3 (and a source of the "
               "repository) carries `flash_attn/cute`, which SGLang's flash-attn-4 ships"),
    RuleDetail("fa2-cxx-std", "error",
               "the C++ standard flash-attn's setup.py forces (`-std=c++17` in every release up "
               "to 2.8.3.post2) must be one the torch headers accept: torch >= 2.14 needs C++20 "
               "(compile probe), so vLLM 0.33.0 + a flash-attn source build is refused, naming "
               "the fixes"),
    RuleDetail("fa2-gpu-min", "error",
               "FlashAttention-2 needs Ampere or newer (no Turing/Volta)"),
    RuleDetail("fa2-arch-values, fa2-arch-needs-version", "error / warning",
               "only 80/90/100/120 are built; < 2.7.3 cannot restrict archs"),
    RuleDetail("fa2-cuda-min", "error",
               "nvcc would silently skip an arch (100/120 need 12.8)"),
    RuleDetail("fa2-memory", "error / warning",
               "`MAX_JOBS × 9 GiB <= build.memory_gib`"),
    RuleDetail("fa2-in-vllm", "warning",
               "vLLM's (and SGLang's) attention does not use this build; shown only where the "
               "profile does not say what does (`flash_attn.purpose`)"),
    RuleDetail("quantization min cc", "error",
               "per engine release (vLLM: `get_min_capability()` of that release's wheel, e.g. "
               "fp8 needs 8.0 up to 0.12.0, 7.5 from 0.14.1); TensorRT-LLM fp8 needs sm >= 89; "
               "bf16 needs cc >= 8.0; an `unverified` floor only warns"),
    RuleDetail("fp8 below 8.9 on vLLM", "warning",
               "runs weight-only (W8A16 FP8-Marlin), no FP8 speedup"),
    RuleDetail("vllm-batched-tokens", "error",
               "what vLLM's scheduler would refuse at start-up"),
    RuleDetail("runtime JIT", "(derived)",
               "vLLM and SGLang run Triton kernels, and Triton builds a C launcher with gcc and "
               'the Python headers at the first launch ("Failed to find C compiler" otherwise): '
               "their runtime keeps `gcc` + `libc6-dev` and the smoke test proves a C extension "
               "compiles and imports; TensorRT-LLM's runtime keeps none (its PyTorch backend's "
               "run-time compilation is unverified)"),
    RuleDetail("python-from-image", "error",
               "the base OS's python3 must be the profile's version"),
    RuleDetail("no-secrets", "error",
               "no credential-like value anywhere in the profile (description, labels, server "
               "args, env values, smoke commands) and no secret-looking env names; checked "
               "before types, so a type error never hides it "
                "(`dockergen/input/credentials.py`). The "
               "shapes are gitleaks' rule set (`dockergen/data/secret_rules.json`: 218 rules of "
               "gitleaks' `config/gitleaks.toml` at the commit it names, MIT, licence beside it;"
               " NVIDIA `nvapi-`, GitLab, Stripe, npm, JWTs, private keys, AWS, the generic `key"
               " = value` rule with its entropy floor and allowlists) plus dockergen's own "
               "(Hugging Face, `user:password@` URLs, `?token=` queries) and four formats "
               "gitleaks lacks (a whole `nvapi-` key of any length, `aws_secret_access_key "
               "VALUE`, `password=VALUE`, a lone private-key header), each with its source. "
               "`python -m dockergen.maint.secret_rules gitleaks.toml --version V --commit C -o "
               "dockergen/data/secret_rules.json` re-derives the file: RE2 patterns converted to"
               " Python `re`, a rule with a nested quantifier skipped (listed with the reason) "
               "and the lazy 50-character lead of gitleaks' keyword rules dropped, so every scan"
               " stays linear; a secret also ends at `:`, `,`, `)`, `/`, `&` (a port, a list, a "
               "URL), not only at a quote or a space; the same scan redacts every message, "
               "warning, log line and build record"),
    RuleDetail("serving-model-mount", "error",
               "a local `serving.model` is a normalised absolute path (no `..`, `.`, `//`, "
               "trailing `/`) whose folder, which `deploy` mounts read-only, neither covers nor "
               "lies in a folder of the image (`/`, `/opt` with the venv and Python, `/usr`, "
               "`/etc`, `/home/app`, `/tmp`, ...); fix: a folder of its own such as "
               "`/models/NAME`"),
    RuleDetail("image-tags, ca-certificates", "error",
               "valid tag templates; PEM certificates exist"),
)


def validate_profile(path: Path, overrides: tuple[str, ...]
                     ) -> tuple[Fleet, list[Problem]] | None:
    """Read and resolve one profile once (raises ProfileError when it does not resolve),
    then run every registered check: the fleet and every problem they found (each check
    runs, so all are reported at once). None: the profile is abstract, and its fields
    passed the checks that apply to them alone."""
    from dockergen.outputs.fleet import adapter
    from dockergen.outputs.fleet.project import collect

    raw = adapter.read_raw(path)
    if adapter.check_abstract(raw, overrides):
        return None
    fleet = collect([raw], overrides, render=False)
    problems: list[Problem] = []
    for check in CHECKS:
        assert check.run is not None
        try:
            check.run(fleet)
        except ProfileError as exc:
            problems.extend(exc.problems)
    return fleet, problems


def rule_docs() -> list[tuple[str, tuple[str, ...], str]]:
    """(rule function, the engines whose profiles it checks, its docstring's summary) of
    every resolution rule, in the order they run (an engine's own version of a rule is
    listed under its own name)."""
    from dockergen.parts.engines import ENGINES
    from dockergen.parts.lineup import for_engine
    from dockergen.resolve.fold import rules

    seen: dict[str, tuple[list[str], str]] = {}
    for engine in ENGINES.values():
        for rule in rules(for_engine(engine.name)):
            name = f"{rule.__module__.removeprefix('dockergen.parts.')}.{rule.__qualname__}"
            summary = " ".join((rule.__doc__ or "").strip().split("\n\n")[0].split())
            seen.setdefault(name, ([], summary))[0].append(engine.name)
    every = len(ENGINES)
    return [(name, () if len(engines) == every else tuple(engines), summary)
            for name, (engines, summary) in seen.items()]


HEADER = ("<!-- Generated by `dockergen reference --checks` from dockergen/checks.py and the "
          "rules' docstrings; do not edit. -->\n")


def checks_reference() -> str:
    """The Markdown page of every check ``validate`` runs (``docs/reference/checks.md``)."""
    lines = [HEADER, "# Checks", "",
             "`dockergen validate` runs every check below; each command refuses a profile "
             "for the checks it names, so a profile that validates is one every command "
             "takes.", "", "| check | refused by | what | where |", "| --- | --- | --- | --- |"]
    for c in (RESOLUTION, *CHECKS):
        lines.append(f"| {c.name} | {', '.join(f'`{x}`' for x in c.commands)} | {c.what} | "
                     f"`{c.owner}` |")
    lines += ["", "## The resolution rules", "",
              "In the order they run for the first engine, with each function's own "
              "summary (in `dockergen/parts/`); the rules another engine does its own "
              "way follow, and a rule not every engine runs names its engines:", "",
              "| rule | engines | checks |", "| --- | --- | --- |"]
    lines += [f"| `{name}` | {', '.join(engines) or 'all'} | {doc.replace('|', '/')} |"
              for name, engines, doc in rule_docs()]
    lines += ["", "## The rules in detail", "",
              "What the rules refuse (an error, or a warning where the profile may go on), "
              "with the limits and sources they go by; the names are those their problems "
              "and the summaries above use:", "",
              "| rule | kind | what |", "| --- | --- | --- |"]
    from dockergen.parts import fields  # its table is the one source of the detail

    details = (*RULE_DETAILS, RuleDetail("field-unused", "warning", fields.described()))
    lines += [f"| {d.rules} | {d.kind} | {d.what} |" for d in details]
    return "\n".join(lines) + "\n"


def is_checks_reference(head: bytes) -> bool:
    """``head`` (the start of a file) is a checks page dockergen wrote."""
    return head.startswith(HEADER.split(";", 1)[0].encode())
