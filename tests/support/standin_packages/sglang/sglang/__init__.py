__version__ = "0.5.23"
import torch  # noqa: F401
