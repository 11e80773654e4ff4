"""Causal caches over a stream of hidden states, behind one small interface.

    cache = make_cache("local", thetas=[0.1, 0.3, 0.5], cache_size=10_000)
    for hidden, targets, model_logp in chunks:          # consecutive positions, in order
        cache_logp = cache.score(hidden, targets)       # [n, P]: one column per setting
        mixed = interpolate(model_logp, cache_logp, [0.05, 0.1])  # [n, P * 2]

Kinds (see each module for the paper and equations):

- ``unigram``   counts of previous targets (optionally the last ``cache_size`` only);
- ``local``     continuous cache of Grave et al. (2017c) over a window, several θ at once;
- ``unbounded`` kNN kernel density cache of Grave et al. (2017a) in a FAISS index.

``score`` is causal: the score of position t uses positions < t only (earlier positions of
the same chunk included).  Chunking does not change the results of ``unigram``, ``local``
and ``unbounded`` with an exact index ("Flat"); with a compressed index (IVF/PQ) neighbours
inside the current block are compared exactly and older ones through the index, so results
depend slightly on the block size.  NaN marks positions where the cache is empty (t = 0)
or undefined; ``interpolate`` falls back to the model there.

Each kind registers itself (``registry.register_cache``) with its ``groc eval`` settings, its
``grid`` settings, its checks and its construction from them; ``groc eval`` runs whichever
``CACHE_KINDS`` holds, including one registered outside this package (docs/extending.md).
"""

from __future__ import annotations

from .base import StreamCache, check_weights, interpolate
from .registry import CACHE_KINDS, CacheContext, ConfiguredCache, register_cache, setting_fields

# Registered in this order, the order of --cache's choices: unigram, local, unbounded.
from .unigram import UnigramCache  # noqa: E402, I001
from .local import LocalCache  # noqa: E402
from .unbounded import UnboundedCache  # noqa: E402

__all__ = [
    "CACHE_KINDS",
    "CacheContext",
    "ConfiguredCache",
    "LocalCache",
    "StreamCache",
    "UnboundedCache",
    "UnigramCache",
    "check_weights",
    "interpolate",
    "make_cache",
    "register_cache",
    "setting_fields",
]


def make_cache(kind: str, **options) -> StreamCache:
    """Build a cache: ``kind`` is unigram | local | unbounded; options go to its class.

    Raises ValueError (one line) for an unknown kind, an unknown option or a bad value,
    including a FAISS factory string that FAISS rejects.
    """
    try:
        cls = CACHE_KINDS[kind]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown cache kind {kind!r}; choose from {', '.join(CACHE_KINDS)}"
        ) from None
    import dataclasses
    import inspect

    options_class = cls.Options
    accepted = ({f.name for f in dataclasses.fields(options_class)} if options_class is not None
                else set(inspect.signature(cls).parameters))
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise ValueError(
            f"unknown option {unknown[0]!r} for the {kind} cache; "
            f"accepted: {', '.join(sorted(accepted))}"
        )
    return cls(**options) if options_class is None else cls(options_class(**options).checked())
