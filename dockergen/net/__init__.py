"""The one HTTP layer and what reads through it (http, ranged wheel reads).
"""
