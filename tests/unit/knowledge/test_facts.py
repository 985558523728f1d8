"""One frozen view of the knowledge per resolution: the shipped facts with the profile's
own knowledge files, built by one constructor and handed to every reader.

Before, rules read a process-wide variable set around a resolve, and `outdated` read the
facts by another road: a release a user's knowledge file added validated, yet `outdated`
called it unknown. Here the view every rule gets (the Context's) is the one `outdated`
builds, and nothing can change it while a resolution reads it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from dockergen.input.loader import LoadedProfile, load_profile
from dockergen.knowledge import facts as knowledge
from dockergen.parts.lineup import for_engine
from dockergen.resolve.fold import check
from tests.unit.knowledge.test_user_knowledge import FACTS


def _loaded(tmp_path: Path) -> LoadedProfile:
    (tmp_path / "facts.yaml").write_text(FACTS)  # adds vLLM 0.35.0, flash-attn 2.8.4, ...
    (tmp_path / "p.yaml").write_text("extends: h100-fp8\nname: mine\n"
                                     "knowledge: [facts.yaml]\n")
    return load_profile(tmp_path / "p.yaml")


def test_the_rules_and_outdated_read_one_view_with_the_users_releases(
        tmp_path: Path) -> None:
    loaded = _loaded(tmp_path)
    ctx = check(loaded, for_engine(loaded.profile.engine.name), prove=False)
    known = knowledge.facts(loaded.user_facts)
    assert ctx.facts == known
    assert "0.35.0" in ctx.facts.engine("vllm")["releases"]
    assert "0.35.0" in ctx.facts.of("serving/vllm")["releases"]
    assert "2.8.4" in ctx.facts.flash_attn["releases"]
    assert "1.3.0" in ctx.facts.engine("tensorrt-llm")["releases"]
    # the shipped view is untouched by a profile's files
    assert "0.35.0" not in knowledge.facts().engine("vllm")["releases"]
    assert not hasattr(knowledge, "user_facts") and not hasattr(knowledge, "load_facts")


def test_the_facts_are_read_only_and_a_copy_is_plain(tmp_path: Path) -> None:
    known = knowledge.facts(_loaded(tmp_path).user_facts)
    releases = known.engine("vllm")["releases"]
    with pytest.raises(TypeError, match="read-only"):
        releases["9.9.9"] = {}
    with pytest.raises(TypeError, match="read-only"):
        known.cuda["same_major_packages"].append("x")
    with pytest.raises(AttributeError):
        known.cuda = {}  # type: ignore[misc]
    mine = copy.deepcopy(releases)  # a plain dict to change
    mine["9.9.9"] = {}
    assert type(mine) is dict and "9.9.9" not in releases
    # rows keep the loaded YAML's JSON and repr
    row = releases["0.35.0"]
    assert json.loads(json.dumps(row)) == dict(row) and repr(row) == repr(dict(row))
