"""Benchmark: how long rendering takes, in-process and through the CLI.

Prints numbers; it asserts nothing (targets: CLI start + one render < 0.3 s;
in-process < 20 ms per profile). Run: python benchmarks/render_bench.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    t0 = time.perf_counter()
    from dockergen.api import resolve_profile, shipped_single_images
    from dockergen.outputs.dockerfile import render_dockerfile

    import_s = time.perf_counter() - t0
    profiles = shipped_single_images()
    print(f"import dockergen.api: {import_s * 1000:.1f} ms")
    # warm caches (templates, knowledge) once, as a CLI run does
    render_dockerfile(resolve_profile(profiles[0]))
    print(f"{'profile':<18} {'in-process median':>18} {'min':>8}   target < 20 ms")
    for path in profiles:
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            render_dockerfile(resolve_profile(path))
            times.append(time.perf_counter() - t)
        print(f"{path.stem:<18} {statistics.median(times) * 1000:>15.2f} ms "
              f"{min(times) * 1000:>5.2f} ms")

    print(f"{'profile':<18} {'CLI median':>18} {'min':>8}   target < 300 ms")
    for path in profiles:
        times = []
        for _ in range(max(3, args.repeat // 4)):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "dockergen", "render", "-q", str(path)],
                           check=True, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - t)
        print(f"{path.stem:<18} {statistics.median(times) * 1000:>15.1f} ms "
              f"{min(times) * 1000:>5.1f} ms")


if __name__ == "__main__":
    main()
