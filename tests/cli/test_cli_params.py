"""The CLI's choices are the model's: a choice added to its source appears in the CLI with
no CLI edit, and a hand-written list would drift (dockergen/cli/params.py).

``--set FIELD`` is checked against the profile model before any profile is read, with
the very problem the loader reports for an unknown key.
"""

from __future__ import annotations

import typing

import click
import pytest

from dockergen.cli import cli, params
from dockergen.errors import ProfileError
from dockergen.input.loader import load_profile, set_field_paths, unknown_set_fields
from tests.conftest import PROFILES, run_cli

# Choices still written by hand: their source keeps no list of them to read.
HAND_WRITTEN = {
    ("build", "network"),  # dockergen.build.orchestrate maps it to the engine API's network_mode
    ("observe", "monitor"),  # the two Prometheus Operator kinds dockergen.outputs.observe writes
}


def _choice_options() -> list[tuple[str, click.Option]]:
    return [(name, p) for name, command in cli.commands.items() for p in command.params
            if isinstance(p, click.Option) and isinstance(p.type, click.Choice)]


def test_every_choice_of_the_cli_is_read_from_its_source() -> None:
    written = {(name, p.name) for name, p in _choice_options()
               if not isinstance(p.type, params.SourcedChoice)}
    assert written == HAND_WRITTEN


def test_the_choices_are_those_of_their_sources() -> None:
    from dockergen.build.progress import RENDERERS
    from dockergen.outputs.deploy import FORMATS
    from dockergen.outputs.deploy.facts import OPT_INS
    from dockergen.outputs.observe.generate import Format
    from dockergen.resolve.model import Mode

    types = {(name, p.name): p.type for name, p in _choice_options()}
    assert types["render", "mode"].choices == typing.get_args(Mode)
    assert types["explain", "mode"].choices == typing.get_args(Mode)
    assert types["build", "builder"].choices == ("auto", *typing.get_args(Mode))
    assert types["build", "progress"].choices == ("auto", *RENDERERS)
    assert types["deploy", "fmt"].choices == FORMATS
    assert set(types["deploy", "opt_in"].choices) == set(OPT_INS)
    assert types["observe", "fmt"].choices == typing.get_args(Format)


def test_a_choice_added_to_the_source_appears_in_the_cli(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from dockergen.outputs.deploy import facts

    monkeypatch.setitem(facts.OPT_INS, "new-opt-in", "a test's")
    fresh = params.SourcedChoice(params._opt_ins)
    assert "new-opt-in" in fresh.choices


def _loader_problems(item: str) -> list[str]:
    try:
        load_profile(PROFILES / "h100-fp8.yaml", (item,))
    except ProfileError as exc:
        return [str(p) for p in exc.problems if "unknown key" in p.message]
    return []


@pytest.mark.parametrize("item", [
    "serving.max_modl_len=3", "srving.port=1", "gpu.target=[h100]",
    "cuda.versoin=13.0"])
def test_an_unknown_field_is_the_problem_the_loader_reports(item: str) -> None:
    early = [str(p) for p in unknown_set_fields((item,))]
    assert early and early == _loader_problems(item)


@pytest.mark.parametrize("item", [
    "serving.env.ANY_NAME=x", "serving.max_model_len=8192", "gpu.targets=[h100]",
    "python=3.10", "extends=base", "serving.env={A: b}", "no-equals-sign", "a..b=1"])
def test_known_fields_and_malformed_items_are_left_to_the_loader(item: str) -> None:
    assert unknown_set_fields((item,)) == []


def test_every_unknown_field_is_reported_at_once_before_the_profile_is_read() -> None:
    result = run_cli("validate", "no-such-profile.yaml", "--set", "srving.port=1",
                     "--set", "serving.max_modl_len=3", "--set", "serving.port=8001")
    assert result.rc == 2
    assert result.err.splitlines() == [
        "--set serving.max_modl_len: serving.max_modl_len: unknown key 'max_modl_len' (did "
        "you mean 'max_model_len'?); allowed keys here: " + ", ".join(_serving()),
        "--set srving.port: srving: unknown key 'srving' (did you mean 'serving'?); allowed "
        "keys here: " + ", ".join(_top_level()),
        "dockergen: 2 problem(s); nothing was written"]


def _top_level() -> list[str]:
    from dockergen.input.profile import Profile

    return list(Profile.model_fields)


def _serving() -> list[str]:
    from dockergen.input.software import Serving

    return list(Serving.model_fields)


def test_set_completes_the_field_paths_of_the_model() -> None:
    paths = set_field_paths()
    assert {"serving.max_model_len", "gpu.targets", "python", "matrix.axes"} <= set(paths)
    assert unknown_set_fields(tuple(f"{p}=x" for p in paths)) == []
    item = params.SetItem()
    ctx = click.Context(cli)
    option = next(p for p in cli.commands["render"].params if p.name == "overrides")
    assert [c.value for c in item.shell_complete(ctx, option, "serving.max_m")] == [
        "serving.max_model_len="]
