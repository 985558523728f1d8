"""A build record as ``dockergen build --push`` writes it, spelled out key by key (not made
with the product's own class), so the tests that read one also check the file format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import EXAMPLES

DIGEST = "sha256:" + "ab" * 32
REPO = "registry.example.com/llm/vllm"


def profile_hash(profile: str) -> str:
    """The hash a shipped profile resolves to (its example's resolution record)."""
    resolved = json.loads((EXAMPLES / profile / "dockergen.resolved.json").read_text())
    return str(resolved["profile_hash"])


def write_record(folder: Path, profile: str = "h100-fp8", **fields: Any) -> Path:
    """``folder/build-record.json`` of a pushed build of ``profile``; ``fields`` replace
    keys (a key given as None is left out)."""
    tags = [f"{REPO}:x", f"{REPO}:dg-0123456789ab"]
    record: dict[str, Any] = {
        "profile": profile, "profile_hash": profile_hash(profile), "builder": "buildkit",
        "tags": tags, "immutable_tag": tags[1], "target": "(final stage)",
        "status": "pushed", "image_id": "sha256:" + "cd" * 32, "seconds": 61.5,
        "steps": 9, "cached_steps": 2, "executed_steps": 7,
        "stage_seconds": {"runtime": 1.5}, "cached_by_stage": {"runtime": 2},
        "steps_by_stage": {"runtime": 9},
        "smoke": [{"name": "versions", "ok": True, "detail": ""}],
        "pushed": {f"{REPO}:x": DIGEST, f"{REPO}:dg-0123456789ab": DIGEST}}
    record.update(fields)
    path = folder / "build-record.json"
    path.write_text(json.dumps({k: v for k, v in record.items() if v is not None}))
    return path
