"""Cold start of dockergen's vLLM image against an upstream-faithful image of the same closure.

What an operator feels on a node that has never seen the image: how many bytes it pulls, how
long the pull takes, how long the server's module takes to import, what the start compiles.
One run builds both images and measures them side by side (needs the provisioned engine and
the anonymous registry of tests/support/registries.py, started here when nothing answers):

- **dockergen**: ``python -m dockergen build PROFILE --push`` with
  ``image.name=localhost:5000/dgbench/vllm`` (or ``--reuse IMAGE``, built before);
- **upstream (uv)**: built here the way vLLM's own ``docker/Dockerfile`` builds its final
  stage: FROM the profile's runtime base image, python3 from apt, uv from PyPI,
  ``uv pip install --system`` as root in one layer, no bytecode. It installs exactly the
  distributions of dockergen's image, every one pinned (read from that image), and the same
  runtime system packages, so only the way the closure is installed differs.

Printed for both, and dockergen / upstream: compressed bytes (the layers of the registry's
manifest) and their media types; a cold pull (median of 2, alternating) into an engine that
holds neither image (both removed, the build cache this run created pruned); start → server
module imported inside ``docker run`` as the image's user (median of 3), with the whole
``docker run``'s wall time; modules compiled from source at each start (``python -v``); the
FlashInfer modules vLLM builds at start-up (sampling) that would JIT for the profile's
archs (loaded with ``FLASHINFER_DISABLE_JIT=1`` and the libcuda stub). Goal: pull + start
<= 0.6x upstream, 0 modules compiled, 0 modules to JIT. Prints numbers; asserts nothing.

At its end (also on error or Ctrl-C) it removes what it created, and only that: its
containers, its images and tags (``localhost:5000/dgbench/*``; ``--keep`` keeps them), the
manifests it pushed to the registry (their blobs stay until the registry's garbage
collection), and the build-cache records that appeared while its own builds ran: another
build meanwhile would have its finished records counted as this run's (and its cache could
hold layers a pull then skips), so it does not start while a build-cache record is in use.
A pull prints the layers it did not download (the base image, which the engine keeps).

Run (the real image: an hour on 2 cores; the defaults are tests/network/test_real_images.py's
overrides of profiles/h100-fp8.yaml and the machine's CA bundle)::

    python benchmarks/coldstart.py [--keep] [--reuse IMAGE]

With the test stand-ins (minutes; `python -m tests.support.standin images` once, then
`python -m tests.support.standin serve --port 0` in another shell prints the index URL; the
upstream image cannot install a FlashAttention built from source)::

    python benchmarks/coldstart.py --profile tests/profiles/standin.yaml --network host \\
        --set build.pip_index_url=URL/simple --set build.torch_index_url=URL \\
        --set flash_attn.build=none
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coldstart_engine import Run, layers, pull, push, repository_of, run_in, stop  # noqa: E402

from dockergen.api import resolve_profile  # noqa: E402
from dockergen.build.daemon import context_tar, split_reference  # noqa: E402
from dockergen.build.daemon.docker import DockerDaemon  # noqa: E402
from dockergen.build.progress import decode_status  # noqa: E402
from dockergen.parts.flashinfer import arch_of  # noqa: E402
from dockergen.resolve.model import Resolved  # noqa: E402
from dockergen.resources import templates_dir  # noqa: E402
from tests.network.test_real_images import HOST_CA, REAL  # noqa: E402
from tests.support.registries import ANON, REGISTRIES  # noqa: E402

PROFILE = ROOT / "profiles" / "h100-fp8.yaml"
NAMES = ("dockergen", "upstream")
# the distributions of the interpreter's own site-packages (the venv's, or where
# `uv pip install --system` puts them), not the distribution's python3 packages
DISTS = ("import importlib.metadata as m, json, sysconfig\n"
         "site = sysconfig.get_paths()['purelib']\n"
         "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions(path=[site])},"
         " sort_keys=True))")
TIMER = "import time; t = time.time(); import {module}; print(time.time() - t)"
# a module compiled from source; one read from bytecode names its .pyc in quotes
COMPILED = re.compile(r"^# code object from /\S+\.py$", re.M)
# the engine's start-up FlashInfer modules when dockergen knows none for its release: vLLM's
# sampler (its dummy sampler run); else those of the resolution (the flashinfer-aot stage)
FLASHINFER = (("sampling", "flashinfer.jit.sampling", "gen_sampling_module"),)
PROBE = """
import importlib, json, os, sys
os.environ["FLASHINFER_DISABLE_JIT"] = "1"
out = {}
try:
    libcuda_stub()
    import torch  # noqa: F401
    stub = ""
except BaseException as exc:
    stub = "driver stub: %s: %s" % (type(exc).__name__, str(exc)[:200])
for name, module, function in json.loads(sys.argv[1]):
    try:
        if stub:
            raise RuntimeError(stub)
        getattr(importlib.import_module(module), function)().build_and_load()
        out[name] = "loaded"
    except BaseException as exc:
        out[name] = "%s: %s" % (type(exc).__name__, (str(exc).splitlines() or [""])[0][:200])
print(json.dumps(out, sort_keys=True))
"""


def dockergen_image(run: Run, args: argparse.Namespace, sets: list[str], work: Path) -> str:
    """Build and push dockergen's image; the reference of its immutable tag."""
    cmd = [sys.executable, "-m", "dockergen", "build", str(args.profile), "--push",
           "--progress", "plain", "-o", str(work / "dockergen"), "--network", args.network,
           *(a for s in (*sets, f"image.name={run.prefix}vllm") for a in ("--set", s))]
    if args.ca_cert:
        cmd += ["--ca-cert", args.ca_cert]
    log = work / "dockergen-build.log"
    print(f"building dockergen's image (log: {log})", flush=True)
    with run.building(), open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            code = proc.wait()
        except BaseException:
            stop(proc)
            raise
    record_file = work / "dockergen" / "build-record.json"
    if code != 0 or not record_file.is_file():
        sys.exit(f"dockergen build failed ({code}):\n" + log.read_text()[-3000:])
    record = json.loads(record_file.read_text())
    for ref, digest in (record.get("pushed") or {}).items():
        if ref.startswith(run.prefix):
            run.manifests.add((repository_of(run, ref)[0], digest))
    return str(record["immutable_tag"])


def reuse(run: Run, image: str) -> str:
    """An image built before: pushed under an alias; its tags come back at the end."""
    alias = f"{run.prefix}vllm:reuse-{run.run_id}"
    run.restore[alias] = [t for t in run.daemon.inspect(image).get("RepoTags") or []
                          if t != alias]
    run.daemon.api.tag(image, *split_reference(alias))
    push(run, alias)
    return alias


def upstream_dockerfile(resolved: Resolved, pins: dict[str, str], ca: bool) -> str:
    """vLLM's docker/Dockerfile final stage, on the profile's runtime base, for ``pins``."""
    env = ("SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt "
           "PIP_CERT=/etc/ssl/certs/ca-certificates.crt " if ca else "")
    apt = sorted({"ca-certificates", "python3", "python3-pip", *resolved.runtime.apt})
    extra = "".join(f" --extra-index-url {i}" for i in resolved.engine.indexes)
    lines = [f"FROM {resolved.runtime.image}", "ARG DEBIAN_FRONTEND=noninteractive"]
    if ca:
        lines.append("COPY host-ca.crt /usr/local/share/ca-certificates/dgbench-extra.crt")
    lines += [
        f"RUN apt-get update && apt-get install -y --no-install-recommends {' '.join(apt)}"
        " && update-ca-certificates && rm -rf /var/lib/apt/lists/*",
        # Debian's python3 is externally managed (PEP 668); vLLM's deadsnakes python is not
        f"RUN {env}python3 -m pip install --no-cache-dir --break-system-packages "
        f"uv=={resolved.base.python.uv_version}",
        "ENV UV_HTTP_TIMEOUT=500 UV_INDEX_STRATEGY=unsafe-best-match UV_LINK_MODE=copy",
        "RUN --mount=type=cache,target=/root/.cache/uv "
        "--mount=type=bind,source=requirements.txt,target=/tmp/requirements.txt "
        f"{env}uv pip install --system --break-system-packages "
        f"--index-url {resolved.main_index}{extra} -r /tmp/requirements.txt"]
    return "\n".join(lines) + "\n"


def upstream_image(run: Run, resolved: Resolved, pins: dict[str, str],
                   args: argparse.Namespace) -> str:
    """Build and push the upstream-faithful image; its reference."""
    files = {"Dockerfile": upstream_dockerfile(resolved, pins, bool(args.ca_cert)).encode(),
             "requirements.txt": "".join(f"{n}=={v}\n" for n, v in sorted(pins.items())).encode()}
    if args.ca_cert:
        files["host-ca.crt"] = Path(args.ca_cert).read_bytes()
    ref = f"{run.prefix}vllm-upstream:{run.run_id}"
    print(f"building the upstream-faithful image ({len(pins)} distributions pinned)", flush=True)
    errors: list[str] = []
    log: list[str] = []
    with run.building():
        for message in run.daemon.build(context_tar(files), buildkit=True, tag=ref,
                                        buildargs={}, target=None, nocache=False, platform=None,
                                        network=args.network):
            if "error" in message:
                errors.append(str(message["error"]))
            if message.get("id") == "moby.buildkit.trace":
                log += [line.msg.decode("utf-8", "replace")
                        for line in decode_status(message["aux"]).logs]
    if errors or run.daemon.image_id(ref) is None:
        sys.exit("the upstream-faithful build failed: " + "; ".join(errors)[-1000:]
                 + "\n" + "".join(log)[-3000:])
    push(run, ref)
    return ref


def dists(run: Run, image: str) -> dict[str, str]:
    code, out, err, _ = run_in(run, image, ["-c", DISTS])
    if code != 0:
        sys.exit(f"cannot list the distributions of {image}: {err[-1000:]}")
    return {str(n): str(v) for n, v in json.loads(out.strip().splitlines()[-1]).items()}


def _canonical(found: dict[str, str]) -> dict[str, str]:
    return {re.sub(r"[-_.]+", "-", n).lower(): v for n, v in found.items()}


def closure(ours: dict[str, str], theirs: dict[str, str]) -> None:
    """Print whether both images hold the same distributions at the same versions."""
    a, b = _canonical(ours), _canonical(theirs)
    diff = sorted((n, a.get(n), b.get(n)) for n in a.keys() | b.keys() if a.get(n) != b.get(n))
    print(f"closure: {len(a)} distributions in dockergen's image, {len(b)} in the upstream "
          f"one; differences (name, dockergen, upstream): {diff or 'none'}", flush=True)


def cold_pulls(run: Run, refs: dict[str, str], sizes: dict[str, list[dict[str, Any]]]
               ) -> tuple[dict[str, list[float]], set[str]]:
    """Remove both images and this run's build cache; pull each twice, alternating; the
    images stay as the last pull left them. Also the images a pull of which found more than
    the base image's one layer in the engine: those pulls were not cold."""
    aliases = dict(run.restore)
    for tag in (t for tags in aliases.values() for t in tags):
        run.daemon.remove_image(tag)
    run.remove_images()
    run.prune_cache(wait=30)
    held = [r for r in refs.values() if run.daemon.image_id(r) is not None]
    if held:
        print(f"note: still in the engine after removal: {held}; the pulls are not cold")
    times: dict[str, list[float]] = {n: [] for n in NAMES}
    warm: set[str] = set()
    order = [*NAMES, *reversed(NAMES)]
    for i, name in enumerate(order):
        seconds, fetched = pull(run, refs[name])
        times[name].append(seconds)
        skipped = [layer for layer in sizes[name] if layer["digest"][7:19] not in fetched]
        print(f"pull {i + 1}: {name} {seconds:.1f} s; layers not downloaded (already in the "
              f"engine): {len(skipped)} of {len(sizes[name])}, "
              f"{sum(x['size'] for x in skipped) / 1e6:.1f} MB", flush=True)
        if len(skipped) > 1:  # the engine keeps the shared base image's layer, no more
            warm.add(name)
        if i < len(NAMES):
            run.daemon.remove_image(refs[name])
    for alias, tags in aliases.items():
        for tag in tags:
            run.daemon.api.tag(alias, *split_reference(tag))
    return times, warm


def starts(run: Run, refs: dict[str, str], module: str) -> dict[str, list[tuple[float, float]]]:
    """(import seconds, whole ``docker run`` seconds) three times each, alternating."""
    out: dict[str, list[tuple[float, float]]] = {n: [] for n in NAMES}
    for i in range(3):
        for name in NAMES if i % 2 == 0 else tuple(reversed(NAMES)):
            code, stdout, err, wall = run_in(run, refs[name], ["-c", TIMER.format(module=module)])
            if code != 0:
                sys.exit(f"import {module} failed in {name}'s image: {err[-2000:]}")
            out[name].append((float(stdout.strip().splitlines()[-1]), wall))
    return out


def compiled(run: Run, ref: str, module: str) -> tuple[int, int]:
    """(modules compiled from source, modules read from bytecode) importing ``module``."""
    _, _, err, _ = run_in(run, ref, ["-v", "-c", f"import {module}"])
    return len(COMPILED.findall(err)), err.count(".pyc'\n")


def flashinfer(run: Run, ref: str, archs: str,
               modules: tuple[tuple[str, str, str], ...]) -> dict[str, str]:
    stub = (templates_dir() / "context" / "driver_stub.py").read_text(encoding="utf-8")
    _, out, err, _ = run_in(run, ref, ["-c", stub + PROBE, json.dumps(modules)],
                            {"FLASHINFER_DISABLE_JIT": "1", "FLASHINFER_CUDA_ARCH_LIST": archs})
    try:
        return dict(json.loads(out.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return {name: f"probe failed: {err.strip()[-200:]}" for name, _, _ in modules}


def _size(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def report(rows: dict[str, dict[str, Any]], engine: str, warm: set[str]) -> None:
    """The issue's table, the ratios and the goals (the pull goal not judged where a pull
    found the image's layers in the engine)."""
    dg, up = rows["dockergen"], rows["upstream"]

    def line(label: str, key: str, fmt: Callable[[Any], str], ratio: bool = True) -> None:
        r = f"{dg[key] / up[key]:.2f}x" if ratio and up[key] else "-"
        print(f"| {label} | {fmt(dg[key])} | {fmt(up[key])} | {r} |")

    print(f"\nengine: Docker {engine}")
    print("| | dockergen | upstream (uv) | dockergen / upstream |\n|---|---|---|---|")
    line("compressed bytes", "bytes", _size)
    line("layer media types", "media", str, ratio=False)
    line("cold pull (median of 2)", "pull", lambda s: f"{s:.1f} s")
    line("start → server module imported (median of 3)", "start", lambda s: f"{s:.2f} s")
    line("whole `docker run` (median of 3)", "wall", lambda s: f"{s:.2f} s")
    line("pull + whole `docker run`", "total", lambda s: f"{s:.1f} s")
    line("modules compiled at each start", "compiled", lambda n: f"{n:,}", ratio=False)
    line("modules read from bytecode", "cached", lambda n: f"{n:,}", ratio=False)
    line("FlashInfer modules that would JIT", "jit", str, ratio=False)
    for name, row in rows.items():
        for module, state in sorted(row["flashinfer"].items()):
            print(f"  {name}: FlashInfer {module}: {state}")
    goals = [("0 modules compiled at start", dg["compiled"] == 0),
             ("0 FlashInfer modules to JIT", dg["jit"] == 0)]
    if warm:
        print(f"goal: pull + start <= 0.6x upstream: not measured (the pulls of "
              f"{', '.join(sorted(warm))} found its layers in the engine: not cold)")
    else:
        goals.insert(0, ("pull + start <= 0.6x upstream", dg["total"] <= 0.6 * up["total"]))
    for goal, met in goals:
        print(f"goal: {goal}: {'met' if met else 'NOT met'}")


def measure(run: Run, args: argparse.Namespace, sets: list[str], work: Path) -> None:
    resolved = resolve_profile(args.profile, tuple(sets))
    if resolved.flash_attn is not None:  # a wheel of dockergen's own stage: on no index
        sys.exit("the upstream-faithful image installs from the index, which has no "
                 "FlashAttention built for this profile: add --set flash_attn.build=none")
    refs = {"dockergen": reuse(run, args.reuse) if args.reuse
            else dockergen_image(run, args, sets, work)}
    # the dockergen build's cache (the engine stage's venv, the flashinfer-aot stage) is
    # pruned before the other build: both builds' caches beside both images do not fit a
    # 100 GB disk (measured: the upstream build ran out of space), and the pulls need it gone
    run.prune_cache(wait=30)
    pins = dists(run, refs["dockergen"])
    refs["upstream"] = upstream_image(run, resolved, pins, args)
    closure(pins, dists(run, refs["upstream"]))
    manifests = {n: layers(run, r) for n, r in refs.items()}
    pulls, warm = cold_pulls(run, refs, manifests)
    started = starts(run, refs, resolved.startup_import or "vllm.entrypoints.cli.serve")
    archs = " ".join(sorted({arch_of(t) for t in resolved.gpus}))
    modules = tuple((m.name, m.spec.partition(":")[0], m.spec.partition(":")[2])
                    for m in resolved.flashinfer_aot.modules) \
        if resolved.flashinfer_aot else FLASHINFER
    rows: dict[str, dict[str, Any]] = {}
    for name, ref in refs.items():
        probe = flashinfer(run, ref, archs, modules)
        done, cached = compiled(run, ref, resolved.startup_import or "vllm.entrypoints.cli.serve")
        pull_s = statistics.median(pulls[name])
        wall = statistics.median(w for _, w in started[name])
        rows[name] = {"bytes": sum(x["size"] for x in manifests[name]),
                      "media": dict(Counter(x["mediaType"].rsplit(".", 1)[-1]
                                            for x in manifests[name])),
                      "pull": pull_s, "start": statistics.median(s for s, _ in started[name]),
                      "wall": wall, "total": pull_s + wall, "compiled": done, "cached": cached,
                      "flashinfer": probe, "jit": sum(v != "loaded" for v in probe.values())}
        print(f"{name}: {ref}; pulls {[round(p, 1) for p in pulls[name]]} s; starts "
              f"{[(round(s, 2), round(w, 2)) for s, w in started[name]]} s (import, docker run)")
    print(f"FlashInfer archs probed: {archs}")
    report(rows, str(run.daemon.api.version().get("Version")), warm)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--profile", type=Path, default=None,
                        help=f"default: {PROFILE.relative_to(ROOT)} with the real-image test's "
                             "overrides (tests/network/test_real_images.py REAL)")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="profile override, passed to dockergen build (repeatable)")
    parser.add_argument("--network", choices=("default", "host"), default="default",
                        help="network of both builds' RUN steps (host: an index on loopback)")
    parser.add_argument("--ca-cert", default=str(HOST_CA) if HOST_CA.is_file() else "",
                        help="CA bundle for both builds ('' for none; default: %(default)s)")
    parser.add_argument("--keep", action="store_true", help="do not remove the images")
    parser.add_argument("--reuse", metavar="IMAGE", help="an image dockergen built before "
                        "from --profile/--set (until its build cache is pruned, a pull finds "
                        "its layers)")
    args = parser.parse_args(argv)
    sets = list(args.set) if args.profile else [*REAL, *args.set]
    args.profile = args.profile or PROFILE
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started with `&`
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    daemon = DockerDaemon(timeout=3600)
    run = Run(daemon, ANON, args.keep)
    run.tags_before = {t for image in daemon.client.images.list() for t in image.tags}
    busy = sum(run.records().values())
    if busy:
        # the containerd image store also shows records that existing images hold as in use,
        # so this is a warning: the pull lines show any layer a pull did not download
        print(f"warning: {busy} build-cache record(s) are in use (another build, or images "
              "that hold them): records this run sees appear are pruned as its own",
              file=sys.stderr)
    anon = REGISTRIES[0]
    anon.ensure("benchmarks/coldstart.py")
    run.started = anon if anon.process is not None else None
    try:
        with tempfile.TemporaryDirectory(prefix="dgbench-") as work:
            measure(run, args, sets, Path(work))
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):  # the clean-up runs to its end
            signal.signal(sig, signal.SIG_IGN)
        print("cleaning up what this run created (Ctrl-C waits for it)", file=sys.stderr)
        run.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
