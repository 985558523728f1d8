"""Smoke tests: prove the built image is right before anything is pushed.

In the spirit of container-structure-test: metadata checks on the image config, command
tests (exit code and output patterns) and file checks in throw-away containers, plus the
built-in checks every dockergen image must pass (versions, arch audit, non-root user,
labels, no compilers, no secrets) and each component's own checks (the imports and
versions of :attr:`~dockergen.resolve.model.Resolved.smoke_imports`, flash-attn's arch audit).
GPU checks run only when asked for (``--gpus``).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from dockergen.build.daemon import ContainerDaemon, DaemonError
from dockergen.errors import SECRET_NAME, SECRET_VALUE, DockergenError, ExitCode
from dockergen.input.buildrecord import SmokeCheck
from dockergen.input.profile import CommandTest
from dockergen.knowledge import facts as knowledge
from dockergen.parts import engine_jit, flash_attn, flashinfer, python, torch
from dockergen.platforms import ARCHES
from dockergen.resolve.model import CommandCheck, Resolved, cc_tuple, last_json_line, last_line
from dockergen.resources import templates_dir


class SmokeFailed(DockergenError, code=ExitCode.SMOKE_FAILED):
    """At least one smoke test failed; nothing was pushed."""


@dataclass
class SmokeReport:
    """All checks of one image."""

    checks: list[SmokeCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every check passed, and there was at least one: zero checks is not a pass."""
        return bool(self.checks) and all(c.ok for c in self.checks)

    def add(self, name: str, ok: bool, detail: str = "") -> None:
        self.checks.append(SmokeCheck(name, ok, detail))


VERSIONS_SCRIPT = """
import importlib, importlib.metadata, json
out = {}
for name, dist, needs_gpu in MODULES:
    try:
        mod = importlib.import_module(name)
        out[name] = getattr(mod, "__version__", None) or importlib.metadata.version(dist)
    except Exception as exc:
        if needs_gpu:  # imports libcuda: on a build host without a GPU, check the install
            out[name] = importlib.metadata.version(dist)
        else:
            out[name] = "IMPORT FAILED: %s" % exc
try:
    import torch
    out["torch.cuda"] = torch.version.cuda
except Exception:
    pass
print(json.dumps(out))
"""


def _python(r: Resolved) -> list[str]:
    return [f"{r.runtime.venv}/bin/python", "-c"]


def default_checks(r: Resolved, inspect: dict[str, Any], history: list[str],
                   report: SmokeReport, gpus: bool = False) -> list[tuple[str, list[str], Any]]:
    """Metadata checks now; return the command checks to run: (name, command, verify)."""
    _check_metadata(r, inspect, history, report)
    uid = r.profile.runtime.uid
    checks: list[tuple[str, list[str], Any]] = [
        _versions_check(r, gpus),
        ("runs as the non-root uid", ["id", "-u"],
         lambda code, out: (code == 0 and out.strip() == str(uid), out.strip())),
    ]
    checks += _component_image_checks(r)
    compilers = _no_compilers_check(r)
    if compilers is not None:
        checks.append(compilers)
    checks += [(c.name, list(c.command), c.verify) for c in flash_attn.smoke_checks(r.flash_attn)]
    audit = image_audit_check(r, str(inspect.get("Architecture") or "") or None)
    checks.append((audit.name, list(audit.command), audit.verify))
    return checks


def _check_metadata(r: Resolved, inspect: dict[str, Any], history: list[str],
                    report: SmokeReport) -> None:
    """Report the checks of the image config: user, labels, entrypoint, port, env, secrets."""
    cfg = inspect.get("Config") or {}
    uid = r.profile.runtime.uid
    report.add("runs as the numeric non-root user", cfg.get("User") == f"{uid}:{uid}",
               f"User is {cfg.get('User')!r}")
    labels = cfg.get("Labels") or {}
    for key, want in (("dockergen.profile.hash", r.profile_hash),
                      ("dockergen.profile.name", r.profile.name),
                      ("dockergen.cuda.archs", r.runtime.labels["dockergen.cuda.archs"]),
                      ("org.opencontainers.image.title", r.profile.name)):
        report.add(f"label {key}", labels.get(key) == want, f"is {labels.get(key)!r}")
    entry = list(r.runtime.entrypoint)
    report.add("entrypoint", cfg.get("Entrypoint") == entry, f"is {cfg.get('Entrypoint')}")
    port = f"{r.profile.serving.port}/tcp"
    report.add(f"exposes {port}", port in (cfg.get("ExposedPorts") or {}))
    env = dict(e.split("=", 1) for e in cfg.get("Env") or [] if "=" in e)
    report.add("NVIDIA_DRIVER_CAPABILITIES=compute,utility",
               env.get("NVIDIA_DRIVER_CAPABILITIES") == "compute,utility")
    leaks = [k for k in env if SECRET_NAME.search(k) or SECRET_VALUE.search(env[k])]
    leaks += [f"label {k}" for k, v in labels.items() if SECRET_VALUE.search(str(v))]
    leaks += ["history step" for h in history if SECRET_VALUE.search(h)]
    report.add("no secret-looking values in env, labels or history", not leaks,
               ", ".join(sorted(set(leaks))))


def _versions_check(r: Resolved, gpus: bool) -> tuple[str, list[str], Any]:
    """The command check that every component's module imports at the profile's version."""
    # (import name, distribution, import needs a GPU driver): each component names its own.
    # An import that loads libcuda (TensorRT-LLM) is checked by its installed version
    # unless the GPU checks run.
    modules = [(i.module, i.dist, i.needs_gpu and not gpus) for i in r.smoke_imports]
    expected = {i.module: i.version for i in r.smoke_imports}

    def verify_versions(code: int, out: str) -> tuple[bool, str]:
        got = last_json_line(out)
        if got is None:
            return False, out[-500:]
        bad = [f"{m} is {got.get(m)!r}, expected {v}" for m, v in expected.items()
               if str(got.get(m) or "").split("+")[0] != v]
        wrong = torch.cuda_problem(r.base.torch, got.get("torch.cuda"))
        if wrong:
            bad.append(wrong)
        return code == 0 and not bad, "; ".join(bad) or "ok"

    script = VERSIONS_SCRIPT.replace("MODULES", repr(modules))
    return ("torch, engine, flash-attn and their kernels import at the profile's versions",
            _python(r) + [script], verify_versions)


def _component_image_checks(r: Resolved) -> list[tuple[str, list[str], Any]]:
    """The command checks torch, python and the engine's parser bring for this image."""
    stub = (templates_dir() / "context" / "driver_stub.py").read_text(encoding="utf-8")
    image_checks = [torch.arch_check(r.base.torch, {t.given: t.cc for t in r.gpus}),
                    python.record_check(knowledge.facts(), r.runtime.venv)]
    if r.runtime.jit_c_compiler:  # the engine compiles at run time: prove it can
        image_checks += [python.jit_check(r.runtime.venv),
                         python.triton_check(r.runtime.venv, stub)]
    if r.serve_parser:
        image_checks.append(serve_parser_check(r, stub))
    if r.flashinfer_aot is not None:
        image_checks.append(flashinfer.load_check(r.flashinfer_aot, stub))
    if r.engine_jit is not None and r.engine_jit.kernels:
        image_checks.append(engine_jit.load_check(r.engine_jit))
    if r.startup_import:
        image_checks.append(python.bytecode_check(r.runtime.venv, r.startup_import))
    return [(c.name, list(c.command), c.verify) for c in image_checks]


def _no_compilers_check(r: Resolved) -> tuple[str, list[str], Any] | None:
    """The command check that no compiler the image may not keep is on its PATH (None:
    runtime.jit_toolchain keeps them all)."""
    if r.profile.runtime.jit_toolchain:
        return None
    kept: tuple[str, ...] = python.C_COMPILER_EXECUTABLES if r.runtime.jit_c_compiler else ()
    if r.engine_jit is not None:  # g++ is the host compiler of the engine's start-up JIT
        kept = (*python.C_COMPILER_EXECUTABLES, *engine_jit.HOST_COMPILER_EXECUTABLES)
    banned = [c for c in python.COMPILER_EXECUTABLES if c not in kept]
    probe = "for c in " + " ".join(banned) + "; do command -v $c; done; true"
    name = ("no compilers in the runtime image" if not kept else
            "no compiler but the C compiler in the runtime image" if r.engine_jit is None else
            "no compiler on PATH but gcc and g++ (the engine's JIT host compiler)")
    return (name, ["sh", "-c", probe],
            lambda code, out: (out.strip() == "", out.strip() or "none"))


def serve_parser_check(r: Resolved, driver_stub: str) -> CommandCheck:
    """The engine release's own argument parser accepts the image's exact ENTRYPOINT and
    CMD (the script of the engine's folder its facts name, ``serve_parser``), as the server
    parses them, before any GPU work; a flag the release lacks fails with the parser's own
    message."""
    script = r.serve_parser
    argv = [*r.runtime.entrypoint[1:], *r.runtime.cmd]
    # the parse sees the lowest target, whose kernels and defaults are the most restricted
    cc = min((t.cc for t in r.gpus), key=cc_tuple)

    def verify(code: int, out: str) -> tuple[bool, str]:
        lines = [line for line in out.strip().splitlines() if line.strip()]
        try:
            got = json.loads(lines[-1])
        except (ValueError, IndexError):
            got = {}
        if code == 0 and isinstance(got, dict) and got.get("parsed") is True:
            return True, f"{r.engine.requirement} parsed {len(argv)} arguments"
        said = [line for line in lines if "error" in line.lower()]
        return False, (said or lines or [f"exit {code}"])[-1][-500:]

    return CommandCheck(f"{r.engine.requirement}'s own parser accepts the image's command",
                        (f"{r.runtime.venv}/bin/python", "-c", driver_stub + script, cc,
                         *argv), verify)


def image_audit_check(r: Resolved, arch: str | None = None) -> CommandCheck:
    """The whole-image audit (templates/context/image_audit.py) run in the built image;
    ``arch`` (the image config's ``Architecture``, e.g. ``arm64``): every ELF file must be
    for that CPU (an amd64 wheel in the arm64 image of an index is caught here)."""
    known = ARCHES.get(arch or "")
    script = (templates_dir() / "context" / "image_audit.py").read_text(encoding="utf-8")
    major = r.profile.cuda.version.split(".")[0]
    targets = ",".join(sorted({t.cc for t in r.gpus}, key=cc_tuple))
    roots = [r.runtime.venv] + [c.dst for c in r.runtime.copies
                                if c.dst != r.runtime.venv and c.stage == "build-base"]
    built = []  # kernels the build compiled: audited like any library, and listed
    if r.flashinfer_aot is not None:
        built.append(f"{r.flashinfer_aot.aot_dir}/*.so")
    if r.engine_jit is not None and r.engine_jit.kernels:
        roots.append(r.engine_jit.cache_dir)
        built.append(f"{r.engine_jit.cache_dir}/*.so")

    def verify(code: int, out: str) -> tuple[bool, str]:
        report = last_json_line(out)
        if report is None:
            return False, out[-500:]
        problems = report.get("problems") or []
        summary = (f"{report.get('elf_files')} ELF files, {report.get('cuda_libraries')} with "
                   f"CUDA code")
        kernels = report.get("kernels") or {}
        if kernels:
            summary += "; built here: " + ", ".join(f"{name.removesuffix('.so')} ({code})"
                                                    for name, code in sorted(kernels.items()))
        return code == 0 and report.get("ok") is True, (
            "; ".join(problems[:20]) + (f" (+{len(problems) - 20} more)" if len(problems) > 20
                                        else "") if problems else summary)

    cpu = f" ({known.machine})" if known else ""
    return CommandCheck(f"whole-image audit{cpu}: libraries resolve, link CUDA {major}, carry "
                        f"code for {targets}",
                        (f"{r.runtime.venv}/bin/python", "-c", script, "--cuda-major", major,
                         "--targets", targets,
                         *([f"--machine={known.elf_machine}"] if known else []),
                         *[f"--arch-scope={glob}={','.join(ccs)}" for glob, ccs in r.arch_scopes],
                         *[f"--optional={o['glob']}={','.join(o['missing'])}"
                           for o in knowledge.facts().python["optional_libraries"]],
                         *[f"--kernels-elsewhere={k['glob']}"
                           for k in knowledge.facts().python["kernels_outside_fatbin"]],
                         *[f"--list={glob}" for glob in built], *roots), verify)


def _verify_command(test: CommandTest) -> Any:
    def verify(code: int, out: str) -> tuple[bool, str]:
        problems = []
        if code != test.exit_code:
            problems.append(f"exit code {code}, expected {test.exit_code}")
        problems += [f"output does not match {p!r}" for p in test.expected_output
                     if not re.search(p, out)]
        problems += [f"output matches {p!r}" for p in test.excluded_output if re.search(p, out)]
        return not problems, "; ".join(problems) or "ok"
    return verify


def smoke_test(daemon: ContainerDaemon, image: str, r: Resolved,
               gpus: bool = False) -> SmokeReport:
    """Run every smoke test of a profile against a built image."""
    report = SmokeReport()
    run_id = uuid.uuid4().hex[:12]
    spec = r.profile.smoke
    checks: list[tuple[str, list[str], Any]] = []
    try:
        if spec.defaults:
            checks += default_checks(r, daemon.inspect(image), daemon.history(image), report,
                                     gpus)
        checks += [(t.name, list(t.command), _verify_command(t)) for t in spec.commands]
        for f in spec.files:
            probe = ["sh", "-c", 'test -e "$0"', f.path]
            want = 0 if f.should_exist else 1
            checks.append((f"{f.path} {'exists' if f.should_exist else 'is absent'}", probe,
                           lambda code, out, want=want: (code == want, f"exit {code}")))
        for name, command, verify in checks:
            try:
                code, out = daemon.run(image, command[1:], entrypoint=command[:1],
                                       timeout=spec.timeout_s, run_id=run_id, gpus=gpus)
            except DaemonError as exc:  # the container did not start: a failed check
                report.add(name, False, str(exc))
                continue
            ok, detail = verify(code, out)
            report.add(name, ok, detail)
    finally:
        daemon.remove_containers(run_id)
    return report


FA_GPU_SCRIPT = """
import torch
from flash_attn import flash_attn_func
torch.manual_seed(0)
q, k, v = (torch.randn(2, 256, 8, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
out = flash_attn_func(q, k, v, causal=True)
ref = torch.nn.functional.scaled_dot_product_attention(
    q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True).transpose(1, 2)
err = (out.float() - ref.float()).abs().max().item()
print("max abs error %.5f" % err)
assert err < 2e-2, err
"""


def gpu_checks(daemon: ContainerDaemon, image: str, r: Resolved, report: SmokeReport) -> None:
    """GPU-only checks: flash-attn against torch's reference attention; the server."""
    run_id = uuid.uuid4().hex[:12]
    try:
        if r.flash_attn is not None:
            code, out = daemon.run(image, ["-c", FA_GPU_SCRIPT],
                                   entrypoint=[f"{r.runtime.venv}/bin/python"],
                                   timeout=r.profile.smoke.timeout_s, run_id=run_id, gpus=True)
            report.add("flash-attn matches torch's reference attention on the GPU",
                       code == 0, last_line(out) or f"exit {code}")
        ok, detail = daemon.serve_check(image, r.profile.serving.port,
                                        r.profile.serving.served_model_name
                                        or r.profile.serving.model,
                                        timeout=r.profile.smoke.timeout_s, run_id=run_id,
                                        gpus=True)
        report.add("server answers /health and a one-token completion", ok, detail)
    finally:
        daemon.remove_containers(run_id)
