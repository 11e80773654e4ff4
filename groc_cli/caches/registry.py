"""The cache kinds ``groc eval`` knows, each owning its settings, grid keys and construction.

A cache class registers itself with ``@register_cache`` and declares, as class attributes:

    kind = "local"                      # the ``cache`` value
    source = "Grave et al. 2017c"       # shown beside it in ``cache``'s help (optional)
    Settings = LocalSettings            # a dataclass of setting() fields: its groc eval options
    grid = ("theta",)                   # the settings ``grid`` may sweep (lists in place of one value)

and implements ``from_settings`` (and, when it needs them, the checks below) as classmethods.
The evaluation calls them in this order, each with ``values``: every grid setting's list (the
``grid`` values, or the single setting's value):

1. ``check(s, values, chosen)``: before anything is read, for every registered kind (``chosen``
   False when another cache runs: settings that only make sense with this cache refuse there);
2. ``check_context(s, values, ctx)``: once the model's hidden size is known, before any work;
3. ``warmup(s, values, ctx)``: once the stream's length is known; the number of its first
   states the cache needs before it can be built (e.g. to train an index), 0 if none;
4. ``from_settings(s, values, ctx, first_states)``: the cache (``first_states``: those states).

Messages of ValueErrors raised by 1-3 name settings in backticks, as in "`knn` 0: must be
>= 1"; the command writes each as its flag, the API as the plain name (``errors``). Optional attributes:
``needs_hidden`` (False: ``score`` gets None for the hidden states), ``needs_length`` (True:
``groc eval`` only, not ``groc score`` or ``load_run``), ``reads`` and ``writes`` (settings naming
files). docs/extending.md walks through one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..settings import default_of, flag_of, hints

#: kind -> cache class, in the order of registration (the order of --cache's choices).
CACHE_KINDS: dict[str, type] = {}


@dataclass
class CacheContext:
    """What ``groc eval`` knows when it sets up a cache, filled in as it learns it."""

    dim: int  # hidden size of the model (the states' dimension)
    split: str  # the evaluated split, for messages
    has_states: bool = False  # evaluating from a ``groc dump`` directory (--states)
    device: str = "cpu"  # where the model runs: "cpu" or "cuda"
    torch_device: str = "cpu"  # the same as a torch device ("cuda:1"), for a cache that computes there
    total: int = 0  # predictions in the stream, once known
    #: SHA-256 of the weights whose hidden states the cache sees (the run's checkpoint, or the one a
    #: dump records); None where not known. A trained index records it (``index_save``) and is
    #: checked against it (``index_load``).
    model_checksum: str | None = None
    #: Opens the dump's hidden states ([total, dim], memory-mapped); None without --states.
    stored_states: Callable[[], Any] | None = None
    log: Callable[[str], None] = lambda text: None


class ConfiguredCache:
    """Defaults of the class methods a registered cache may override (see the module docstring)."""

    kind: str = ""
    #: The work it follows, shown in --cache's help: "local (Grave et al. 2017c)".
    source: str = ""
    Settings: type = type(None)
    #: A dataclass of its construction options, for a class built from one (``make_cache`` then
    #: passes ``Options(**options).checked()``); None: ``make_cache`` passes the keywords.
    Options: type | None = None
    grid: tuple[str, ...] = ()
    #: Whether ``score`` needs the hidden states (the unigram cache is given None).
    needs_hidden: bool = True
    #: Whether the cache needs the stream's length before it starts (``warmup``: checks against
    #: it, an index trained on its first states): then only ``groc eval`` runs it; ``groc score``
    #: and ``load_run``, which score lines as they come, offer every other registered cache.
    needs_length: bool = False
    #: Settings naming files the cache reads, and files it writes (claimed before any work,
    #: like the evaluation's own outputs; none may replace an input).
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()

    @classmethod
    def check(cls, s: Any, values: dict[str, list], chosen: bool) -> None:
        """Checks without the model; ValueError naming the setting in backticks."""

    @classmethod
    def check_context(cls, s: Any, values: dict[str, list], ctx: CacheContext) -> None:
        """Checks that need the hidden size (``ctx.dim``), before any work."""

    @classmethod
    def warmup(cls, s: Any, values: dict[str, list], ctx: CacheContext) -> int:
        """States of the stream (from its start) needed before the cache can be built."""
        return 0

    @classmethod
    def from_settings(cls, s: Any, values: dict[str, list], ctx: CacheContext,
                      first_states: np.ndarray | None = None):
        """The cache for these settings; ValueError (one line) for what FAISS or torch refuse."""
        raise NotImplementedError


def register_cache(cls: type) -> type:
    """Class decorator: make ``cls`` a ``cache`` kind of ``groc eval`` (see the module docstring).

    A setting declared by several kinds (``cache_size``) is one option: its declarations must
    agree (type, default, help)."""
    if not cls.kind or not dataclasses.is_dataclass(cls.Settings):
        raise TypeError(f"{cls.__name__}: a registered cache needs a kind and a Settings dataclass")
    names = {f.name: f for f in dataclasses.fields(cls.Settings)}
    missing = [g for g in cls.grid if g not in names]
    if missing:
        raise TypeError(f"{cls.__name__}: grid setting {missing[0]!r} is not one of its settings")
    known = {f.name: (f, owner) for f, owner in setting_fields()}
    for name, f in names.items():
        if name in known:
            other, owner = known[name]
            if (hints(owner)[name], default_of(other), other.metadata) != (hints(cls.Settings)[name], default_of(f),
                                                                            f.metadata):
                raise TypeError(f"{cls.__name__}: setting {name!r} differs from the one of {owner.__name__}")
    CACHE_KINDS[cls.kind] = cls
    return cls


def setting_fields() -> list[tuple[dataclasses.Field, type]]:
    """Every registered kind's settings once, each with the Settings class declaring it first.

    Each kind's own order is kept: a setting not seen yet goes before the first of its kind's
    later settings already placed (local's theta before the cache_size unigram declared), else
    at the end."""
    placed: list[tuple[dataclasses.Field, type]] = []
    for cls in CACHE_KINDS.values():
        own = dataclasses.fields(cls.Settings)
        for i, f in enumerate(own):
            names = [p.name for p, _ in placed]
            if f.name in names:
                continue
            later = [names.index(g.name) for g in own[i + 1:] if g.name in names]
            placed.insert(min(later) if later else len(placed), (f, cls.Settings))
    return placed


def grid_name(f: dataclasses.Field) -> str:
    """A setting's name in ``grid``: its flag without the dashes (bandwidth_scale -> bandwidth-scale)."""
    return flag_of(f)[2:]
