"""The one reader of files a user hands over (bounded, regular files only) and the one writer of
outputs (atomic, never over a file that is not dockergen's own).
"""
