"""Fleet builds: Buildx Bake files, profile matrices, base-image digest locks.
"""
