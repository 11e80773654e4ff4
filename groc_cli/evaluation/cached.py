"""The cache of an evaluation, whichever is registered under ``cache``: its checks in order
(``caches.registry``), which decide its plan (``CachePlan``), its construction, and the stream of
chunks it scores. ``groc eval``, ``groc score`` and ``load_run`` all run their cache through it.

The evaluation knows no cache kind: ``CacheSetup`` asks the kind's class, whose messages name
settings in backticks, and raises them as one-line SettingErrors (``errors``: the command says
flags, the API names).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import numpy as np

from ..caches import CACHE_KINDS, CacheContext, interpolate
from ..errors import as_setting_error
from .grid import grid_values, weights
from .settings import EvalSettings
from .stream import Chunk


@dataclass(frozen=True)
class CachePlan:
    """The cache settings decided (``check_caches``): the chosen ``kind`` (none or a registered
    one), its class (None for none) and Settings, each of its grid settings' ``values`` (the
    ``grid`` list, or the single value) and the cache ``weights`` (``grid``'s, or ``cache_weight``)."""

    kind: str
    cls: type | None
    settings: Any
    values: dict[str, list]
    weights: list[float]

    def files(self) -> tuple[list, list[tuple]]:
        """The files the cache's settings name: those it reads (inputs no output may replace)
        and those it writes, as (path, setting in backticks, what) to claim before any work."""
        if self.cls is None:
            return [], []
        s = self.settings
        return ([getattr(s, name) for name in self.cls.reads if getattr(s, name) is not None],
                [(getattr(s, name), f"`{name}`", "file") for name in self.cls.writes])


def check_caches(s: EvalSettings, grid: dict[str, list] | None = None) -> CachePlan:
    """Every registered cache's checks without the model (the chosen one's and the others'), with
    ``grid`` parsed (``parse_grid``; None without one); returns the chosen cache's plan."""
    for kind, cls in CACHE_KINDS.items():
        with as_setting_error():
            cls.check(s.of(cls), grid_values(s, cls, grid), kind == s.cache)
    cls = CACHE_KINDS.get(s.cache)
    if cls is None:
        return CachePlan(s.cache, None, None, {}, weights(s, grid))
    return CachePlan(s.cache, cls, s.of(cls), grid_values(s, cls, grid), weights(s, grid))


class CacheSetup:
    """The cache of a ``CachePlan`` (``cls`` None for ``cache`` none).

    Made once the hidden size and device are known (``ctx.dim``, ``ctx.device``; checks before any
    work), then told the stream's length (``check_stream``: the states it needs first, ``warmup``)."""

    def __init__(self, plan: CachePlan, ctx: CacheContext):
        self.plan, self.ctx = plan, ctx
        self.cls, self.settings, self.values = plan.cls, plan.settings, plan.values
        self.warmup = 0
        self._ask("check_context")

    def check_stream(self, total: int) -> None:
        self.ctx.total = total
        self.warmup = self._ask("warmup") or 0

    def _ask(self, name: str):
        if self.cls is None:
            return None
        with as_setting_error():
            return getattr(self.cls, name)(self.settings, self.values, self.ctx)

    def build(self, first_states: np.ndarray | None = None):
        with as_setting_error(f"`cache` {self.plan.kind}: "):
            return self.cls.from_settings(self.settings, self.values, self.ctx, first_states)


class CachedStream:
    """Feeds chunks to the cache. A cache that needs the first ``setup.warmup`` states of the
    stream (e.g. to train an index) is built once they are there; they are buffered (not
    recomputed) meanwhile, then scored from position 0."""

    def __init__(self, setup: CacheSetup):
        self.setup = setup
        self.cache = None
        if setup.cls is not None and not setup.warmup:
            self.cache = setup.build()

    def run(self, chunks: Iterable[tuple[Chunk, np.ndarray]]) -> Iterator[tuple[Chunk, np.ndarray, np.ndarray]]:
        """(chunk, base logp) -> (chunk, base logp, final logp)."""
        if self.setup.cls is None:
            for chunk, base in chunks:
                yield chunk, base, base[:, None]
            return
        buffered: list[tuple[Chunk, np.ndarray]] = []
        held = 0
        for chunk, base in chunks:
            if self.cache is None:
                buffered.append((chunk, base))
                held += len(chunk)
                if held < self.setup.warmup:
                    continue
                yield from self._build_and_flush(buffered)
                buffered = []
                continue
            yield chunk, base, self._mix(chunk, base)
        if self.cache is None and buffered:
            yield from self._build_and_flush(buffered)

    def _build_and_flush(self, buffered):
        vectors = np.concatenate([c.hidden for c, _ in buffered])[: self.setup.warmup]
        self.cache = self.setup.build(vectors)
        for chunk, base in buffered:
            yield chunk, base, self._mix(chunk, base)

    def _mix(self, chunk: Chunk, base: np.ndarray) -> np.ndarray:
        """[n, P]: one column per grid point (one column without ``grid``)."""
        hidden = chunk.hidden if self.setup.cls.needs_hidden else None
        cache_logp = self.cache.score(hidden, chunk.targets)
        return interpolate(base, cache_logp, self.setup.plan.weights)

    def columns(self) -> list[dict]:
        """The setting of each column of _mix: cache setting p, weight i -> column p * W + i."""
        ws = self.setup.plan.weights
        if self.cache is None:
            return [{"cache_weight": w} for w in ws]
        return [{**{k: v for k, v in setting.items() if k != "kind"}, "cache_weight": w}
                for setting in self.cache.settings for w in ws]
