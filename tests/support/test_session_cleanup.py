"""The test session's clean-up removes what the session created, nothing else.

It pruned the whole build cache and could take any image of whatever engine DOCKER_HOST
pointed at (a developer's own). The engine here belongs to others, so the clean-up runs
against a recording stand-in of docker-py's client surface it uses (images.list/remove,
api.df, api.prune_builds), with the engine's answers shaped as docker-py returns them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.conftest import remove_session_leftovers


@dataclass
class _Image:
    id: str
    tags: list[str]


@dataclass
class _Engine:
    images_now: list[_Image]
    cache_now: list[str]
    removed: list[str] = field(default_factory=list)
    pruned: list[Any] = field(default_factory=list)

    @property
    def images(self) -> _Engine:
        return self

    @property
    def api(self) -> _Engine:
        return self

    def list(self, all: bool = False) -> list[_Image]:  # noqa: A002 - docker-py's name
        return list(self.images_now)

    def remove(self, image: str, force: bool = False) -> None:
        self.removed.append(image)

    def df(self) -> dict[str, Any]:
        return {"BuildCache": [{"ID": i, "InUse": False} for i in self.cache_now]}

    def prune_builds(self, filters: dict[str, Any] | None = None, **kw: Any) -> None:
        import docker.errors

        # as moby answers (dockerd 20.10, measured): one value per filter, or 400
        if filters and any(len(v) != 1 for v in filters.values()):
            raise docker.errors.APIError("400 Client Error: Bad Request (\"failed to prune "
                                         "build cache: filters expect only one value\")")
        self.pruned.append(filters)


def test_only_what_the_session_created_is_removed() -> None:
    engine = _Engine([_Image("sha256:mine", ["me/app:1"]), _Image("sha256:base", ["local/x:1"]),
                      _Image("sha256:new", ["dockergen-test/a:dg-1"])],
                     ["old-cache", "new-cache"])
    remove_session_leftovers(engine, images_before={"sha256:mine"}, cache_before={"old-cache"})
    assert engine.removed == ["sha256:new"]
    assert engine.pruned == [{"id": ["new-cache"]}]  # never a prune without a filter


def test_nothing_new_prunes_nothing() -> None:
    engine = _Engine([_Image("sha256:mine", [])], ["old-cache"])
    remove_session_leftovers(engine, images_before={"sha256:mine"}, cache_before={"old-cache"})
    assert engine.removed == [] and engine.pruned == []


def test_each_new_record_is_pruned_on_its_own() -> None:
    """A list of ids in one filter was refused by the real engine (400), and the whole
    session's build cache (29.7 GB in CI) stayed behind."""
    engine = _Engine([], ["old-cache", "new-a", "new-b"])
    remove_session_leftovers(engine, images_before=set(), cache_before={"old-cache"})
    assert engine.pruned == [{"id": ["new-a"]}, {"id": ["new-b"]}]



def test_the_sessions_tags_on_images_that_were_there_go_and_the_images_stay() -> None:
    """The fleet and lock tests push the stand-in base images under tags of their own; the
    images stayed (they were there before) and so did every tag, run after run."""
    engine = _Engine([_Image("sha256:base", ["local/x:1", "localhost:5000/fleet-1/cuda:rt"]),
                      _Image("sha256:mine", ["me/app:1", "me/app:2"]),
                      _Image("sha256:bare", ["localhost:5001/mirror-2/cuda:devel"])], [])
    remove_session_leftovers(engine, images_before={"sha256:base", "sha256:mine",
                                                    "sha256:bare"},
                             cache_before=set(), tags_before={"local/x:1", "me/app:1",
                                                              "me/app:2"})
    # the image that had no tag keeps its only one: untagging it would delete the image
    assert engine.removed == ["localhost:5000/fleet-1/cuda:rt"]
