"""Benchmark `dockergen build` with the test stand-ins (needs tests/infra/provision.sh).

Prints numbers; asserts nothing. Targets: overhead vs a plain BuildKit build <= 1.05;
an engine-version bump rebuilds with the flash-attn stage fully cached; runtime image
<= half the size of the builder stage.

Run: python benchmarks/build_bench.py [--repeat N]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dockergen.build.daemon import context_tar  # noqa: E402
from dockergen.build.daemon.docker import DockerDaemon  # noqa: E402
from dockergen.build.options import BuildOptions  # noqa: E402
from dockergen.build.orchestrate import build_profile  # noqa: E402
from dockergen.pipeline import resolution  # noqa: E402
from tests.support.standin import IndexServer, build_index, ensure_images  # noqa: E402

PROFILE = ROOT / "tests" / "profiles" / "standin.yaml"


def _quiet(_: str) -> None:
    pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    daemon = DockerDaemon()
    ensure_images(daemon.api)
    tmp = Path(tempfile.mkdtemp(prefix="dockergen-bench-"))
    build_index(tmp / "index")
    server = IndexServer(tmp / "index")
    sets = (f"build.pip_index_url={server.url}/simple", f"build.torch_index_url={server.url}")

    def dockergen_build(*extra: str, no_cache: bool = True, target: str | None = None,
                        tag: tuple[str, ...] = ()) -> tuple[float, dict]:  # type: ignore[type-arg]
        t = time.perf_counter()
        options = BuildOptions(no_cache=no_cache, network="host", smoke=False,
                               progress="plain", target=target, tags=tag)
        record = build_profile(PROFILE, (*sets, *extra), options, output=tmp / "ctx",
                               quiet=True, echo=_quiet, out=_quiet)
        return time.perf_counter() - t, record or {}

    def plain_build() -> float:
        files = resolution(PROFILE, sets, "buildkit").files()
        t = time.perf_counter()
        for _ in daemon.build(context_tar(files), buildkit=True, tag="dockergen-bench/plain:1",
                              buildargs={}, target=None, nocache=True, platform=None,
                              network="host"):
            pass
        return time.perf_counter() - t

    import contextlib
    sink = io.StringIO()
    with contextlib.redirect_stderr(sink):
        dockergen_build(no_cache=False)  # warm the base layers and the index
        ours, plain = [], []
        for _ in range(args.repeat):
            ours.append(dockergen_build()[0])
            plain.append(plain_build())
    print(f"cold build (--no-cache), median of {args.repeat}:")
    print(f"  dockergen build      {statistics.median(ours):7.2f} s  {[round(x, 2) for x in ours]}")
    print(f"  plain BuildKit API   {statistics.median(plain):7.2f} s  "
          f"{[round(x, 2) for x in plain]}")
    print(f"  overhead ratio       {statistics.median(ours) / statistics.median(plain):7.3f}"
          "   (target <= 1.05)")

    with contextlib.redirect_stderr(sink):
        cold, _ = dockergen_build("engine.version=0.27.1")
        bump, record = dockergen_build("engine.version=0.30.0", no_cache=False)
    fa_cached = record["cached_by_stage"].get("flash-attn", 0)
    fa_steps = record["steps_by_stage"].get("flash-attn", 0)
    print("engine bump 0.27.1 -> 0.30.0 (same torch pin):")
    print(f"  flash-attn stage     {fa_cached}/{fa_steps} steps cached")
    print(f"  all steps            {record['cached_steps']} cached, "
          f"{record['executed_steps']} executed")
    print(f"  rebuild / cold       {bump:.2f} s / {cold:.2f} s = {bump / cold:.3f}")

    with contextlib.redirect_stderr(sink):
        dockergen_build(no_cache=False, target="flash-attn", tag=("dockergen-bench/builder:1",))
        _, final = dockergen_build(no_cache=False)
    builder_size = daemon.inspect("dockergen-bench/builder:1")["Size"]
    runtime_size = daemon.inspect(final["image_id"])["Size"]
    print("image sizes:")
    print(f"  builder (flash-attn stage) {builder_size / 1e6:8.1f} MB")
    print(f"  runtime                    {runtime_size / 1e6:8.1f} MB")
    print(f"  runtime / builder          {runtime_size / builder_size:8.3f}   (target <= 0.5)")
    server.close()


if __name__ == "__main__":
    main()
