"""The one parser of JSON that groc reads from files it did not just write: configs, metadata,
records, sidecars. Free of numpy, pyarrow and torch, so that `groc runs` uses it as cheaply."""

from __future__ import annotations

import json
import re
from typing import Any

#: The deepest nesting of the JSON groc writes is a handful of levels (a run's config.json: 3); a
#: file nested past this is not one groc wrote, and Python's parser meets its recursion limit near
#: 1,000 levels with a RecursionError.
MAX_JSON_DEPTH = 64
#: Integers in groc's JSON are counts, sizes and seeds: 64 bits hold every one of them.
MAX_JSON_INT = 1 << 64


def parse_json(raw: str | bytes) -> Any:
    """JSON text as groc reads every file it did not just write (configs, metadata, records): a
    ValueError, never a RecursionError or a traceback, for text that is not JSON, nested deeper than
    MAX_JSON_DEPTH, holding an integer beyond 64 bits (Python refuses over 4,300 digits with a
    message about set_int_max_str_digits) or a NaN or infinite number (which strict JSON has not)."""
    if isinstance(raw, (bytes, bytearray)):
        raw = bytes(raw).decode("utf-8")  # a UnicodeDecodeError is a ValueError
    if _nesting(raw) > MAX_JSON_DEPTH:
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")

    def constant(name: str) -> Any:
        raise ValueError(f"holds {name}, which is not a JSON number")

    def integer(text: str) -> int:
        digits = text.lstrip("-")
        if len(digits) > 20 or abs(int(text)) >= MAX_JSON_INT:
            raise ValueError(f"holds an integer of {len(digits):,} digits, beyond 64 bits")
        return int(text)

    def real(text: str) -> float:
        value = float(text)
        if value in (float("inf"), float("-inf")):
            raise ValueError(f"holds the number {text[:40]}, too large for a float")
        return value

    try:
        return json.loads(raw, parse_constant=constant, parse_int=integer, parse_float=real)
    except RecursionError:  # not reached past the depth check; kept for a parser that recurses on other input
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels") from None


def _nesting(text: str) -> int:
    """The deepest bracket nesting of JSON ``text``, outside its strings (a cheap upper bound: an
    unbalanced or malformed text is left to the parser to refuse)."""
    deepest = depth = 0
    for token in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[{]|[\]}]', text):
        mark = token.group()
        if mark in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif mark in "]}":
            depth -= 1
    return deepest
