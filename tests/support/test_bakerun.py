"""The bake-log reader the fleet build test counts steps with: BuildKit's plain progress
lines as buildx 0.13 prints them, padded step numbers included."""

from __future__ import annotations

from tests.support.bakerun import cached_ratio, steps

LOG = """\
#12 [standin-mx-a100 runtime 1/10] FROM localhost:5000/x@sha256:ab
#12 CACHED
#13 [standin-mx-a100 runtime  2/10] COPY etc-hosts /etc/hosts
#13 CACHED
#14 [standin-mx-a100 runtime 10/10] WORKDIR /home/app
#14 DONE 0.0s
#15 [standin-mx-h100 engine 3/3] RUN uv pip install vllm
#15 CACHED
#16 [internal] load metadata
"""


def test_padded_step_numbers_are_read_and_from_lines_left_out() -> None:
    read = steps(LOG)
    assert [(s.target, s.stage, s.index, s.cached) for s in read] == [
        ("standin-mx-a100", "runtime", 2, True),
        ("standin-mx-a100", "runtime", 10, False),
        ("standin-mx-h100", "engine", 3, True)]
    assert cached_ratio(read) == 2 / 3
