"""Evaluation: stream perplexity (closed or open vocabulary), caches over the stream,
per-token records, and dumped states (``groc eval``, ``groc dump``).

Importing the package loads no torch: ``EvalSettings``, ``evaluate`` and the rest are imported from
their modules on first use, so that a command's help reads only the settings modules."""

from __future__ import annotations

import importlib

# name -> the module that defines it, imported on first use.
_LAZY = {"EvalSettings": "settings", "evaluate": "perplexity", "DumpSettings": "states", "dump_states": "states",
         "open_states": "states"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DumpSettings", "EvalSettings", "dump_states", "evaluate", "open_states"]
