"""Benchmark: start-up of `dockergen render PROFILE` vs hpccm rendering a two-stage recipe.

Both are whole processes (interpreter start, imports, work, output), run alternately in
one session so machine load hits both alike; prints the medians and the ratio (goal:
<= 1.0). Also prints floors, each a process that only imports, as ratios to hpccm:
- the libraries the product is made of: Jinja (the templates) and PyYAML (the profile
  format), then with pydantic (the profile model) and click (the CLI) as well;
- dockergen's profile model.
A floor above 1.0 means no work inside dockergen can reach the goal while it loads that
library. Run: python benchmarks/startup_bench.py [--repeat N] (needs hpccm:
pip install -e '.[dev]').
"""

from __future__ import annotations

import argparse
import compileall
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RECIPE = HERE / "hpccm_two_stage.py"


def _time(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="runs of each (>= 9)")
    parser.add_argument("--profile", default="h100-fp8")
    args = parser.parse_args()
    bindir = Path(sys.executable).parent
    hpccm = shutil.which("hpccm", path=str(bindir)) or shutil.which("hpccm")
    dockergen = shutil.which("dockergen", path=str(bindir)) or shutil.which("dockergen")
    if not hpccm or not dockergen:
        sys.exit("needs the hpccm and dockergen commands: pip install -e '.[dev]'")
    commands = {
        "hpccm --recipe (two stages)": [hpccm, "--recipe", str(RECIPE)],
        f"dockergen render {args.profile}": [dockergen, "render", "-q", args.profile],
        "floor: python, import the profile model": [sys.executable, "-c",
                                                     "import dockergen.input.profile"],
        "floor: python, import jinja2, yaml": [sys.executable, "-c", "import jinja2, yaml"],
        "floor: ... and pydantic, click": [sys.executable, "-c",
                                           "import jinja2, yaml, pydantic, click"],
        "floor: python -c pass": [sys.executable, "-c", "pass"],
    }
    # Both as installed: pip compiles a wheel's modules to .pyc at install time (hpccm's
    # are), while an editable checkout under PYTHONDONTWRITEBYTECODE=1 would recompile
    # dockergen from source on every run and measure the compiler, not the start-up.
    compileall.compile_dir(str(HERE.parent / "dockergen"), quiet=1)
    for cmd in commands.values():  # warm the page cache
        _time(cmd)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(max(9, args.repeat)):
        for name, cmd in commands.items():  # interleaved: load changes hit every command
            times[name].append(_time(cmd))
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    for name, median in medians.items():
        print(f"{name:<42} median {median * 1000:7.1f} ms  min {min(times[name]) * 1000:7.1f} ms")
    peer, render, model, templates, stack = (medians[name] for name in list(commands)[:5])
    print(f"floors / hpccm: jinja2+yaml {templates / peer:.2f}, "
          f"+pydantic+click {stack / peer:.2f}, the profile model {model / peer:.2f}")
    print(f"ratio dockergen render / hpccm: {render / peer:.2f} (goal <= 1.0)")


if __name__ == "__main__":
    main()
