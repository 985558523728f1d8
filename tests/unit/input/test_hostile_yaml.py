"""Hostile YAML: alias bombs and self-referencing aliases are profile errors, fast and small."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile

import pytest

from dockergen.errors import ProfileError
from dockergen.input.yamlsource import parse_yaml
from tests.conftest import ROOT

BOMB = ROOT / "tests" / "data" / "alias-bomb.yaml"


def test_the_bomb_is_the_reported_one() -> None:
    """The 342-byte file of nested aliases from a user's report (9 levels of 9 aliases each)."""
    assert len(BOMB.read_bytes()) == 342
    assert BOMB.read_text().count("*") == 8 * 9


def test_alias_bomb_is_a_profile_error_in_little_cpu_and_memory() -> None:
    """Before the fix this ran for minutes and grew past 1.2 GB."""
    def limit() -> None:  # a runaway expansion dies here instead of eating the machine
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        resource.setrlimit(resource.RLIMIT_CPU, (20, 20))

    # The child's CPU from wait4; its memory from its own VmHWM at exit: ru_maxrss counts
    # the pages it held between fork and exec too, that is the test session's own size
    # (which passed 200 MB as the suite grew), not what validating the bomb took.
    report = ("import atexit, re, runpy, sys; atexit.register(lambda: sys.stderr.write("
              "'VmHWM ' + re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())"
              ".group(1) + '\\n')); sys.argv = ['dockergen', 'validate', sys.argv[1]]; "
              "runpy.run_module('dockergen', run_name='__main__')")
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-c", report, str(BOMB)],
                                stdout=subprocess.DEVNULL, stderr=err, text=True,
                                preexec_fn=limit, cwd=ROOT)
        _, status, after = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read()
    cpu = after.ru_utime + after.ru_stime
    *lines, last = stderr.splitlines()
    assert proc.returncode == 2, stderr
    assert "Traceback" not in stderr
    assert lines[0] == (
        "tests/data/alias-bomb.yaml:5:4: e: the document expands to more than 10000 values "
        "(aliases repeating aliases); write the values out; a profile needs no alias tricks")
    assert cpu < 2.0, f"{cpu:.2f} s of CPU"
    resident = int(last.removeprefix("VmHWM "))
    assert resident < 200 * 1024, f"{resident} KiB resident"  # /proc: KiB


def test_self_referencing_alias_is_a_profile_error() -> None:
    """`&a [*a]` is an endless value; it used to end in a RecursionError traceback."""
    with pytest.raises(ProfileError) as info:
        parse_yaml("name: x\na: &a [1, *a]\n", "p.yaml")
    assert [str(p) for p in info.value.problems] == [
        "p.yaml:2:4: a: an alias refers to the collection that contains it (an endless "
        "value); write the values out; a profile needs no alias tricks"]


def test_ordinary_aliases_still_work() -> None:
    data, _ = parse_yaml("a: &x [1, 2]\nb: *x\n", "p.yaml")
    assert data == {"a": (1, 2), "b": (1, 2)}


def test_nesting_is_capped_below_the_recursion_limit() -> None:
    text = "a: " + "[" * 100 + "]" * 100 + "\n"
    with pytest.raises(ProfileError) as info:
        parse_yaml(text, "p.yaml")
    assert "nested deeper than 64 levels" in str(info.value)
