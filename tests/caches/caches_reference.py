"""Token-by-token reference caches, straight from the papers' formulas (float64, loops).

Each returns log p_cache(y_t) per position (NaN where the cache is empty or undefined,
-inf where the target has zero probability), one column per setting, in the column order
of the batched implementation.
"""

from __future__ import annotations

import math

import numpy as np


def _log_ratio(num: float, den: float) -> float:
    if den <= 0:
        return math.nan
    return -math.inf if num <= 0 else math.log(num) - math.log(den)


def unigram(targets, cache_size=None) -> np.ndarray:
    out = np.empty((len(targets), 1))
    for t in range(len(targets)):
        lo = 0 if cache_size is None else max(0, t - cache_size)
        hist = list(targets[lo:t])
        out[t, 0] = _log_ratio(hist.count(targets[t]), len(hist))
    return out


def local(hidden, targets, thetas, cache_size) -> np.ndarray:
    """Grave et al. 2017c: p(w) ∝ Σ_{i in window, y_i = w} exp(θ h_tᵀ h_i)."""
    h = hidden.astype(np.float64)
    out = np.empty((len(targets), len(thetas)))
    for t in range(len(targets)):
        lo = max(0, t - cache_size)
        sims = h[lo:t] @ h[t]
        match = targets[lo:t] == targets[t]
        for p, theta in enumerate(thetas):
            if t == lo:
                out[t, p] = math.nan
                continue
            z = theta * sims
            z = np.exp(z - z.max())  # shift cancels in the ratio
            out[t, p] = _log_ratio(z[match].sum(), z.sum())
    return out


def unbounded(hidden, targets, knns, kernels, scales) -> tuple[np.ndarray, np.ndarray]:
    """Grave et al. 2017a eq. 6, exact kNN.  Also returns, per position, whether a
    neighbour set is ambiguous: the k-th and (k+1)-th distances tie for some k."""
    h = hidden.astype(np.float64)
    ncol = len(knns) * len(kernels) * len(scales)
    out = np.empty((len(targets), ncol))
    tie = np.zeros(len(targets), dtype=bool)
    for t in range(len(targets)):
        d2 = ((h[:t] - h[t]) ** 2).sum(1)
        order = np.argsort(d2, kind="stable")
        tie[t] = any(t > k and d2[order[k - 1]] == d2[order[k]] for k in knns)
        col = 0
        for k in knns:
            nn = order[:k]
            bw = math.sqrt(d2[nn].max()) if len(nn) else math.nan  # θ(h_t): k-th distance
            for kernel in kernels:
                for s in scales:
                    num = den = 0.0
                    for i in nn:
                        u = 0.0 if bw == 0 else math.sqrt(d2[i]) / (s * bw)
                        w = math.exp(-u * u / 2) if kernel == "gaussian" else max(0.0, 1 - u * u)
                        den += w
                        if targets[i] == targets[t]:
                            num += w
                    out[t, col] = _log_ratio(num, den)
                    col += 1
    return out, tie


def score_in_chunks(cache, hidden, targets, chunk: int) -> np.ndarray:
    parts = [
        cache.score(None if hidden is None else hidden[a : a + chunk], targets[a : a + chunk])
        for a in range(0, len(targets), chunk)
    ]
    return np.concatenate(parts, axis=0)


def with_future_changed(hidden, targets, cut: int) -> tuple[np.ndarray, np.ndarray]:
    """The same stream before ``cut``; other words and states from ``cut`` on."""
    h2, y2 = hidden.copy(), targets.copy()
    y2[cut:] = np.roll(y2[cut:], 17)
    h2[cut:] = -h2[cut:][::-1]
    return h2, y2
