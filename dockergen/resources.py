"""Locate the shipped templates and profiles.

In an installed wheel they live in ``dockergen/_shipped/``; in a checkout (and under an
editable install, where a packaged copy would be stale) they are the repository's
top-level ``templates/`` and ``profiles/`` folders.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _locate(name: str) -> Path:
    installed = _PACKAGE / "_shipped" / name
    if installed.is_dir():
        return installed
    return _PACKAGE.parent / name


def templates_dir() -> Path:
    """Folder of the Jinja templates."""
    return _locate("templates")


def profiles_dir() -> Path:
    """Folder of the shipped profiles."""
    return _locate("profiles")


def shipped_profiles() -> list[Path]:
    """Every shipped profile file, sorted by name."""
    return sorted(profiles_dir().glob("*.yaml"))
