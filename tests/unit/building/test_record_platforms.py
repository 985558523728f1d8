"""A multi-platform build record: each platform's image, read back as written; values a
reader copies into YAML are checked like the rest of the record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dockergen.input.buildrecord import (
    BuildRecord,
    PlatformImage,
    RecordProblem,
    Status,
    read_record,
)

IMAGE_ID = "sha256:" + "a" * 64
DIGEST = "sha256:" + "b" * 64
INDEX = "sha256:" + "c" * 64
TAG = "localhost:5000/t/standin:dg-0123456789ab"


def _record() -> BuildRecord:
    return BuildRecord("standin", "h", "buildkit", (TAG,), TAG, status=Status.PUSHED,
                       pushed={TAG: INDEX},
                       platforms=(PlatformImage("linux/amd64", f"{TAG}-amd64", IMAGE_ID,
                                                DIGEST),
                                  PlatformImage("linux/arm64", f"{TAG}-arm64", IMAGE_ID)))


def test_platforms_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "build-record.json"
    _record().write(path)
    data = json.loads(path.read_text())
    assert data["platforms"][1] == {"platform": "linux/arm64", "tag": f"{TAG}-arm64",
                                    "image_id": IMAGE_ID}
    assert read_record(data) == _record()
    assert read_record(data).pinned_image("localhost:5000/t/standin") == (
        f"localhost:5000/t/standin@{INDEX}")  # deploy pins the index


@pytest.mark.parametrize(("entry", "problem"), [
    ({"digest": "sha256:zz"}, "is not sha256:<64 hex>"),
    ({"platform": "linux/arm64\nx"}, "is not a platform such as linux/arm64"),
    ({"tag": "BAD TAG"}, "is not an image reference"),
    ({"image_id": 7}, "the image_id is not sha256:<64 hex>"),
])
def test_a_platform_entry_dockergen_never_writes_is_refused(entry: dict[str, object],
                                                             problem: str) -> None:
    data = _record().as_json()
    data["platforms"][0].update(entry)
    with pytest.raises(RecordProblem, match=problem):
        read_record(data)
