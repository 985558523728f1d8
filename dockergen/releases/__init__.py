"""Newer releases on the index: outdated verdicts and upgrade moves.
"""
