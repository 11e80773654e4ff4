"""Unigram cache (Kuhn & De Mori 1990): p_cache(w) = count of w among previous targets / their number.

With ``cache_size`` set, only the last ``cache_size`` targets count (the unigram baseline of
Grave et al. 2017c, figure 4); by default every previous target counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import cache_size_setting, check_cache_size, check_chunk
from .registry import ConfiguredCache, register_cache


@dataclass
class UnigramSettings:
    """``groc eval``'s settings of ``cache`` unigram."""

    cache_size: int | None = cache_size_setting()


@register_cache
class UnigramCache(ConfiguredCache):
    """Counts of previous targets; ``score`` ignores the hidden states (pass None)."""

    kind = "unigram"
    Settings = UnigramSettings
    needs_hidden = False

    def __init__(self, cache_size: int | None = None):
        if cache_size is not None and (int(cache_size) != cache_size or cache_size < 1):
            raise ValueError(f"cache_size must be an integer >= 1, got {cache_size}")
        self.cache_size = None if cache_size is None else int(cache_size)
        self.settings = [{"kind": "unigram", "cache_size": self.cache_size}]
        self.config = {"kind": "unigram", "cache_size": self.cache_size}
        self._seen = 0
        self._counts = np.zeros(0, dtype=np.int64)  # unbounded: count per id
        self._recent = np.zeros(0, dtype=np.int64)  # windowed: the last cache_size targets

    @classmethod
    def check(cls, s: UnigramSettings, values: dict[str, list], chosen: bool) -> None:
        check_cache_size(s.cache_size)

    @classmethod
    def from_settings(cls, s: UnigramSettings, values, ctx, first_states=None) -> "UnigramCache":
        return cls(cache_size=s.cache_size)

    def __len__(self) -> int:
        return self._seen if self.cache_size is None else len(self._recent)

    @property
    def nbytes(self) -> int:
        return int(self._counts.nbytes + self._recent.nbytes)

    def score(self, hidden: np.ndarray | None, targets: np.ndarray) -> np.ndarray:
        _, y = check_chunk(hidden, targets, None, need_hidden=False)
        if self.cache_size is None:
            count, total = self._score_all(y)
        else:
            count, total = self._score_window(y)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.log(count.astype(np.float64)) - np.log(total.astype(np.float64))
        out[total == 0] = np.nan
        return out[:, None]

    def _score_all(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(y)
        if n and y.max() >= len(self._counts):
            grown = np.zeros(max(int(y.max()) + 1, 2 * len(self._counts)), dtype=np.int64)
            grown[: len(self._counts)] = self._counts
            self._counts = grown
        # Occurrences of y_t earlier in this chunk: rank of t among equal ids (stable sort).
        order = np.argsort(y, kind="stable")
        ys = y[order]
        group_start = np.r_[0, np.flatnonzero(ys[1:] != ys[:-1]) + 1] if n else np.zeros(0, int)
        starts = np.repeat(group_start, np.diff(np.r_[group_start, n]))
        earlier = np.empty(n, dtype=np.int64)
        earlier[order] = np.arange(n) - starts
        count = self._counts[y] + earlier
        total = self._seen + np.arange(n, dtype=np.int64)
        np.add.at(self._counts, y, 1)
        self._seen += n
        return count, total

    def _score_window(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n, w = len(y), self.cache_size
        seq = np.concatenate([self._recent, y])
        m, length = len(self._recent), len(seq)
        t = m + np.arange(n)  # index of each chunk position in seq
        lo = np.maximum(t - w, 0)  # its window is seq[lo:t]
        # Count ids in ranges with one sorted array of keys id * (length + 1) + index.
        keys = np.sort(seq * (length + 1) + np.arange(length))
        base = y * (length + 1)
        count = np.searchsorted(keys, base + t) - np.searchsorted(keys, base + lo)
        self._recent = seq[-w:].copy()
        self._seen += n
        return count, t - lo
