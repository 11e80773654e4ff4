"""The version of groc, in a module of its own so that any module can read it without importing
the package (whose load_run reaches most of it)."""

__version__ = "0.1.0"
