"""The deployment profile: the one source of truth for what a profile may say.

A closed pydantic model: unknown keys are errors, values are strictly typed (a YAML
number never becomes a version string by accident), every string that can reach the
Dockerfile is checked against a narrow pattern, and the model is frozen after loading.
The JSON Schema for editors is generated from these classes (``dockergen schema``).
The value shapes live in :mod:`dockergen.input.values`, the sections of what runs on the
GPUs in :mod:`dockergen.input.software`, those of the image and its build in
:mod:`dockergen.input.image`; this module holds the smoke, matrix and observe sections
and assembles them all into :class:`Profile`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field, model_validator

from dockergen.errors import shown_value
from dockergen.input.image import Build, Image, Packages, Runtime
from dockergen.input.software import (
    HEADLINE_PYTHON,
    Cuda,
    Engine,
    FlashAttn,
    Gpu,
    Quantization,
    Serving,
)
from dockergen.input.values import (
    AxisValues,
    Duration,
    FieldPathText,
    FilePath,
    Form,
    HostPath,
    LabelText,
    Name,
    PythonVersion,
    ScrapeTarget,
    Section,
    Text,
    Url,
)

# An image platform (OCI OS/ARCH) -> the machine its wheels are built for (the wheel tag's
# and `uname -m`'s name: PEP 600 manylinux_X_Y_<machine>).
MACHINE_OF_PLATFORM = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}


def _regex(value: str) -> str:
    # compiled here so that `validate` reports it, not the smoke test after a long build
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"{shown_value(value)} is not a valid regular expression: {exc}") from None
    return value


Regex = Annotated[Text, Form(_regex, (("format", "regex"),), "^vllm [0-9.]+$")]


class CommandTest(Section):
    """A command run in the built image (exec form; the entrypoint is bypassed)."""

    name: Text
    command: tuple[Text, ...] = Field(min_length=1)
    exit_code: int = 0
    expected_output: tuple[Regex, ...] = Field((), description="Regexes the output must match.")
    excluded_output: tuple[Regex, ...] = Field((), description="Regexes it must not match.")


class FileTest(Section):
    """A path that must (or must not) exist in the built image."""

    path: FilePath
    should_exist: bool = True


class Smoke(Section):
    """Smoke tests run on the built image before anything is pushed."""

    defaults: bool = Field(True, description="Run the built-in checks (versions, arch audit, "
                                             "user, labels, no compilers, no secrets).")
    commands: tuple[CommandTest, ...] = ()
    files: tuple[FileTest, ...] = ()
    timeout_s: int = Field(300, ge=5, le=3600)

    @model_validator(mode="after")
    def _some_check(self) -> Smoke:
        # Zero checks is not a pass: `--push` would publish an image nothing has looked at.
        if not (self.defaults or self.commands or self.files):
            raise ValueError("no smoke checks at all (defaults off, no commands, no files); "
                             "an image would be pushed that nothing has checked")
        return self


class Matrix(Section):
    """Axes expanded into one variant per point (``render --all``, ``validate``)."""

    axes: dict[FieldPathText, AxisValues] = Field(
        min_length=1,
        description="Field path -> values: a list (variant names use the values) or a "
                    "mapping name -> value (variant names use the names). Points are the "
                    "cartesian product in the order written.")
    exclude: tuple[dict[FieldPathText, Any], ...] = Field(
        (), description="Points to leave out: each entry matches points whose axes have "
                        "all the given values (a value or its name).")


class Observe(Section):
    """Monitoring written by ``dockergen observe``: scrape targets, alert budgets, timings."""

    job: Name | None = Field(
        None, description="Prometheus job name of the server; default dockergen-<name>.")
    targets: tuple[ScrapeTarget, ...] = Field(
        (), description="host:port of each server replica; default localhost:<serving.port>.")
    scrape_interval: Duration = "15s"
    rate_window: Duration = Field(
        "5m", description="Window of rate() and histogram quantiles in the recording rules; "
                          "at least 4x scrape_interval.")
    e2e_p99_budget_s: float = Field(
        30.0, gt=0, le=86400,
        description="Alert when P99 end-to-end request latency stays above this (seconds).")
    kv_cache_usage_threshold: float = Field(
        0.95, gt=0, le=1,
        description="Alert when KV-cache usage (0..1) stays above this while requests wait.")
    latency_for: Duration = Field("10m", description="for: of the latency alert.")
    kv_cache_for: Duration = Field("5m", description="for: of the KV-cache alert.")
    down_for: Duration = Field("2m", description="for: of the server-down alerts.")
    stalled_for: Duration = Field("5m", description="for: of the no-tokens-generated alert.")
    runbook_url: Url | None = Field(
        None, description="Base URL of your runbook; each alert links <url>#<alert name>.")


class Profile(Section):
    """A deployment profile: what to deploy; everything derivable is derived."""

    extends: str | None = Field(
        None, description="Profile to inherit from: a shipped profile name or a file "
                          "next to this one (without .yaml).")
    abstract: bool = Field(
        False, description="Only provides defaults for profiles that extend it; "
                           "never rendered itself. Not inherited.")
    knowledge: tuple[HostPath, ...] = Field(
        (), description="User knowledge files (relative to the profile) adding releases to "
                        "dockergen's facts, e.g. a vLLM release it does not know yet; each "
                        "added fact needs its src and is shown as the user's in explain.")
    name: Name
    description: LabelText = ""
    gpu: Gpu
    cuda: Cuda = Cuda()
    python: PythonVersion = HEADLINE_PYTHON
    engine: Engine
    flash_attn: FlashAttn = FlashAttn()
    quantization: Quantization = Quantization()
    serving: Serving
    image: Image
    build: Build = Build()
    packages: Packages = Packages()
    runtime: Runtime = Runtime()
    smoke: Smoke = Smoke()
    matrix: Matrix | None = Field(
        None, description="Expand this profile into variants, one per point of the axes "
                          "(each named <name>-<value>-...); see `dockergen validate`.")
    observe: Observe = Observe()
