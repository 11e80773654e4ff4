"""Evaluation: stream perplexity (closed or open vocabulary), caches over the stream,
per-token records, and dumped states (``groc eval``, ``groc dump``).

Importing the package loads no torch: ``EvalSettings``, ``evaluate`` and the rest are imported from
their modules on first use, so that a command's help reads only the settings modules."""

from __future__ import annotations

from ..lazy import lazy_exports

# name -> the module that defines it, imported on first use.
_LAZY = {"EvalSettings": "settings", "evaluate": "perplexity", "DumpSettings": "settings", "dump_states": "states",
         "open_states": "states"}
__getattr__ = lazy_exports(__name__, _LAZY)

__all__ = ["DumpSettings", "EvalSettings", "dump_states", "evaluate", "open_states"]
