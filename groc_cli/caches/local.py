"""Continuous (neural) cache of Grave et al. (2017c), section 3.

    p_cache(w | h_t) ∝ Σ_{i in window, y_i = w} exp(θ · h_tᵀ h_i)

over the last ``cache_size`` positions i < t.  θ = 0 gives the windowed unigram cache.

Batched: a block of n positions is scored against the ring buffer (the window before the
block) and against itself with one matmul each; a causal + window mask keeps only the
pairs the token-by-token formula uses.  Each row is shifted by its largest valid
similarity (so exp(θ (s - s_max)) <= 1 for every θ), the denominator is one exp-and-sum
pass per θ, and the numerator sums over the few pairs whose word is the target (kept
sparse).  Only the window (cache_size × d keys, ids, positions) is kept in memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import SettingError
from ..settings import setting
from .base import cache_size_setting, check_cache_size, check_chunk
from .registry import ConfiguredCache, register_cache

#: The dtypes of ``dtype``, by name (torch's, resolved when the cache is built: importing this module loads no torch).
_DTYPES = ("float32", "float64")
#: The window when none is given (Grave et al. 2017c use up to 10,000; so does GroC C.4).
DEFAULT_WINDOW = 10_000


@dataclass
class LocalSettings:
    """``groc eval``'s settings of ``cache`` local; ``cache_size`` None is ``DEFAULT_WINDOW``."""

    theta: float = setting(0.3, "local: flatness θ of exp(θ hᵀh_i).")
    cache_size: int | None = cache_size_setting()


@register_cache
class LocalCache(ConfiguredCache):
    """Continuous cache over a sliding window, scored for several θ at once.

    thetas: flatness parameters θ ≥ 0 (one output column each; GroC C.4 selected 0.5
        from a grid of 5 values in [0, 1]).
    cache_size: window length (Grave et al. 2017c use up to 10,000; so does GroC C.4).
    dim: hidden size; taken from the first chunk when None.
    block_size: positions scored per matmul; bounds the working memory to about
        block_size × (cache_size + block_size) floats per θ pass.  Does not change results.
    dtype: "float32" (default, fast; relative error of the log-probabilities about
        1e-7 · |θ hᵀh|) or "float64" (matches a float64 reference to ~1e-12).
    """

    kind = "local"
    source = "Grave et al. 2017c"
    Settings = LocalSettings
    grid = ("theta",)

    def __init__(
        self,
        thetas: Sequence[float] = (0.5,),
        cache_size: int = DEFAULT_WINDOW,
        dim: int | None = None,
        block_size: int = 512,
        dtype: str = "float32",
    ):
        if isinstance(thetas, (int, float)):
            thetas = [thetas]
        thetas = [float(x) for x in thetas]
        if not thetas:
            raise ValueError("local cache needs at least one theta")
        if any(not np.isfinite(x) or x < 0 for x in thetas):
            raise ValueError(f"local cache thetas must be finite and >= 0, got {thetas}")
        if int(cache_size) != cache_size or cache_size < 1:
            raise ValueError(f"cache_size must be an integer >= 1, got {cache_size}")
        if int(block_size) != block_size or block_size < 1:
            raise ValueError(f"block_size must be an integer >= 1, got {block_size}")
        if dim is not None and (int(dim) != dim or dim < 1):
            raise ValueError(f"dim must be an integer >= 1, got {dim}")
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
        import torch

        self.thetas = thetas
        self.cache_size = int(cache_size)
        self.block_size = int(block_size)
        self.dim = None if dim is None else int(dim)
        self._dtype = getattr(torch, dtype)
        self.settings = [
            {"kind": "local", "cache_size": self.cache_size, "theta": t} for t in thetas
        ]
        self.config = {
            "kind": "local",
            "thetas": thetas,
            "cache_size": self.cache_size,
            "dim": self.dim,
            "block_size": self.block_size,
            "dtype": dtype,
        }
        self._seen = 0
        # Ring buffer: slot of position p is p % cache_size; allocated on first use.
        self._keys: torch.Tensor | None = None
        self._ids = torch.zeros(0, dtype=torch.int64)
        self._pos = torch.zeros(0, dtype=torch.int64)

    @classmethod
    def check(cls, s: LocalSettings, values: dict[str, list], chosen: bool) -> None:
        check_cache_size(s.cache_size)
        for t in values["theta"]:
            if t < 0 or not math.isfinite(t):
                raise SettingError(f"`theta` {t}: must be a finite number >= 0")

    @classmethod
    def from_settings(cls, s: LocalSettings, values, ctx, first_states=None) -> "LocalCache":
        return cls(thetas=values["theta"], cache_size=s.cache_size or DEFAULT_WINDOW, dim=ctx.dim)

    def __len__(self) -> int:
        return min(self._seen, self.cache_size)

    @property
    def nbytes(self) -> int:
        keys = 0 if self._keys is None else self._keys.numel() * self._keys.element_size()
        return int(keys + self._ids.numel() * 8 + self._pos.numel() * 8)

    def score(self, hidden: np.ndarray, targets: np.ndarray) -> np.ndarray:
        h, y = check_chunk(hidden, targets, self.dim, need_hidden=True)
        if self.dim is None:
            self.dim = h.shape[1]
            self.config["dim"] = self.dim
        out = np.empty((len(y), len(self.thetas)), dtype=np.float64)
        for a in range(0, len(y), self.block_size):
            b = min(a + self.block_size, len(y))
            out[a:b] = self._score_block(h[a:b], y[a:b])
        return out

    def _score_block(self, h: np.ndarray, y: np.ndarray) -> np.ndarray:
        import torch

        n, w = len(y), self.cache_size
        q = torch.from_numpy(h).to(self._dtype)
        yt = torch.from_numpy(y)
        g = self._seen + torch.arange(n)  # global positions of the block
        m = len(self)  # filled slots; while filling, slots 0..m-1 hold positions 0..m-1

        # Two parts, kept apart to avoid copying them into one matrix: the window before
        # the block (ring buffer) and the block itself.  Each: similarities [n, part],
        # valid pairs (i < t and t - i <= window) and the ids of the part.
        t_idx = torch.arange(n)
        lag = t_idx[:, None] - t_idx[None, :]
        parts = [(q @ q.T, (lag > 0) & (lag <= w), yt)]
        if m:
            # Memory positions all precede the block; keep those within t's window.
            parts.insert(0, (q @ self._keys[:m].T, self._pos[None, :m] >= g[:, None] - w,
                             self._ids[:m]))

        # Shift every row by its largest valid similarity, so exp(θ (s - s_max)) <= 1 for
        # every θ >= 0; invalid pairs become -inf and vanish in the exp (θ > 0).
        smax = torch.full((n, 1), -torch.inf, dtype=self._dtype)
        for sim, valid, _ in parts:
            sim.masked_fill_(~valid, -torch.inf)
            torch.maximum(smax, sim.amax(dim=1, keepdim=True), out=smax)
        empty = ~torch.isfinite(smax[:, 0])
        smax.masked_fill_(empty[:, None], 0.0)
        # The window of position g holds positions max(0, g - window) .. g - 1.
        num_valid = torch.clamp(g, max=w).double()
        rows, shifted = [], []  # pairs whose id is the target: few, kept sparse
        for sim, valid, ids in parts:
            sim.sub_(smax)
            r, c = torch.nonzero((ids[None, :] == yt[:, None]) & valid, as_tuple=True)
            rows.append(r)
            shifted.append(sim[r, c])
        rows, shifted = torch.cat(rows), torch.cat(shifted)

        out = np.empty((n, len(self.thetas)), dtype=np.float64)
        buf = None
        for p, theta in enumerate(self.thetas):
            if theta == 0.0:  # uniform over the window (0 * -inf would be NaN)
                log_den = num_valid.log()
            else:
                den = torch.zeros(n, dtype=torch.float64)
                for sim, _, _ in parts:
                    if buf is None or buf.shape[1] < sim.shape[1]:
                        buf = torch.empty(sim.shape, dtype=self._dtype)
                    z = buf[:, : sim.shape[1]]
                    torch.mul(sim, theta, out=z)
                    # torch's pairwise float32 sum (BLAS mv would be 2x faster but
                    # accumulates sequentially: ~1e-5 relative error over a 10K window).
                    den += z.exp_().sum(dim=1).double()
                log_den = den.log()  # >= 0: the row maximum contributes exp(0) = 1
            # Numerator in the log domain (float64), so that a target far below the row
            # maximum gets a tiny finite probability rather than an underflowed zero.
            x = shifted.double() * theta
            rmax = torch.full((n,), -torch.inf, dtype=torch.float64)
            rmax.scatter_reduce_(0, rows, x, reduce="amax")
            num = torch.zeros(n, dtype=torch.float64).index_add_(0, rows, (x - rmax[rows]).exp())
            out[:, p] = (num.log() + rmax - log_den).numpy()
        out[empty.numpy()] = np.nan
        self._append(q, yt, g)
        return out

    def _append(self, q: torch.Tensor, yt: torch.Tensor, g: torch.Tensor) -> None:
        import torch

        w = self.cache_size
        if self._keys is None:
            self._keys = torch.empty((w, q.shape[1]), dtype=self._dtype)
            self._ids = torch.full((w,), -1, dtype=torch.int64)
            self._pos = torch.full((w,), -1, dtype=torch.int64)
        q, yt, g = q[-w:], yt[-w:], g[-w:]
        slots = g % w
        self._keys[slots] = q
        self._ids[slots] = yt
        self._pos[slots] = g
        self._seen = int(g[-1]) + 1
