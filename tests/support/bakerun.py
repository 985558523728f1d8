"""Run the real `docker buildx bake` on a rendered folder and read its plain progress.

Shared by tests/daemon/test_fleet_build.py and benchmarks/bake_cache_bench.py.

What the generated bake file cannot say for this machine is given at bake time, the way a
CI job would, without touching the generated file:

- build network `host` (the stand-in package index listens on the host's loopback): bake
  takes `network` from a compose file (`build.network`), so a tiny compose file is merged in
  front of docker-bake.hcl (later files win for the other fields), and buildx (0.29) runs
  it only with the entitlement granted: `--allow network.host`.
- `--set *.cache-to=` (:data:`NO_CACHE_EXPORT`) drops the registry cache export where a
  builder refuses it: the `docker` driver on an engine with the classic image store ("Cache
  export is not supported for the docker driver"). CI's engine (Docker 28 with the
  containerd image store) exports it.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

# BuildKit right-aligns the step number when a stage has ten or more steps:
# "[t runtime  2/10]".
_STEP = re.compile(r"^#(\d+) \[(\S+) (\S+) +(\d+)/(\d+)\] (.*)$")
NO_CACHE_EXPORT = "--set=*.cache-to="


def host_network_compose(folder: Path, targets: list[str]) -> Path:
    """A compose file that gives ``targets`` the host network for RUN steps."""
    path = folder / "host-network.compose.yaml"
    lines = ["services:"]
    for name in targets:
        lines += [f"  {name}:", "    build:", "      network: host"]
    path.write_text("\n".join(lines) + "\n")
    return path


def bake(folder: Path, *args: str, compose: Path | None = None,
         timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    """`docker buildx bake` in ``folder`` with plain progress (stdout+stderr in .stdout)."""
    files = (["-f", str(compose), "--allow", "network.host"] if compose else []) + [
        "-f", "docker-bake.hcl"]
    return subprocess.run(["docker", "buildx", "bake", *files, "--progress", "plain", *args],
                          cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout, check=False)


@dataclass(frozen=True)
class Step:
    """One Dockerfile step of one bake target and whether BuildKit took it from cache."""

    target: str
    stage: str
    index: int
    instruction: str
    cached: bool


def steps(log: str) -> list[Step]:
    """The Dockerfile steps of every target (FROM lines left out: they resolve an image,
    they are not work; BuildKit marks them CACHED or DONE depending on the image store).

    A step two targets share is one BuildKit vertex and is listed once, under the target
    that reached it first.
    """
    cached_ids = {m.group(1) for m in re.finditer(r"^#(\d+) CACHED$", log, re.MULTILINE)}
    seen: dict[tuple[str, str, int], Step] = {}
    for line in log.splitlines():
        m = _STEP.match(line)
        if not m or m.group(2) == "internal" or m.group(6).startswith("FROM "):
            continue
        key = (m.group(2), m.group(3), int(m.group(4)))
        seen.setdefault(key, Step(m.group(2), m.group(3), int(m.group(4)), m.group(6),
                                  m.group(1) in cached_ids))
    return sorted(seen.values(), key=lambda s: (s.target, s.stage, s.index))


def cached_ratio(all_steps: list[Step]) -> float:
    """Cached steps / all steps."""
    return sum(s.cached for s in all_steps) / len(all_steps) if all_steps else 0.0
