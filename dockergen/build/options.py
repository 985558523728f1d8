"""What ``dockergen build`` was asked on the command line, and the checks that refuse a value
before anything is rendered or built: build args (no secrets, only declared ARGs), tags,
``--platform`` (judged against the profile's machine), ``--target``, ``--sign`` and
``--ca-cert``. A refused value is a :class:`~dockergen.errors.UsageError`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dockergen import refs as image_refs
from dockergen.errors import (
    OPTION,
    SECRET_NAME,
    Location,
    UsageError,
    holds_secret,
    redact,
    shown_value,
)

if TYPE_CHECKING:
    from dockergen.pipeline import Resolution
    from dockergen.resolve.model import GivenCertificate, Resolved


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
            raise UsageError(f"--build-arg {shown_value(name)}: looks like a secret; build args "
                             "are recorded in the image history; pass secrets at run time")
        if not _ARG_NAME.fullmatch(name):
            raise UsageError(f"--build-arg {shown_value(name)}: not an ARG name; write "
                             "NAME=VALUE with NAME of letters, digits and '_' (e.g. "
                             "--build-arg HTTP_PROXY=http://proxy.example.com:3128)")
        if _CONTROL.search(value):
            raise UsageError(f"--build-arg {name}: the value {shown_value(value)} holds a "
                             "control character (a newline or tab); give it on one line")


def check_declared_args(args: dict[str, str], dockerfile: str) -> None:
    """Every build arg is one the rendered Dockerfile declares (or Docker predefines): an
    undeclared one reaches no instruction and would only change the immutable tag."""
    declared = set(re.findall(r"^ARG\s+([A-Za-z_][A-Za-z0-9_]*)", dockerfile, re.MULTILINE))
    for name in sorted(args):
        if name not in declared | PREDEFINED_ARGS:
            raise UsageError(f"--build-arg {name}: the rendered Dockerfile declares no ARG "
                             f"{name}, so it would change nothing but the tag; remove it "
                             f"(declared: {', '.join(sorted(declared)) or 'none'}; Docker "
                             "also takes HTTP_PROXY, HTTPS_PROXY, NO_PROXY and the other "
                             "predefined proxy args)")


def check_platform(platform: str | None) -> None:
    """``--platform`` is one OS/ARCH[/VARIANT], as the engine parses it, or a list of
    platforms dockergen knows the CPU of (one image index: :mod:`dockergen.build.multiplatform`)."""
    from dockergen.platforms import PlatformError, parse_list

    if platform is None:
        return
    if "," not in platform and not _PLATFORM.fullmatch(platform):
        raise UsageError(f"--platform {shown_value(platform)}: not a platform; write "
                         "OS/ARCH[/VARIANT] in lowercase, e.g. linux/amd64 or linux/arm64/v8")
    try:
        parse_list(platform)
    except PlatformError as exc:
        raise UsageError(f"--platform {shown_value(platform)}: {exc}") from None


def check_tags(tags: tuple[str, ...]) -> None:
    """Refuse malformed ``--tag`` values before anything is built (not after the build)."""
    for ref in tags:
        if redact(ref) != ref:  # a tag lands in the registry, records and every log
            raise UsageError("--tag: looks like a secret (a token or a password); image "
                             "names and tags are public: choose another tag")
        try:
            image_refs.check(ref, digest=False)  # a digest is what a push yields, never a tag
        except image_refs.InvalidReference as exc:
            raise UsageError(f"--tag {ref!r}: not a valid image reference ({exc}); write "
                             "REPOSITORY[:TAG] in lowercase, e.g. "
                             "registry.example.com/llm/vllm:candidate") from None


def check_stage(stage: str | None, resolved: Resolved) -> None:
    """``--target`` must name a stage of the Dockerfile
    (:func:`dockergen.outputs.dockerfile.stages`)."""
    from dockergen.outputs.dockerfile import stages

    names = [s.name for s in stages(resolved)]
    if stage is not None and stage not in names:
        raise UsageError(f"--target {stage!r}: no such stage; the stages are "
                         f"{', '.join(names)}")


def check_options(options: BuildOptions, ca_certs: tuple[Path, ...]) -> None:
    """The command line's own values, refused before anything is rendered."""
    check_build_args(options.build_args)
    check_platform(options.platform)
    check_tags(options.tags)
    if options.push and not options.smoke:
        raise UsageError("--push needs the smoke tests: drop --no-smoke")
    if options.sign_key is not None:  # before anything is built: a push without its signature
        from dockergen.trust import cosign

        if not options.push:
            raise UsageError("--sign signs what is pushed: add --push")
        if options.platform and "," in options.platform:
            # the SBOM reads one image's packages; an index has one per platform
            raise UsageError(f"--sign with --platform {options.platform}: signing an image "
                             "index is not supported yet; build and sign each platform, "
                             "or sign the pushed index with `cosign sign IMAGE@DIGEST`")
        cosign.check_key("--sign-key", options.sign_key)
        cosign.find()
    for cert in ca_certs:  # a FIFO, device or loop is named by the certificate check
        if not os.path.lexists(cert):
            raise UsageError(f"--ca-cert {str(cert)!r}: no such file; give a PEM certificate")


def given_certificates(ca_certs: tuple[Path, ...]) -> tuple[GivenCertificate, ...]:
    """The command line's certificates, beside the profile's (which stay relative to it);
    a problem with one names its --ca-cert, not a field the user never set."""
    from dockergen.resolve.model import GivenCertificate

    return tuple(GivenCertificate(Path(os.path.abspath(c)),
                                  Location(f"--ca-cert {_shown_path(c)}", origin=OPTION))
                 for c in ca_certs)


def _shown_path(path: Path) -> str:
    """A command-line path for a message: as typed, or quoted if it holds control
    characters (a newline would start a line of its own)."""
    text = str(path)
    return text if text.isprintable() else repr(text)


def platforms_judged(res: Resolution, given: str | None) -> str | None:
    """The platform(s) to build, each judged by the rules before anything is built.

    The profile's ``build.platform`` is the machine its facts and checks were read for, so
    a single ``--platform`` must be it; a list must hold it, and the profile is resolved
    again for every other platform of the list (a release without that machine's wheels,
    kernels for the targets or glibc stops here, named)."""
    from dockergen.input.loader import with_overrides
    from dockergen.pipeline import resolution_of
    from dockergen.platforms import canonical, parse_list
    from dockergen.resolve.buildid import engine_platform

    own = res.resolved.profile.build.platform
    wanted = [canonical(w) for w in parse_list(given)] if given else [own]
    other = next((w for w in wanted if w != own), wanted[0])
    fix = (f"build.platform is the machine the profile's facts are read for: set it "
           f"(--set build.platform={other}) or build for {own}"
           if other in ("linux/amd64", "linux/arm64") else
           "dockergen builds linux/amd64 and linux/arm64 images")
    if own not in wanted:
        raise UsageError(f"--platform {given}: the profile's build.platform is {own}; {fix}")
    if len(wanted) > 1 and res.resolved.engine.lock:
        # the Dockerfile installs one lock, resolved for one machine's wheels
        raise UsageError(f"--platform {given}: the profile installs from its hashed Python "
                         f"lock, resolved for {own} only; build each platform from its own "
                         "profile (build.platform), or move the lock aside to build the "
                         "index without it")
    for other in wanted:
        if other != own:
            resolution_of(with_overrides(res.loaded, (f"build.platform={other}",)))
    return engine_platform(given, own)
