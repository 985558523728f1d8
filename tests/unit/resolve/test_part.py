"""The Part contract: parts run after what they read, in their listed order otherwise, and
the fold merges their shares without knowing them."""

from __future__ import annotations

from typing import Any

import pytest

from dockergen.resolve.fold import fold
from dockergen.resolve.model import RuntimeCopy
from dockergen.resolve.part import Contribution, Part, ordered


def _names(parts: list[Part]) -> list[str]:
    return [p.name for p in parts]


def test_parts_that_read_nothing_keep_their_listed_order() -> None:
    listed = [Part("c"), Part("a"), Part("b")]
    assert _names(ordered(listed)) == ["c", "a", "b"]


def test_a_part_runs_after_the_parts_it_reads_and_the_rest_keep_their_order() -> None:
    listed = [Part("engine", reads=("torch", "flash_attn")), Part("cuda"),
              Part("flash_attn", reads=("cuda",)), Part("torch"), Part("image")]
    assert _names(ordered(listed)) == ["cuda", "flash_attn", "torch", "engine", "image"]


@pytest.mark.parametrize(("listed", "says"), [
    ([Part("a", reads=("b",)), Part("b", reads=("a",)), Part("c")],
     "parts read each other in a cycle: a, b"),
    ([Part("a", reads=("nowhere",))], "parts read what no part is: a reads nowhere"),
    ([Part("a"), Part("a")], "parts named twice: a"),
])
def test_an_order_that_cannot_be_kept_names_the_parts(listed: list[Part], says: str) -> None:
    with pytest.raises(ValueError, match=f"^{says}$"):
        ordered(listed)


def test_the_fold_merges_shares_in_the_parts_order() -> None:
    first, second = RuntimeCopy("a", "/a"), RuntimeCopy("b", "/b")
    shares: dict[str, Contribution] = {
        "one": Contribution(value=1, build_apt=("git", "ccache"), runtime_apt=("zstd",),
                            env={"A": "1", "B": "1"}, copies=(second,),
                            labels={"x": "1"}, context_files={"f": b"1"}),
        "two": Contribution(value="two", build_apt=("ccache",), runtime_apt=("curl", "zstd"),
                            env={"B": "2"}, copies=(first,), after_venv=(first,),
                            labels={"x": "2", "y": "2"}, context_files={"g": b"2"}),
    }
    folded = fold(shares)
    values: dict[str, Any] = dict(folded.values)
    assert values == {"one": 1, "two": "two"}
    merged = folded.merged
    assert merged.build_apt == ("ccache", "git") and merged.runtime_apt == ("curl", "zstd")
    assert dict(merged.env) == {"A": "1", "B": "2"}
    assert merged.copies == (second, first) and merged.after_venv == (first,)
    assert dict(merged.labels) == {"x": "2", "y": "2"}
    assert dict(merged.context_files) == {"f": b"1", "g": b"2"}
