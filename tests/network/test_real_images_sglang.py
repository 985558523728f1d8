"""The shipped SGLang image (h100-sglang-fp8) built from the real packages on PyPI.

The same build and overrides as tests/network/test_real_images.py (see its docstring); a module of
its own so that the vLLM image and its build cache are removed (at that module's end) before
this one is built: the disk holds one real image at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from dockergen.resources import templates_dir
from dockergen.smoke import serve_parser_check
from tests.network.test_real_images import RealImage, _assert_checks_passed, _build, _run

pytestmark = [pytest.mark.daemon, pytest.mark.network, pytest.mark.slow]


@pytest.fixture(scope="module")
def sglang_image(docker_client, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealImage]:  # type: ignore[no-untyped-def]
    yield from _build("h100-sglang-fp8.yaml", "sglang", tmp_path_factory.mktemp("real"),
                      docker_client)


def test_the_sglang_image_builds_from_pypi_and_passes_every_check(sglang_image: RealImage
                                                                  ) -> None:
    _assert_checks_passed(sglang_image)


def test_the_sglang_parser_check_fails_on_a_flag_the_release_lacks(sglang_image: RealImage
                                                                   ) -> None:
    runtime = sglang_image.resolved.runtime
    wrong = replace(sglang_image.resolved, runtime=replace(
        runtime, cmd=(*runtime.cmd, "--swap-space", "4")))
    ok, detail = _run(serve_parser_check(wrong, (templates_dir() / "context" /
                                                 "driver_stub.py").read_text()),
                      sglang_image.image)
    assert not ok
    assert "unrecognized arguments: --swap-space 4" in detail, detail
