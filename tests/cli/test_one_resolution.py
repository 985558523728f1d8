"""Every command reads its profile once and resolves it once, and every output it writes is
a function of that one resolution (dockergen/pipeline.py).

Before, deploy resolved the profile, then loaded, resolved and rendered it again for its
content tag; plan and validate's capacity check loaded it up to three times; build
rendered it twice. Outputs computed from separate loads can disagree (a profile file
changed between them, a lock beside it read by one and not the other).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import ROOT

PROFILE = ROOT / "profiles" / "h100-fp8.yaml"
WITH_MODEL = ("--set", "serving.hf_config=llama-3-8b")


def _counted(monkeypatch: pytest.MonkeyPatch) -> tuple[Counter[str], list[str]]:
    """Count the profile-file reads (by file name) and the resolutions."""
    from dockergen.files import inputs
    from dockergen.resolve import fold as resolve_module

    reads: Counter[str] = Counter()
    resolutions: list[str] = []
    real_read, real_resolve = inputs.read_text, resolve_module.resolve

    def read_text(path: Path, kind: str, *args: Any, **kwargs: Any) -> str:
        if kind == "profile":
            reads[Path(path).name] += 1
        return real_read(path, kind, *args, **kwargs)

    def resolve(loaded: Any, *args: Any, **kwargs: Any) -> Any:
        resolutions.append(loaded.profile.name)
        return real_resolve(loaded, *args, **kwargs)

    monkeypatch.setattr(inputs, "read_text", read_text)
    monkeypatch.setattr(resolve_module, "resolve", resolve)
    return reads, resolutions


@pytest.mark.parametrize("args", [
    ("deploy", str(PROFILE), "--format", "compose"),
    ("deploy", str(PROFILE), "--format", "k8s"),
    ("observe", str(PROFILE), "-o", "{tmp}/observe"),
    ("plan", str(PROFILE), *WITH_MODEL),
    ("build", str(PROFILE), "--dry-run"),
    ("explain", str(PROFILE)),
    ("render", str(PROFILE), "-o", "{tmp}/ctx"),
    ("validate", str(PROFILE), *WITH_MODEL),
], ids=lambda a: "-".join(x for x in a[:4] if not x.startswith(("/", "{"))))
def test_a_command_reads_its_profile_once_and_resolves_it_once(
        args: tuple[str, ...], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from dockergen.cli import cli

    reads, resolutions = _counted(monkeypatch)
    result = CliRunner().invoke(cli, [a.replace("{tmp}", str(tmp_path)) for a in args])
    assert result.exit_code == 0, result.output
    assert reads["h100-fp8.yaml"] == 1, reads
    assert resolutions == ["h100-fp8"], resolutions


def test_the_deploy_image_is_the_tag_of_the_context_render_writes(tmp_path: Path) -> None:
    """The Kubernetes Deployment names the dg- tag of the very context `render` writes,
    both computed from one resolution each, from the same profile."""
    from dockergen.outputs.deploy import deploy
    from dockergen.pipeline import resolution
    from dockergen.resolve.buildid import content_tag

    res = resolution(PROFILE)
    text = deploy(res, "k8s").text
    tag = content_tag(res.files(), mode="buildkit")
    assert f"image: registry.example.com/llm/vllm:{tag}" in text
