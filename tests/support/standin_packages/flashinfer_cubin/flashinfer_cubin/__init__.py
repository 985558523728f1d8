__version__ = "{version}"
