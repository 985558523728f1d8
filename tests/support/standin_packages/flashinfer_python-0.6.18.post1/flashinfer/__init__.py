"""Stand-in for flashinfer-python (dockergen tests): the kernel check."""
import importlib.util

__version__ = "{version}"
if importlib.util.find_spec("flashinfer_cubin") is not None:
    import flashinfer_cubin

    if flashinfer_cubin.__version__ != __version__:
        raise RuntimeError(f"flashinfer-cubin version ({flashinfer_cubin.__version__}) does "
                           f"not match flashinfer version ({__version__}).")
