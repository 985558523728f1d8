"""Maintainer tools: keep dockergen's knowledge checked against the real packages.
"""
