"""groc: adaptive word-level language modeling from the command line."""

__version__ = "0.1.0"
