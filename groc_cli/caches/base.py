"""The interface every cache implements, interpolation with the model, shared checks.

A cache scores a stream of positions in order.  Position t has the hidden state h_t (the
vector fed to the softmax that predicts the word at t), its target word id y_t and the
model's log-probability of that target.  A mixture of normalised distributions is
normalised, so the perplexity of the interpolated model needs only p_model(y_t) and
p_cache(y_t) (Grave et al. 2017c, section 3, "linear interpolation"):

    p(y_t) = (1 - w) * p_model(y_t) + w * p_cache(y_t)

where w is the cache's share.  GroC's appendix C.4 writes λ for the *model's* share
(λ = 0.966 there means w = 0.034 here); Grave et al. (2017c) write λ for the cache's.
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from ..errors import SettingError
from ..settings import setting

#: Largest target id the caches accept (they store ids as int32 or compare them as int64).
MAX_TARGET_ID = 2**31 - 1


@runtime_checkable
class StreamCache(Protocol):
    """A causal cache over a stream of (hidden state, target) pairs.

    ``settings[p]`` describes column p of :meth:`score` (for example one θ value each),
    so a hyperparameter grid costs one pass over the stream.  ``config`` holds the
    resolved construction options (JSON-serialisable) for provenance.
    """

    settings: list[dict]
    config: dict

    def score(self, hidden: np.ndarray | None, targets: np.ndarray) -> np.ndarray:
        """Score a chunk of consecutive positions, then add the chunk to the memory.

        hidden: float32 [n, d] (ignored by the unigram cache, which accepts None);
        targets: int64 [n].  Returns float64 [n, P]: log p_cache(target_t) for each
        position t and setting p, computed from the positions before t only (earlier
        positions of the same chunk count); -inf where the cache gives the target zero
        probability; NaN where the cache is empty or undefined at t (interpolate() then
        uses the model alone).  Results do not depend on how the stream is chunked.
        """
        ...

    def __len__(self) -> int:
        """Number of positions currently held in memory."""
        ...

    @property
    def nbytes(self) -> int:
        """Bytes held by the memory (keys, codes and target ids)."""
        ...


def check_weights(weights: Sequence[float]) -> list[float]:
    """Validate cache interpolation weights (the cache's share w, each in [0, 1])."""
    out = []
    for w in weights:
        w = float(w)
        if not 0.0 <= w <= 1.0:  # also rejects NaN
            raise ValueError(f"cache weight must be in [0, 1], got {w}")
        out.append(w)
    if not out:
        raise ValueError("at least one cache weight is needed")
    return out


def interpolate(
    model_logp: np.ndarray, cache_logp: np.ndarray, weights: Sequence[float]
) -> np.ndarray:
    """log((1 - w) p_model + w p_cache) for every cache setting and every weight.

    model_logp: [n]; cache_logp: [n, P] (or [n] for P = 1) as returned by
    ``StreamCache.score``; weights: the cache's shares w in [0, 1].  Returns float64
    [n, P * len(weights)], column ``p * len(weights) + i`` for setting p and weight
    ``weights[i]``.  Where the cache is NaN (empty) the result is the model's
    log-probability.  Computed with logaddexp, so tiny probabilities do not underflow.
    """
    ws = np.asarray(check_weights(weights), dtype=np.float64)
    lm = np.asarray(model_logp, dtype=np.float64)
    lc = np.asarray(cache_logp, dtype=np.float64)
    if lc.ndim == 1:
        lc = lc[:, None]
    if lm.ndim != 1 or lc.ndim != 2 or lc.shape[0] != lm.shape[0]:
        raise ValueError(
            f"model_logp must be [n] and cache_logp [n, P]; got {lm.shape} and {lc.shape}"
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        log_w = np.log(ws)  # -inf for w = 0
        log_1mw = np.log1p(-ws)  # -inf for w = 1
        lm3 = lm[:, None, None]
        lc3 = lc[:, :, None]
        # Only -inf is ever added to -inf here (never +inf): w = 0 or 1 gives no NaN.
        out = np.logaddexp(lm3 + log_1mw, lc3 + log_w)
    out = np.where(np.isnan(lc3), lm3, out)
    return out.reshape(lm.shape[0], lc.shape[1] * ws.shape[0])


def check_chunk(
    hidden: np.ndarray | None, targets: np.ndarray, dim: int | None, need_hidden: bool
) -> tuple[np.ndarray | None, np.ndarray]:
    """Validate one chunk; returns (hidden as C-contiguous float32, targets as int64)."""
    y = np.asarray(targets)
    if y.ndim != 1:
        raise ValueError(f"targets must be a 1-D array of word ids, got shape {y.shape}")
    if y.size and not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"targets must be integer word ids, got dtype {y.dtype}")
    y = y.astype(np.int64, copy=False)
    if y.size and (y.min() < 0 or y.max() > MAX_TARGET_ID):
        raise ValueError(f"target ids must be in [0, {MAX_TARGET_ID}]")
    if not need_hidden:
        return None, y
    if hidden is None:
        raise ValueError("this cache needs hidden states")
    h = np.ascontiguousarray(hidden, dtype=np.float32)
    if h.ndim != 2 or h.shape[0] != y.shape[0]:
        raise ValueError(
            f"hidden must be [n, d] with n = len(targets) = {y.shape[0]}, got {h.shape}"
        )
    if dim is not None and h.shape[1] != dim:
        raise ValueError(f"hidden states have dimension {h.shape[1]}, the cache expects {dim}")
    return h, y


def cache_size_setting():
    """The ``cache_size`` setting, shared by the unigram and local caches (declared once here)."""
    return setting(None, "local: window of past positions (default 10000); unigram: count only the last N targets "
                   "(default: all).")


def check_cache_size(cache_size: int | None) -> None:
    """The shared ``cache_size`` check (a message naming the setting in backticks)."""
    if cache_size is not None and cache_size < 1:
        raise SettingError(f"`cache_size` {cache_size}: must be >= 1")
