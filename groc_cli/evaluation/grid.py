"""``groc eval``'s ``grid``: several values of cache settings scored in one pass.

The names are ``cache-weight`` (any cache) and each registered cache's own grid settings
(``ConfiguredCache.grid``, by their flags without dashes: theta, knn, kernel, bandwidth-scale).
A cache builds one score column per combination of its own values; the interpolation adds one
per cache weight (``CachedStream.columns``).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from ..artifacts.destinations import GRID_STAGE
from ..artifacts.io import provenance
from ..caches import CACHE_KINDS
from ..caches.registry import grid_name
from ..console import log
from ..errors import SettingError
from ..settings import hints
from .settings import EvalSettings

WEIGHT = "cache-weight"


def grid_keys() -> dict[str, tuple[type, list[str]]]:
    """Each ``grid`` name: the type of its values and the caches it applies to."""
    keys: dict[str, tuple[type, list[str]]] = {WEIGHT: (float, list(CACHE_KINDS))}
    for kind, cls in CACHE_KINDS.items():
        for f in dataclasses.fields(cls.Settings):
            if f.name in cls.grid:
                keys.setdefault(grid_name(f), (hints(cls.Settings)[f.name], []))[1].append(kind)
    return keys


def parse_grid(text: str, cache: str) -> dict[str, list]:
    """"cache-weight=0.05,0.1;theta=0.1,0.3" -> {"cache-weight": [0.05, 0.1], "theta": [0.1, 0.3]}."""
    if cache == "none":
        kinds = list(CACHE_KINDS)
        raise SettingError(f"`grid` needs a cache: add `cache` {', '.join(kinds[:-1])} or {kinds[-1]}")
    keys = grid_keys()
    grid: dict[str, list] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        key, eq, values = part.partition("=")
        key = key.strip().lstrip("-")
        if not eq or not values.strip():
            raise SettingError(f"`grid` {text!r}: expected NAME=V1,V2,... parts separated by ';' (e.g. 'cache-weight=0.05,0.1;theta=0.1,0.3')")
        if key not in keys:
            raise SettingError(f"`grid`: unknown name {key!r}; choose from {', '.join(keys)}")
        kind, applies = keys[key]
        if cache not in applies:
            raise SettingError(f"`grid`: {key} does not apply to the {cache} cache (it applies to: {', '.join(applies)})")
        if key in grid:
            raise SettingError(f"`grid`: {key} is given twice")
        items = [v.strip() for v in values.split(",") if v.strip()]
        try:
            parsed = [v if kind is str else int(v) if kind is int else float(v) for v in items]
        except ValueError:
            raise SettingError(f"`grid` {key}={values.strip()}: not a list of {'integers' if kind is int else 'numbers'}") from None
        if len(set(parsed)) != len(parsed):
            raise SettingError(f"`grid` {key}: repeated value")
        grid[key] = parsed
    if not grid:
        raise SettingError(f"`grid` {text!r}: no values")
    return grid


def weights(s: EvalSettings, grid: dict[str, list] | None) -> list[float]:
    """The cache weights: the list of ``grid`` (parsed, ``parse_grid``; None without one), or
    ``cache_weight`` alone."""
    return (grid or {}).get(WEIGHT, [s.cache_weight])


def grid_values(s: EvalSettings, cls: type, grid: dict[str, list] | None) -> dict[str, list]:
    """Each grid setting of cache class ``cls``: its list in ``grid`` (parsed; None without one),
    or its single value as a list."""
    return {f.name: (grid or {}).get(grid_name(f), [getattr(s, f.name)])
            for f in dataclasses.fields(cls.Settings) if f.name in cls.grid}


def add_grid(result: dict, columns: list[dict], nlls, best: int, grid_out: Path | None, **meta) -> list[dict]:
    """The summary's ``grid`` (one row per scored column: its settings, perplexity, mean NLL and
    whether it is the best), ``best`` and ``grid_output``; the ``grid_out`` table (``meta`` in its
    provenance) and the log line. Returns the rows."""
    count = meta["tokens"]
    rows = [{**setting, "perplexity": ppl(float(nll), count), "nll": float(nll) / count, "best": i == best}
            for i, (setting, nll) in enumerate(zip(columns, nlls))]
    result.update(grid=rows, best=rows[best], grid_output=str(grid_out) if grid_out is not None else None)
    if grid_out is not None:
        write_grid(rows, Path(grid_out), provenance(GRID_STAGE, **meta))
    settings_text = ", ".join(f"{k} {v}" for k, v in rows[best].items() if k not in ("perplexity", "nll", "best"))
    log(f"grid of {len(rows)} settings in one pass; best: {settings_text}")
    return rows


def write_grid(rows: list[dict], path: Path, meta: dict) -> None:
    import pyarrow as pa

    from ..artifacts.atomic import atomic_path
    from ..artifacts.io import write_parquet

    with atomic_path(path) as tmp:
        write_parquet(pa.Table.from_pylist(rows), tmp, meta)


def ppl(nll: float, count: int) -> float:
    mean = nll / count
    return math.exp(mean) if mean < 700 else math.inf
