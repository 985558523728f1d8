"""Each command imports only what it needs; the start-up benchmark against hpccm runs.

The time itself is measured (not asserted) by benchmarks/startup_bench.py, side by side
with hpccm; these tests pin down the imports that decide it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

# urllib.request: registry HTTP, which only `lock` and `build` use (it was 7 ms of render)
HEAVY = ("click", "docker", "jinja2", "packaging", "pydantic", "urllib.request", "yaml")
DRIVER = f"""
import contextlib, io, json, sys
from dockergen.cli import main
sys.argv = ["dockergen", *sys.argv[1:]]
with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):
    main()
print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)), file=sys.stderr)
"""


def _imported(*args: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", DRIVER, *args], capture_output=True, text=True,
                          cwd=ROOT, check=True)
    return json.loads(proc.stderr.splitlines()[-1])


@pytest.mark.parametrize(("args", "expected"), [
    (("--help",), ["click"]),
    (("--version",), ["click"]),
    (("profiles",), ["click", "yaml"]),  # it used to load the pydantic model too
    (("validate", "-q", "h100-fp8"), ["click", "packaging", "pydantic", "yaml"]),
    (("explain", "h100-fp8"), ["click", "packaging", "pydantic", "yaml"]),
    (("render", "-q", "h100-fp8"), ["click", "jinja2", "packaging", "pydantic", "yaml"]),
])
def test_each_command_imports_only_what_it_needs(args: tuple[str, ...],
                                                 expected: list[str]) -> None:
    assert _imported(*args) == expected


@pytest.mark.slow
def test_the_startup_benchmark_prints_the_ratio_against_hpccm() -> None:
    proc = subprocess.run([sys.executable, "benchmarks/startup_bench.py", "--repeat", "9"],
                          capture_output=True, text=True, cwd=ROOT, check=True)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("hpccm --recipe (two stages)")
    assert lines[1].startswith("dockergen render h100-fp8")
    assert re.fullmatch(r"floors / hpccm: jinja2\+yaml \d+\.\d\d, \+pydantic\+click \d+\.\d\d, "
                        r"the profile model \d+\.\d\d", lines[-2])
    assert re.fullmatch(r"ratio dockergen render / hpccm: \d+\.\d\d \(goal <= 1\.0\)", lines[-1])


COMPLETION_DRIVER = f"""
import contextlib, json, sys
from dockergen.cli import main
with contextlib.suppress(SystemExit):
    main([])
print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)), file=sys.stderr)
"""


@pytest.mark.parametrize(("words", "completed", "expected"), [
    ("dockergen ren", "plain,render", ["click"]),  # a command name: no model, no registry
    ("dockergen render --mode ", "plain,buildkit\nplain,classic",  # the model's Mode
     ["click", "pydantic"]),
])
def test_completion_imports_only_what_it_needs(words: str, completed: str,
                                               expected: list[str]) -> None:
    env = {**os.environ, "_DOCKERGEN_COMPLETE": "bash_complete", "COMP_WORDS": words,
           "COMP_CWORD": str(len(words.split(" ")) - 1)}
    proc = subprocess.run([sys.executable, "-c", COMPLETION_DRIVER], capture_output=True,
                          text=True, cwd=ROOT, env=env, check=True)
    assert proc.stdout.strip() == completed
    assert json.loads(proc.stderr.splitlines()[-1]) == expected
