"""Benchmark the generated bake file's cache behaviour with the test stand-ins.

Renders tests/profiles/standin-matrix.yaml (two points) and runs the real
`docker buildx bake --push` into the local registry (needs tests/infra/provision.sh):

1. a cold bake (`--no-cache`): the peer every other time is measured against;
2. the same bake again, nothing changed: cached steps / all steps (target >= 0.95);
3. an engine bump (vLLM 0.27.1 -> 0.30.0, same torch): cached flash-attn steps / all
   flash-attn steps (target 1.0: the multi-hour compile is reused).

Prints numbers; asserts nothing. Registry cache export (cache-to type=registry) is switched
off: this machine's `docker` driver cannot export it (see tests/support/bakerun.py).

Run: python benchmarks/bake_cache_bench.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.bakerun import (  # noqa: E402
    NO_CACHE_EXPORT,
    bake,
    cached_ratio,
    host_network_compose,
    steps,
)
from tests.support.standin import IndexServer, build_index, ensure_images  # noqa: E402

PROFILE = ROOT / "tests" / "profiles" / "standin-matrix.yaml"
NAMES = ["standin-mx-a100", "standin-mx-h100"]


def _render(out: Path, url: str, *extra: str) -> None:
    sets = [f"build.pip_index_url={url}/simple", f"build.torch_index_url={url}", *extra]
    subprocess.run([sys.executable, "-m", "dockergen", "render", "-q", str(PROFILE), "-o",
                    str(out), *[a for s in sets for a in ("--set", s)]], check=True, cwd=ROOT)


def _timed_bake(folder: Path, *args: str) -> tuple[float, list]:  # type: ignore[type-arg]
    compose = host_network_compose(folder, NAMES)
    start = time.perf_counter()
    result = bake(folder, "--push", NO_CACHE_EXPORT, *args, compose=compose)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"bake failed:\n{result.stdout[-3000:]}")
    return elapsed, steps(result.stdout)


def main() -> None:
    import docker

    ensure_images(docker.from_env().api)
    tmp = Path(tempfile.mkdtemp(prefix="dockergen-bake-bench-"))
    build_index(tmp / "index")
    server = IndexServer(tmp / "index")
    try:
        _render(tmp / "out", server.url)
        cold, _ = _timed_bake(tmp / "out", "--no-cache")
        warm, rebake = _timed_bake(tmp / "out")
        _render(tmp / "bumped", server.url, "engine.version=0.30.0")
        bump, bumped = _timed_bake(tmp / "bumped")
    finally:
        server.close()
    flash = [s for s in bumped if s.stage == "flash-attn"]
    print(f"targets: {', '.join(NAMES)} (buildx bake, docker driver)")
    print(f"cold bake --no-cache:       {cold:7.1f} s (peer)")
    print(f"rebake, no change:          {warm:7.1f} s  time ratio {warm / cold:.3f}  "
          f"cached steps {sum(s.cached for s in rebake)}/{len(rebake)} = "
          f"{cached_ratio(rebake):.3f} (target >= 0.95)")
    print(f"engine bump 0.27.1->0.30.0: {bump:7.1f} s  time ratio {bump / cold:.3f}  "
          f"cached flash-attn steps {sum(s.cached for s in flash)}/{len(flash)} = "
          f"{cached_ratio(flash):.3f} (target 1.0); all steps {cached_ratio(bumped):.3f}")


if __name__ == "__main__":
    main()
