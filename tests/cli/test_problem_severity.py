"""A problem's severity is an enum (dockergen/errors.py Severity), and `-q` leaves out the
warnings by it: before, the CLI dropped every line whose text ended in "[warning]", so an
error whose message happened to end so was silently hidden."""

from __future__ import annotations

from dockergen.errors import Location, Problem, ProfileError, Severity
from dockergen.outputs.fleet.matrix import Dropped, MatrixError, Point
from tests.conftest import PROFILES, run_cli

WHERE = Location("p.yaml", 3, 1)
# an error quoting text that ends like a warning (a value, a key, a registry's reply)
TRICKY = Problem(WHERE, "serving.model", "no model named x [warning]")
WARNING = Problem(WHERE, "serving.model", "a Hub id", "serve a folder", Severity.WARNING)


def test_quiet_lines_leave_out_warnings_by_severity_not_by_text() -> None:
    exc = ProfileError([TRICKY, WARNING])
    assert exc.lines(warnings=False) == [str(TRICKY)]
    assert exc.lines() == [str(WARNING), str(TRICKY)]  # sorted by position, then text
    assert str(TRICKY).endswith("[warning]") and exc.errors() == 1
    matrix = MatrixError([Dropped(Point("m-a", ()), [TRICKY, WARNING])])
    assert matrix.lines(warnings=False) == [matrix.lines()[0], f"  {TRICKY}"]


def test_severity_values_are_the_words_shown() -> None:
    assert [s.value for s in Severity] == ["error", "warning"]
    assert Problem(WHERE, "f", "m").severity is Severity.ERROR


def test_quiet_keeps_the_errors_and_drops_the_warnings_beside_them() -> None:
    # a Hub model id is a warning; tensor_parallel_size 0 an error
    sets = ("--set", "serving.model=org/model", "--set", "serving.tensor_parallel_size=0")
    loud = run_cli("validate", str(PROFILES / "h100-fp8.yaml"), *sets)
    quiet = run_cli("validate", "-q", str(PROFILES / "h100-fp8.yaml"), *sets)
    assert loud.rc == quiet.rc == 2
    errors = [line for line in loud.err.splitlines() if "[warning]" not in line]
    assert quiet.err.splitlines() == errors
