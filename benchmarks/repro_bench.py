"""Reproducible digests of the real vLLM image: two clean builds, one digest, or the diff.

Builds ``profiles/h100-fp8.yaml`` (with the real-image test's overrides: the stand-in NVIDIA
base ``local/debian:bookworm``, Python 3.11, torch from the main index; see
tests/network/test_real_images.py ``REAL``) twice with ``dockergen build --no-cache``: every
step runs again, the way "every cache pruned in between" can be had on an engine other
builds share (a whole-cache prune would take theirs; uv's and ccache's cache mounts stay, as
for any user, and hold downloads and compiler outputs, not layers). It prints both image
digests and the seconds each build took; when the digests differ it prints the image
comparer's answer (tests/support/imagediff.py): which file of which layer differs, and how.
Exit status 0 when the digests are equal, 1 when they differ, 2 when a build failed.

Costs: about 10 GB of images and 10+ minutes per build on 2 cores, and the engine's
bandwidth to PyPI; run it on a build host, not beside other engineers' tests. At its end
(also on Ctrl-C) it removes the two images' tags it made (``--keep`` keeps them).

Run (needs the provisioned engine, Docker 28 with the containerd image store, and
``local/debian:bookworm``: ``python -m tests.support.standin images``)::

    python benchmarks/repro_bench.py [--keep] [--set FIELD=VALUE ...]
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.network.test_real_images import HOST_CA, REAL  # noqa: E402
from tests.support import imagediff  # noqa: E402

PROFILE = ROOT / "profiles" / "h100-fp8.yaml"
REPOSITORY = "localhost:5000/repro-bench/vllm"  # never pushed: the name of the local tags


def build(profile: Path, sets: list[str], ca_cert: str, work: Path, n: int) -> tuple[str, float]:
    """(the image id, seconds) of one ``--no-cache`` build; exits 2 with its log tail."""
    cmd = [sys.executable, "-m", "dockergen", "build", str(profile), "--no-cache", "-q",
           "--progress", "plain", "-o", str(work / f"build-{n}"),
           *(a for s in (*sets, f"image.name={REPOSITORY}") for a in ("--set", s))]
    if ca_cert:
        cmd += ["--ca-cert", ca_cert]
    log = work / f"build-{n}.log"
    print(f"build {n}: {' '.join(cmd[2:4])} ... (log: {log})", flush=True)
    started = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=out, text=True,
                              check=False)
    seconds = time.monotonic() - started
    if proc.returncode != 0 or not proc.stdout.split():
        print(f"build {n} failed ({proc.returncode}):\n" + log.read_text()[-3000:],
              file=sys.stderr)
        sys.exit(2)
    return proc.stdout.split()[-1], seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--profile", type=Path, default=None,
                        help=f"default: {PROFILE.relative_to(ROOT)} with the real-image test's "
                             "overrides (tests/network/test_real_images.py REAL)")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="profile override, passed to dockergen build (repeatable)")
    parser.add_argument("--ca-cert", default=str(HOST_CA) if HOST_CA.is_file() else "",
                        help="CA bundle for the builds ('' for none; default: %(default)s)")
    parser.add_argument("--limit", type=int, default=imagediff.MAX_LINES,
                        help="differences printed at most (default: %(default)s)")
    parser.add_argument("--keep", action="store_true", help="keep the two images' tags")
    args = parser.parse_args(argv)
    sets = list(args.set) if args.profile else [*REAL, *args.set]
    profile = args.profile or PROFILE

    import docker

    api = docker.from_env(timeout=3600).api
    first_tag = f"first-{uuid.uuid4().hex[:8]}"
    made: list[str] = []
    try:
        with tempfile.TemporaryDirectory(prefix="repro-bench-") as tmp:
            work = Path(tmp)
            first, first_s = build(profile, sets, args.ca_cert, work, 1)
            api.tag(first, REPOSITORY, first_tag)  # the second build moves the other tags
            made.append(f"{REPOSITORY}:{first_tag}")
            second, second_s = build(profile, sets, args.ca_cert, work, 2)
            made += [t for t in api.inspect_image(second).get("RepoTags") or []
                     if t.startswith(REPOSITORY + ":")]
            print(f"build 1: {first} in {first_s:.0f}s\nbuild 2: {second} in {second_s:.0f}s")
            if first == second:
                print("reproducible: the two builds gave one digest")
                return 0
            print("NOT reproducible; what differs (tests/support/imagediff.py):")
            print(imagediff.report(imagediff.compare_refs(api, made[0], second), args.limit))
            return 1
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    finally:
        if not args.keep:
            for tag in made:
                with contextlib.suppress(docker.errors.APIError):  # gone, or in use: leave it
                    api.remove_image(tag)


if __name__ == "__main__":
    sys.exit(main())
