__version__ = "3.8.0"
