"""The build through the Engine API: orchestration, the daemon, progress, smoke tests, the build
record, several platforms.
"""
