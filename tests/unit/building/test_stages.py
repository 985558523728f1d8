"""What a build pulls and which stages ``--target`` may name come from the resolved model
(:func:`dockergen.outputs.dockerfile.stages`), never from the rendered text; this test is the
one place
that reads the text, to hold the two together for every shipped profile, matrix variant,
build mode and a base-image lock's digest-pinned ``FROM`` lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dockergen.api import shipped_renderable
from dockergen.outputs.dockerfile import base_images, stages
from dockergen.outputs.fleet.matrix import expand, has_matrix
from dockergen.pipeline import Resolution, resolution
from tests.unit.outputs.test_base_image_pins import PINNED, _locked_profile

_FROM = re.compile(r"^FROM\s+(?:--\S+\s+)*(\S+)\s+AS\s+(\S+)\s*$", re.MULTILINE | re.IGNORECASE)


def _froms(res: Resolution) -> list[tuple[str, str]]:
    """(stage, what it starts from) as the rendered Dockerfile writes them."""
    text = res.files()["Dockerfile"].decode()
    assert len(_FROM.findall(text)) == text.count("\nFROM ")  # every FROM names its stage
    return [(name, base) for base, name in _FROM.findall(text)]


def _resolutions(mode: str) -> list[Resolution]:
    out: list[Resolution] = []
    for path in shipped_renderable():
        if has_matrix(path):
            out += [v.resolution for v in expand(path, (), mode).variants]  # type: ignore[arg-type]
        else:
            out.append(resolution(path, (), mode))  # type: ignore[arg-type]
    return out


@pytest.mark.parametrize("mode", ["buildkit", "classic"])
def test_the_stages_are_the_dockerfiles_from_lines(mode: str) -> None:
    resolutions = _resolutions(mode)
    assert len(resolutions) >= 10  # every shipped profile and the fleet's variants
    for res in resolutions:
        names = [(s.name, s.base) for s in stages(res.resolved)]
        assert names == _froms(res), res.resolved.profile.name
        external = [base for name, base in _froms(res) if base not in dict(names)]
        assert base_images(res.resolved) == list(dict.fromkeys(external))


def test_a_locked_profile_pulls_exactly_its_pinned_from_lines(tmp_path: Path) -> None:
    res = resolution(_locked_profile(tmp_path))
    assert base_images(res.resolved) == PINNED
    assert [(s.name, s.base) for s in stages(res.resolved)] == _froms(res)
