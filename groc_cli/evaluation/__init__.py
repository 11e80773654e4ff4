"""Evaluation: stream perplexity (closed or open vocabulary), caches over the stream,
per-token records, and dumped states (``groc eval``, ``groc dump``)."""

from .perplexity import EvalSettings, evaluate
from .states import DumpSettings, dump_states, open_states

__all__ = ["DumpSettings", "EvalSettings", "dump_states", "evaluate", "open_states"]
