"""Loading the knowledge data: facts with sources, one YAML file per component.

Each component keeps its slice of the compatibility knowledge in a YAML file beside its
module (``components/cuda.yaml``, ``components/serving/vllm.yaml``, ...); this module only
loads them and offers the version helpers every component uses. Decisions built on the
facts live in the components.

Every fact carries ``src:``, where it was read. Source tags follow
``shared/reference/engines-compat.md``:

- ``FA@<tag>:<path>``: Dao-AILab/flash-attention source at that tag
- ``VLLM-WHEEL <ver>``: the released vLLM wheel, unpacked and read (METADATA, envs.py, ...)
- ``VLLM@<commit>:<path>``: vllm-project/vllm source at that commit
- ``TORCH-MATRIX``: pytorch/pytorch RELEASE.md "Release Compatibility Matrix"
- ``CUDA-RN``: CUDA Toolkit 13.2U2 release notes (driver table, dropped archs)
- ``TRTLLM:<path>@<sha>``: NVIDIA/TensorRT-LLM file at that commit
- ``doc:<url>``: documentation page

``unverified: true`` marks a fact stated from general knowledge; rules built on it only
warn. May import: nothing of dockergen.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

COMPONENTS_DIR = Path(__file__).with_name("components")


@functools.cache
def load_facts(name: str) -> dict[str, Any]:
    """The facts of one component: ``components/<name>.yaml`` (cached; immutable)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with (COMPONENTS_DIR / f"{name}.yaml").open(encoding="utf-8") as fh:
        data = yaml.load(fh, Loader=loader)  # noqa: S506 - safe loader
    assert isinstance(data, dict), name
    return data


def newest(versions: list[str]) -> str:
    """The highest version of a list."""
    return max(versions, key=Version)


def in_range(version: str, spec: str) -> bool:
    """Whether ``version`` satisfies the PEP 440 specifier ``spec``."""
    return Version(version) in SpecifierSet(spec)
