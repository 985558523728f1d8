"""``dockergen build``: render, pull bases, build through the Engine API, tag, push, record.

The orchestration is here; every daemon call goes through the
:class:`~dockergen.daemon.ContainerDaemon` protocol (docker-py behind it).
A build counts as done only when the daemon reported the image id; a push only when the
registry confirmed a digest. Failures name the failing step and its Dockerfile line and
show the tail of its log; interruptions and timeouts cancel the build and remove the tags
this run created.
May import: :mod:`dockergen.api`, :mod:`dockergen.pipeline` (the one resolution it builds),
:mod:`dockergen.daemon` (never docker-py itself),
:mod:`dockergen.buildrecord`, :mod:`dockergen.errors`, :mod:`dockergen.loader`,
:mod:`dockergen.layers` (what each layer compression needs),
:mod:`dockergen.model` (the certificates a build is given),
:mod:`dockergen.progress`,
:mod:`dockergen.reproducible` (the epoch and the exporter's timestamp rewrite),
:mod:`dockergen.refs`, :mod:`dockergen.render`, :mod:`dockergen.smoke`, the serving-engine
secret pattern, :mod:`dockergen.trust.attest` and :mod:`dockergen.trust.cosign` (the step
after a push: SBOM, provenance, signatures); :mod:`dockergen.platforms` (what ``--platform``
may name) and :mod:`dockergen.multiplatform` (several platforms: one index) inside functions.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from dockergen import layers, reproducible
from dockergen import refs as image_refs  # `refs` names the tags of a build below
from dockergen.buildid import content_tag
from dockergen.buildrecord import BuildRecord, Status, StepCounts
from dockergen.errors import (
    OPTION,
    SECRET_NAME,
    DockergenError,
    ExitCode,
    Location,
    holds_secret,
    redact,
    shown_value,
)
from dockergen.progress import (
    BuildTracker,
    PlainRenderer,
    StatusUpdate,
    decode_status,
    make_renderer,
)

if TYPE_CHECKING:
    from dockergen.daemon import ContainerDaemon
    from dockergen.loader import Overrides
    from dockergen.model import GivenCertificate
    from dockergen.pipeline import Resolution

LOG_TAIL = 30


class BuildFailed(DockergenError):
    """The build failed; the message names the step, its line and the log tail."""

    exit_code = ExitCode.BUILD_FAILED


class UnsafeInput(DockergenError):
    """A command-line value that must not be used (e.g. a secret in a build arg)."""

    exit_code = ExitCode.USAGE


class BuildTimeout(DockergenError):
    """The build ran past ``--timeout`` and was cancelled."""

    exit_code = ExitCode.TIMEOUT


class BuildInterrupted(DockergenError):
    """Ctrl-C: the build was cancelled."""

    exit_code = ExitCode.INTERRUPTED


@dataclass
class BuildOptions:
    """What the user asked for on the command line."""

    builder: str = "auto"  # auto | buildkit | classic
    tags: tuple[str, ...] = ()
    no_cache: bool = False
    build_args: dict[str, str] = field(default_factory=dict)
    stage: str | None = None  # --target: build up to this Dockerfile stage
    platform: str | None = None
    progress: str = "auto"
    push: bool = False
    timeout: float | None = None
    network: str | None = None  # e.g. "host" for builds that reach a loopback mirror
    pull: bool = False  # re-pull base images that exist locally
    smoke: bool = True
    gpus: bool = False
    # --sign --sign-key KEY: what cosign signs the pushed digest with (None: unsigned)
    sign_key: str | None = None


@dataclass
class BuildPlan:
    """What a build will do (``--dry-run`` prints this)."""

    name: str
    builder: str
    context_files: list[str]
    pulls: list[str]
    tags: list[str]
    build_args: dict[str, str]
    compression: str = "gzip"  # image.compression: the layers BuildKit writes

    def lines(self) -> list[str]:
        out = [f"profile: {self.name}", f"builder: {self.builder}",
               f"layers: {layers.summary(self.compression)}", "context:"]
        out += [f"  {f}" for f in self.context_files]
        out += ["base images to pull (with your docker credentials):"]
        out += [f"  {p}" for p in self.pulls] or ["  (none)"]
        out += ["tags:"] + [f"  {t}" for t in self.tags]
        if self.build_args:
            out += ["build args:"] + [f"  {k}={v}" for k, v in sorted(self.build_args.items())]
        return out


# Build args Docker and BuildKit take without an ARG in the Dockerfile (src: Docker docs,
# "Dockerfile reference", Predefined ARGs and BuildKit built-in build args).
PREDEFINED_ARGS = frozenset({
    "HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "FTP_PROXY", "ftp_proxy",
    "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "BUILDKIT_CACHE_MOUNT_NS",
    "BUILDKIT_CONTEXT_KEEP_GIT_DIR", "BUILDKIT_INLINE_CACHE", "BUILDKIT_MULTI_PLATFORM",
    "BUILDKIT_SANDBOX_HOSTNAME", "SOURCE_DATE_EPOCH"})
_ARG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# OS/ARCH[/VARIANT] as containerd's platforms package parses it (lowercase names)
_PLATFORM = re.compile(r"[a-z0-9]{1,32}/[a-z0-9_]{1,32}(?:/[a-z0-9]{1,32})?")


def check_build_args(args: dict[str, str]) -> None:
    """Refuse build args that look like secrets (they land in the image history), that are
    not ARG names, or whose values hold control characters (a newline printed raw by
    ``--dry-run``, and cut in the build record)."""
    for name, value in args.items():
        if SECRET_NAME.search(name) or redact(value) != value or holds_secret(name):
            raise UnsafeInput(f"--build-arg {shown_value(name)}: looks like a secret; build args "
                              "are recorded in the image history; pass secrets at run time")
        if not _ARG_NAME.fullmatch(name):
            raise UnsafeInput(f"--build-arg {shown_value(name)}: not an ARG name; write "
                              "NAME=VALUE with NAME of letters, digits and '_' (e.g. "
                              "--build-arg HTTP_PROXY=http://proxy.example.com:3128)")
        if _CONTROL.search(value):
            raise UnsafeInput(f"--build-arg {name}: the value {shown_value(value)} holds a control "
                              "character (a newline or tab); give it on one line")


def check_declared_args(args: dict[str, str], dockerfile: str) -> None:
    """Every build arg is one the rendered Dockerfile declares (or Docker predefines): an
    undeclared one reaches no instruction and would only change the immutable tag."""
    declared = set(re.findall(r"^ARG\s+([A-Za-z_][A-Za-z0-9_]*)", dockerfile, re.MULTILINE))
    for name in sorted(args):
        if name not in declared | PREDEFINED_ARGS:
            raise UnsafeInput(f"--build-arg {name}: the rendered Dockerfile declares no ARG "
                              f"{name}, so it would change nothing but the tag; remove it "
                              f"(declared: {', '.join(sorted(declared)) or 'none'}; Docker "
                              "also takes HTTP_PROXY, HTTPS_PROXY, NO_PROXY and the other "
                              "predefined proxy args)")


def check_platform(platform: str | None) -> None:
    """``--platform`` is one OS/ARCH[/VARIANT], as the engine parses it, or a list of
    platforms dockergen knows the CPU of (one image index: :mod:`dockergen.multiplatform`)."""
    from dockergen.platforms import PlatformError, parse_list

    if platform is None:
        return
    if "," not in platform and not _PLATFORM.fullmatch(platform):
        raise UnsafeInput(f"--platform {shown_value(platform)}: not a platform; write "
                          "OS/ARCH[/VARIANT] in lowercase, e.g. linux/amd64 or linux/arm64/v8")
    try:
        parse_list(platform)
    except PlatformError as exc:
        raise UnsafeInput(f"--platform {shown_value(platform)}: {exc}") from None


def check_tags(tags: tuple[str, ...]) -> None:
    """Refuse malformed ``--tag`` values before anything is built (not after the build)."""
    for ref in tags:
        if redact(ref) != ref:  # a tag lands in the registry, records and every log
            raise UnsafeInput("--tag: looks like a secret (a token or a password); image "
                              "names and tags are public: choose another tag")
        try:
            image_refs.check(ref, digest=False)  # a digest is what a push yields, never a tag
        except image_refs.InvalidReference as exc:
            raise UnsafeInput(f"--tag {ref!r}: not a valid image reference ({exc}); write "
                              "REPOSITORY[:TAG] in lowercase, e.g. "
                              "registry.example.com/llm/vllm:candidate") from None


def stages(dockerfile: str) -> list[str]:
    """The named stages of a Dockerfile, in order."""
    return re.findall(r"^FROM\s+(?:--\S+\s+)*\S+\s+AS\s+(\S+)\s*$", dockerfile,
                      re.MULTILINE | re.IGNORECASE)


def check_stage(stage: str | None, dockerfile: str) -> None:
    """``--target`` must name a stage of the rendered Dockerfile."""
    names = stages(dockerfile)
    if stage is not None and stage not in names:
        raise UnsafeInput(f"--target {stage!r}: no such stage; the stages are "
                          f"{', '.join(names)}")


def base_images(dockerfile: str, build_args: dict[str, str]) -> list[str]:
    """The external images a Dockerfile starts from, after ARG defaults and overrides."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    refs: list[str] = []
    for line in dockerfile.splitlines():
        m = re.match(r"ARG\s+([A-Za-z_][A-Za-z0-9_]*)=(\S+)\s*$", line)
        if m and not refs and not stages:
            args[m.group(1)] = m.group(2)
            continue
        m = re.match(r"FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", line, re.IGNORECASE)
        if m:
            ref = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?",
                         lambda v: build_args.get(v.group(1), args.get(v.group(1), "")),
                         m.group(1))
            if ref not in stages and ref != "scratch" and ref not in refs:
                refs.append(ref)
            if m.group(2):
                stages.add(m.group(2))
    return refs


def dockerfile_line(dockerfile: str, step_name: str) -> int | None:
    """The 1-based Dockerfile line of a BuildKit step like ``[engine 2/3] RUN ...``."""
    m = re.match(r"\[([^\] ]+)\s+\d+/\d+\]\s+(.*)$", step_name, re.DOTALL)
    if not m:
        return None
    stage, instruction = m.group(1), " ".join(m.group(2).split())
    lines = dockerfile.splitlines()
    in_stage = False
    i = 0
    while i < len(lines):
        start = i
        text = lines[i]
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1] + " " + lines[i]
        i += 1
        norm = " ".join(text.split())
        if norm.upper().startswith("FROM "):
            in_stage = norm.split()[-1] == stage or norm.split()[1] == stage
            continue
        if in_stage and norm and not norm.startswith("#") and (
                _without_mounts(norm) == _without_mounts(instruction)):
            return start + 1
    return None


def _without_mounts(instruction: str) -> str:
    """An instruction without its ``--mount=`` flags (step names may omit them)."""
    return " ".join(p for p in instruction.split() if not p.startswith("--mount="))


@dataclass(frozen=True)
class BuildResult:
    """The outcome of one build, written into the build record."""

    image_id: str
    counts: StepCounts
    seconds: float


def run_build(daemon: ContainerDaemon, files: dict[str, bytes], plan: BuildPlan,
              options: BuildOptions, log: IO[str], out: IO[str] | None = None) -> BuildResult:
    """Pull bases, build, tag; stream progress; raise a clear error on any failure."""
    from dockergen.daemon import context_tar

    renderer = make_renderer(options.progress, out)
    for ref in plan.pulls:
        if options.pull or daemon.image_id(ref) is None:
            renderer.message(f"pulling {ref}")
            daemon.pull(ref)
    dockerfile = files["Dockerfile"].decode()
    tracker = BuildTracker()
    started = time.monotonic()
    timed_out = threading.Event()
    timer = _deadline(daemon, options.timeout, timed_out)
    buildkit = plan.builder == "buildkit"
    # BuildKit: the epoch and the timestamp rewrite make the digest reproducible
    exporter = (reproducible.exporter(layers.EXPORTER_ATTRS[plan.compression],
                                      daemon.image_store()) if buildkit else None)
    try:
        stream = daemon.build(context_tar(files), buildkit=buildkit, tag=plan.tags[0],
                              buildargs=reproducible.build_args(plan.build_args)
                              if buildkit else plan.build_args,
                              target=options.stage, nocache=options.no_cache,
                              platform=options.platform, network=options.network,
                              exporter=exporter)
        image_id = _follow(stream, buildkit, dockerfile, tracker, renderer, log)
    except KeyboardInterrupt:
        daemon.cancel()
        raise BuildInterrupted("interrupted: the build was cancelled; no image was tagged"
                               ) from None
    except DockergenError:
        raise
    except Exception as exc:  # the connection dropped: our timeout, or the daemon died
        if timed_out.is_set():
            raise BuildTimeout(f"the build ran past --timeout {options.timeout:g}s and was "
                               "cancelled") from None
        raise BuildFailed(f"the build stream broke off: {redact(str(exc))}") from None
    finally:
        if timer:
            timer.cancel()
        renderer.close()
    if timed_out.is_set():
        raise BuildTimeout(f"the build ran past --timeout {options.timeout:g}s and was "
                           "cancelled")
    if image_id is None:
        raise BuildFailed("the Docker engine finished without reporting an image id; see "
                          f"{getattr(log, 'name', 'the build log')} for its last messages")
    _tag(daemon, image_id, plan.tags)
    return BuildResult(image_id, tracker.summary(), round(time.monotonic() - started, 3))


def _deadline(daemon: ContainerDaemon, timeout: float | None, timed_out: threading.Event
              ) -> threading.Timer | None:
    """Cancel the build when ``timeout`` seconds pass (setting ``timed_out``); None: no limit."""
    if not timeout:
        return None

    def expire() -> None:
        timed_out.set()
        daemon.cancel()
    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    return timer


def _follow(stream: Iterable[dict[str, Any]], buildkit: bool, dockerfile: str,
            tracker: BuildTracker, renderer: PlainRenderer, log: IO[str]) -> str | None:
    """Log and show the engine's build messages; the image id it reports, if any. A failed
    step raises :class:`BuildFailed` with its Dockerfile line and last output."""
    classic_step = ""
    classic_tail: list[str] = []
    image_id = None
    for message in stream:
        if message.get("id") == "moby.buildkit.trace":
            update = decode_status(message["aux"])
            events = tracker.apply(update)
            log.write(_log_line(message, update, events))
            for kind, step, line in events:
                renderer.event(kind, step, line)
            continue
        log.write(_log_line(message))
        if message.get("id") == "moby.image.id" or (
                isinstance(message.get("aux"), dict) and "ID" in message["aux"]):
            image_id = message["aux"]["ID"]
        elif "stream" in message:
            text = redact(message["stream"])
            for line in text.splitlines():
                if line.startswith("Step "):
                    classic_step = line
                classic_tail.append(line)
            if not buildkit and text.strip():
                renderer.message(text.rstrip("\n"))  # the classic builder's own lines
        elif "error" in message or "errorDetail" in message:
            tracker.flush()  # the failing step's last output, even without a newline
            raise _failure(message, tracker, dockerfile, classic_step, classic_tail)
    for kind, step, line in tracker.flush():  # output that never got its newline
        renderer.event(kind, step, line)
    return image_id


def _tag(daemon: ContainerDaemon, image_id: str, tags: list[str]) -> None:
    """Give the built image its other tags; on any failure remove every tag this build
    created (the first came with the build), so none of ours is left half-made."""
    created: list[str] = []
    try:
        created.append(tags[0])
        for tag in tags[1:]:
            daemon.tag(image_id, tag)
            created.append(tag)
    except KeyboardInterrupt:
        for tag in created:
            daemon.remove_image(tag)
        raise BuildInterrupted("interrupted: removed the tags this build created") from None
    except DockergenError as exc:  # a tag the daemon refused: leave none of ours behind
        for tag in created:
            daemon.remove_image(tag)
        raise BuildFailed(f"the image was built ({image_id}) but could not be tagged: {exc}; "
                          "removed the tags this build created") from None


def _log_line(message: dict[str, Any], update: StatusUpdate | None = None,
              events: list[tuple[str, Any, str | None]] | None = None) -> str:
    """One build.log line, redacted like every other output.

    BuildKit's trace messages carry their step output base64-encoded in protobuf, where a
    plain redaction would not see a token; they are logged as the tracker's whole output
    lines (a token cut between two chunks is whole, and redacted, there).
    """
    if update is not None:
        message = {"id": message["id"], "aux": {
            "vertexes": [{"digest": v.digest, "name": v.name, "cached": v.cached,
                          "started": v.started, "completed": v.completed, "error": v.error}
                         for v in update.vertexes],
            "lines": [{"vertex": step.digest, "line": line} for kind, step, line in events or []
                      if kind == "log"],
            "warnings": update.warnings}}
    return redact(json.dumps(message, sort_keys=True, ensure_ascii=False)) + "\n"


def _failure(message: dict[str, Any], tracker: BuildTracker, dockerfile: str,
             classic_step: str, classic_tail: list[str]) -> BuildFailed:
    detail = redact(str(message.get("error") or message.get("errorDetail", {}).get("message")))
    step = tracker.failed
    if step is not None:
        line = dockerfile_line(dockerfile, step.name)
        where = f"Dockerfile:{line}: " if line else ""
        tail = step.logs[-LOG_TAIL:] or list(tracker.log_tail)[-LOG_TAIL:]
        name = " ".join(step.name.split())
        name = name if len(name) <= 240 else name[:237] + "..."
        text = f"{where}step #{step.number} {name} failed: {_short(step.error or detail)}"
    else:
        tail = classic_tail[-LOG_TAIL:]
        text = f"{classic_step or 'build'} failed: {detail}"
    if tail:
        text += f"\n--- last {len(tail)} log lines ---\n" + "\n".join(tail)
    return BuildFailed(text)


def _short(error: str) -> str:
    """BuildKit repeats the whole command in its error; keep what matters."""
    m = re.search(r"(exit code: \d+)\s*$", error)
    if m and ("executor failed running" in error or "did not complete successfully" in error):
        return m.group(1)
    return redact(error)


def _shown_path(path: Path) -> str:
    """A command-line path for a message: as typed, or quoted if it holds control
    characters (a newline would start a line of its own)."""
    text = str(path)
    return text if text.isprintable() else repr(text)


def build_profile(path: Path, overrides: Overrides, options: BuildOptions, *,
                  output: Path | None = None, dry_run: bool = False,
                  ca_certs: tuple[Path, ...] = (), quiet: bool = False,
                  echo: Callable[[str], None] = print,
                  out: Callable[[str], None] = print,
                  daemon: ContainerDaemon | None = None) -> BuildRecord | None:
    """Render, build, smoke-test and (optionally) push a profile; return the build record.

    The profile is loaded once and resolved once (in the mode of the builder); ``echo``
    receives progress lines for people, ``out`` the result (digests or image id).
    ``daemon`` defaults to the local Docker engine (tests pass a fake).
    """
    from dockergen.pipeline import resolution, resolution_of

    _check_options(options, ca_certs)
    builder = options.builder
    certificates = _given_certificates(ca_certs)
    res = resolution(path, overrides, "classic" if builder == "classic" else "buildkit",
                     certificates=certificates)
    if builder == "auto" and not dry_run:
        if options.build_args:  # refused before the engine is asked anything
            check_declared_args(options.build_args, res.files()["Dockerfile"].decode())
        daemon = daemon or _connect()
        if not daemon.has_buildkit():  # the same loaded profile, resolved for classic
            res = resolution_of(res.loaded, "classic", certificates=certificates)
    return build(res, options, output=output, dry_run=dry_run, quiet=quiet, echo=echo,
                 out=out, daemon=daemon)


def _connect() -> ContainerDaemon:
    from dockergen.daemon import connect

    return connect()


def build(res: Resolution, options: BuildOptions, *, output: Path | None = None,
          dry_run: bool = False, quiet: bool = False, echo: Callable[[str], None] = print,
          out: Callable[[str], None] = print,
          daemon: ContainerDaemon | None = None) -> BuildRecord | None:
    """Build, smoke-test and (optionally) push a resolved profile's context in the mode it
    was resolved for; return the build record (None for a dry run)."""
    from dockergen.daemon import DaemonError

    builder = res.resolved.mode
    options = replace(options, platform=_platforms_judged(res, options.platform))
    check_stage(options.stage, res.files()["Dockerfile"].decode())
    check_declared_args(options.build_args, res.files()["Dockerfile"].decode())
    if not quiet:
        for warning in res.resolved.warnings:
            echo(str(warning))
    plan, stage, immutable = _plan_of(res, options, builder)
    if dry_run:
        for line in plan.lines():
            out(line)
        return None
    if daemon is None:
        daemon = _connect()
        if builder == "buildkit" and not daemon.has_buildkit():
            raise DaemonError("this Docker engine has no BuildKit; use --builder classic")
    problem = layers.engine_problem(plan.compression, builder, daemon.image_store(),
                                    res.at("image", "compression"))
    if problem is not None:  # before anything is written or built
        raise layers.EngineCannotWrite([problem])
    folder = output or Path("build") / res.name
    if options.platform and "," in options.platform:
        return _build_index(daemon, res, plan, options, stage, immutable, folder, echo, out)
    record = _build_and_record(daemon, res, plan, options, stage, immutable, folder, echo, out)
    if options.push:  # the SBOM and provenance of what was pushed; signed with --sign
        from dockergen.render import RECORD_FILE
        from dockergen.trust.attest import publish

        record = publish(res, res.files(), daemon, record, plan.pulls, folder / RECORD_FILE,
                         options.sign_key, echo)
    return record


def _build_index(daemon: ContainerDaemon, ctx: Resolution, plan: BuildPlan,
                 options: BuildOptions, stage: str | None, immutable: str, folder: Path,
                 echo: Callable[[str], None], out: Callable[[str], None]) -> BuildRecord:
    """Several platforms: this module's one-platform build, once per platform, under
    :mod:`dockergen.multiplatform`, which smoke-tests each and writes the index."""
    from dockergen import multiplatform
    from dockergen.platforms import parse_list

    if stage is not None:
        raise UnsafeInput(f"--target {stage}: an image index is built of final images only; "
                          "build an intermediate stage for one platform")
    refused = multiplatform.problem(tuple(plan.tags), immutable, plan.builder)
    if refused:
        raise UnsafeInput(refused)

    def build_one(platform: str, tag: str, log: IO[str]) -> tuple[str, float]:
        result = run_build(daemon, ctx.files(), replace(plan, tags=[tag]),
                           replace(options, platform=platform), log, sys.stderr)
        return result.image_id, result.seconds

    job = multiplatform.IndexBuild(parse_list(options.platform or ""), plan.builder,
                                   tuple(plan.tags), immutable, options.smoke, options.gpus,
                                   options.push)
    return multiplatform.build_index(daemon, ctx, job, build_one, folder, echo, out)


def _platforms_judged(res: Resolution, given: str | None) -> str | None:
    """The platform(s) to build, each judged by the rules before anything is built.

    The profile's ``build.platform`` is the machine its facts and checks were read for, so
    a single ``--platform`` must be it; a list must hold it, and the profile is resolved
    again for every other platform of the list (a release without that machine's wheels,
    kernels for the targets or glibc stops here, named)."""
    from dockergen.buildid import engine_platform
    from dockergen.loader import with_overrides
    from dockergen.pipeline import resolution_of
    from dockergen.platforms import canonical, parse_list

    own = res.resolved.profile.build.platform
    wanted = [canonical(w) for w in parse_list(given)] if given else [own]
    other = next((w for w in wanted if w != own), wanted[0])
    fix = (f"build.platform is the machine the profile's facts are read for: set it "
           f"(--set build.platform={other}) or build for {own}"
           if other in ("linux/amd64", "linux/arm64") else
           "dockergen builds linux/amd64 and linux/arm64 images")
    if own not in wanted:
        raise UnsafeInput(f"--platform {given}: the profile's build.platform is {own}; {fix}")
    if len(wanted) > 1 and res.resolved.engine.lock:
        # the Dockerfile installs one lock, resolved for one machine's wheels
        raise UnsafeInput(f"--platform {given}: the profile installs from its hashed Python "
                          f"lock, resolved for {own} only; build each platform from its own "
                          "profile (build.platform), or move the lock aside to build the "
                          "index without it")
    for other in wanted:
        if other != own:
            resolution_of(with_overrides(res.loaded, (f"build.platform={other}",)))
    return engine_platform(given, own)


def _check_options(options: BuildOptions, ca_certs: tuple[Path, ...]) -> None:
    """The command line's own values, refused before anything is rendered."""
    check_build_args(options.build_args)
    check_platform(options.platform)
    check_tags(options.tags)
    if options.push and not options.smoke:
        raise UnsafeInput("--push needs the smoke tests: drop --no-smoke")
    if options.sign_key is not None:  # before anything is built: a push without its signature
        from dockergen.trust import cosign

        if not options.push:
            raise UnsafeInput("--sign signs what is pushed: add --push")
        if options.platform and "," in options.platform:
            # the SBOM reads one image's packages; an index has one per platform
            raise UnsafeInput(f"--sign with --platform {options.platform}: signing an image "
                              "index is not supported yet; build and sign each platform, "
                              "or sign the pushed index with `cosign sign IMAGE@DIGEST`")
        cosign.check_key("--sign-key", options.sign_key)
        cosign.find()
    for cert in ca_certs:  # a FIFO, device or loop is named by the certificate check
        if not os.path.lexists(cert):
            raise UnsafeInput(f"--ca-cert {str(cert)!r}: no such file; give a PEM certificate")


def _given_certificates(ca_certs: tuple[Path, ...]) -> tuple[GivenCertificate, ...]:
    """The command line's certificates, beside the profile's (which stay relative to it);
    a problem with one names its --ca-cert, not a field the user never set."""
    from dockergen.model import GivenCertificate

    return tuple(GivenCertificate(Path(os.path.abspath(c)),
                                  Location(f"--ca-cert {_shown_path(c)}", origin=OPTION))
                 for c in ca_certs)


def _plan_of(ctx: Resolution, options: BuildOptions, builder: str
             ) -> tuple[BuildPlan, str | None, str]:
    """(the build plan, the intermediate stage built or None, the content tag)."""
    dockerfile = ctx.files()["Dockerfile"].decode()
    stage = None if options.stage in (None, stages(dockerfile)[-1]) else options.stage
    if stage is not None and options.push:
        raise UnsafeInput(f"--push of the intermediate stage {stage!r} is refused: only the "
                          "final stage is smoke-tested and released; build it without --push")
    image = ctx.resolved.profile.image.name
    immutable = f"{image}:" + content_tag(ctx.files(), mode=builder,
                                          build_args=options.build_args,
                                          stage=stage, platform=options.platform)
    # an intermediate stage is not the release: it never gets the release tags
    refs = [] if stage else [f"{image}:{t}" for t in ctx.resolved.tags]
    refs += [immutable, *options.tags]
    plan = BuildPlan(ctx.name, builder, sorted(ctx.files()),
                     base_images(dockerfile, options.build_args), refs, options.build_args,
                     ctx.resolved.profile.image.compression)
    return plan, stage, immutable


def _build_and_record(daemon: ContainerDaemon, ctx: Resolution, plan: BuildPlan,
                      options: BuildOptions, stage: str | None, immutable: str,
                      folder: Path, echo: Callable[[str], None],
                      out: Callable[[str], None]) -> BuildRecord:
    """Write the context, build, smoke-test and push, keeping the build record current at
    each step; return the record."""
    from dockergen import atomic
    from dockergen.render import LOG_FILE, RECORD_FILE, write_context
    from dockergen.trust.attest import PROVENANCE_FILE, SBOM_FILE

    refs = plan.tags
    # the evidence of a push is written beside the record after it (trust.attest)
    write_context(folder, ctx.files(),
                  later=(RECORD_FILE, LOG_FILE, SBOM_FILE, PROVENANCE_FILE))
    record = BuildRecord(ctx.name, ctx.resolved.profile_hash, plan.builder, tuple(refs),
                         immutable, stage=stage)
    record_path = folder / RECORD_FILE
    with atomic.open_new(folder / LOG_FILE) as log:  # the context was just swapped in
        try:
            result = run_build(daemon, ctx.files(), plan, options, log, sys.stderr)
        except DockergenError as exc:
            replace(record, status=Status.FAILED, error=str(exc).splitlines()[0]).write(record_path)
            raise
    record = replace(record, status=Status.BUILT, image_id=result.image_id,
                     seconds=result.seconds, counts=result.counts)
    echo(f"built {result.image_id} in {result.seconds:.1f}s "
         f"({result.counts.cached_steps} cached, {result.counts.executed_steps} run)")
    if options.smoke and stage is None:  # the smoke tests check the runtime stage
        record = _smoke(daemon, ctx, record, options.gpus, record_path, echo)
    elif stage is not None:
        record = replace(record, smoke_not_run=f"not run: --target {stage} is an "
                                               "intermediate stage")
    if options.push:  # it writes the record before it prints the digests
        return _push(daemon, record, result.image_id, record_path, echo, out)
    # the record first: a reader that went away (a closed stdout) must not cost it
    record.write(record_path)
    out(result.image_id)
    return record


def _smoke(daemon: ContainerDaemon, ctx: Resolution, record: BuildRecord, gpus: bool,
           record_path: Path, echo: Callable[[str], None]) -> BuildRecord:
    """Run the smoke tests; on failure keep only the immutable tag, record and raise."""
    from dockergen.smoke import SmokeFailed, gpu_checks, smoke_test

    report = smoke_test(daemon, record.tags[0], ctx.resolved, gpus=gpus)
    if gpus:
        gpu_checks(daemon, record.tags[0], ctx.resolved, report)
    record = replace(record, smoke=tuple(report.checks))
    for check in report.checks:
        echo(f"smoke {'ok    ' if check.ok else 'FAILED'} {check.name}"
             + ("" if check.ok else f": {check.detail}"))
    if report.ok:
        return record
    keep = record.immutable_tag
    for ref in record.tags:  # keep only the immutable dg-<hash> tag
        if ref != keep:
            daemon.remove_image(ref)
    replace(record, status=Status.SMOKE_FAILED).write(record_path)
    failed = [c.name for c in report.checks if not c.ok]
    raise SmokeFailed(f"{len(failed)} smoke test(s) failed: {'; '.join(failed)}; nothing was "
                      f"pushed; the image stays as {keep} for inspection")


def _push(daemon: ContainerDaemon, record: BuildRecord, image_id: str, record_path: Path,
          echo: Callable[[str], None], out: Callable[[str], None]) -> BuildRecord:
    """Push every tag; record the digests (or the failure) before returning or raising.

    The immutable tag is never moved: if the registry already has it under a digest that is
    not this image's, nothing is pushed (the same inputs built again, e.g. --no-cache, give
    another image; the tag keeps naming the first one).
    """
    from dockergen.daemon import PushError

    immutable = record.immutable_tag
    digests: dict[str, str] = {}
    try:
        existing = daemon.registry_digest(immutable)
        if existing is not None:
            repo = image_refs.parse(immutable).name
            if f"{repo}@{existing}" not in daemon.inspect(image_id).get("RepoDigests", []):
                raise PushError(
                    f"{immutable} already names {existing} in the registry and this build's "
                    f"image {image_id} is another one (the same inputs built again, e.g. with "
                    "--no-cache); nothing was pushed, the immutable tag is never moved; "
                    f"pull {immutable} to use the released image, or change an input")
        for ref in record.tags:
            digests[ref] = daemon.push(ref, on_status=echo)
            echo(f"pushed {ref}@{digests[ref]}")
    except DockergenError as exc:
        failed = replace(record, status=Status.PUSH_FAILED, pushed=digests, error=str(exc))
        failed.write(record_path)
        raise
    record = replace(record, status=Status.PUSHED, pushed=digests)
    record.write(record_path)  # before printing: the digests must never be lost
    for ref, digest in digests.items():
        out(f"{ref}@{digest}")
    return record
