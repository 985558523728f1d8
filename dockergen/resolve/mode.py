"""The two builders a Dockerfile is written for: BuildKit (cache and secret mounts) or the
classic builder (plain ``RUN`` lines); every stage of the resolved model records its mode."""

from __future__ import annotations

from typing import Literal

Mode = Literal["buildkit", "classic"]
