"""Maintainer tools: keep dockergen's knowledge checked against the real packages.

May import: nothing of dockergen (its modules are run as ``python -m``).
"""
