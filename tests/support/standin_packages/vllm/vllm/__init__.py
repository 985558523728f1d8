"""Stand-in for vllm (dockergen tests)."""
__version__ = "{version}"
