"""Unbounded cache of Grave et al. (2017a), sections 3.3-3.4 and 4.2.

Every past pair (h_i, y_i) goes into a FAISS index (IVFPQ by default: 4,096 coarse
centroids, 8 probes, 1,024 neighbours, as in section 4.2).  The cache distribution is the
variable-bandwidth kernel density estimate of equation 6:

    p_cache(w | h_t) ∝ Σ_{i in N(h_t), y_i = w} K(‖h_t − h_i‖ / (s · θ(h_t)))

where N(h_t) are the k nearest stored states, θ(h_t) is the Euclidean distance from h_t to
its k-th nearest neighbour (Terrell & Scott 1992) and s is ``bandwidth_scale`` (s = 1 is the
paper's estimator; larger s flattens it).  Kernels, as in section 3.3:
gaussian K(x) = exp(−x²/2); epanechnikov K(x) = max(0, 1 − x²) (its 3/4 factor cancels in
the normalisation).  With the Epanechnikov kernel and s = 1 the k-th neighbour gets weight
0; where every neighbour gets weight 0 (e.g. knn = 1) the cache is undefined (NaN).

Causality with chunks: the index holds the positions before a block; the block is searched
against it for k neighbours, merged with exact distances to the earlier positions of the
same block, the k nearest of the union are kept, then the block is added.  With "Flat" this
is exact token-by-token kNN.  Index distances are FAISS's (squared L2, approximate for PQ).

Training (IVF, PQ, OPQ, ...): ``train_vectors`` are the states the coarse quantizer
(k-means) and PQ codebooks are fitted on.  Use states from a training or held-out stream;
the first states of the evaluated stream also work but let the quantizer see future states
(never future targets).  ``save_trained``/``trained_index`` reuse a trained empty index.

Large datastores (``stored_states``): an index ending in an exact refinement stage
(",RFlat", e.g. "IVF4096,PQ32,RFlat") finds candidates with its compressed codes and
re-ranks them by exact distance.  In memory that stage keeps a float32 copy of every state
(4·d bytes each); given the stream's states on disk (a memory-mapped ``groc dump``), the
cache reads each candidate's state from there instead, so only the codes stay in memory.
Same candidates, same exact distances, same results.

Exact search in torch (``search="torch"``, ``knn_torch.py``): with the index "Flat", the
nearest neighbours are found by chunked matrix products and top-k in torch on the evaluation's
device, the states held in its memory (GPU memory on CUDA) or streamed from ``stored_states``.
It is FAISS's ``Flat`` search (same neighbours, distances to float32 rounding) for a GPU where
faiss-gpu is not installed; ``search`` auto picks it there.

Not every index FAISS builds can serve the cache (``index_problem``): it must take states
without ids, block after block, and return squared Euclidean distances between the states
themselves, because the kernel mixes them with the exact distances inside a block.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ..artifacts.atomic import atomic_path
from ..json_input import parse_json
from ..console import strict_json
from ..errors import SettingError, named
from ..faiss_build import load_faiss
from ..settings import setting
from .base import check_chunk
from .registry import CacheContext, ConfiguredCache, register_cache

class _Faiss:
    """The faiss module, imported where the unbounded cache first uses it. `groc score` and `generate` import
    this module (every cache registers) but never search, and FAISS's native library, loaded under an
    address-space limit (`ulimit -v`), can end the process by SIGSEGV before groc can say anything. Without a
    usable FAISS, groc eval's other caches run; this one refuses in its checks (``load_faiss``)."""

    def __getattr__(self, name: str):
        return getattr(load_faiss(), name)


faiss = _Faiss()

KERNELS = ("gaussian", "epanechnikov")
#: Where the exact refinement stage finds each state (--datastore).
DATASTORES = ("memory", "disk")
#: How the nearest neighbours are found (--search): see ``choose_search``.
SEARCHES = ("auto", "faiss", "torch")
#: States the default index is trained on when --index-train is not given (IVF4096 wants
#: about 39 points per centroid; FAISS warns below that).
DEFAULT_INDEX_TRAIN = 200_000
#: ``index`` auto: the paper's IVF4096,PQm where FAISS's k-means has its 39 training states per
#: list (MIN_POINTS_PER_LIST, FAISS's ClusteringParameters.min_points_per_centroid), else exact
#: search ("Flat"), which on such a datastore is as fast and gives the exact neighbours.
AUTO = "auto"
AUTO_LISTS = 4096
MIN_POINTS_PER_LIST = 39
# FAISS GPU indexes return at most this many neighbours (faiss/gpu/utils/DeviceDefs.cuh).
GPU_MAX_KNN = 2048
# float32 elements of one [queries, candidates, d] slab when re-ranking from stored states:
# 32 MB, whatever k and d are.
RERANK_ELEMENTS = 2**23


def _faiss_message(err: Exception) -> str:
    """FAISS errors read 'Error in <C++ signature> at <file>:<line>: <message>'; keep the message."""
    msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return re.sub(r"^Error in .*? at \S+:\d+: (Error: )?", "", msg)


def _parts(index: faiss.Index):
    """The index, every index and vector transform inside it, outermost first.  The caller
    keeps ``index`` alive: the parts are views into it."""
    stack = [index]
    while stack:
        part = faiss.downcast_index(stack.pop())
        yield part
        if isinstance(part, faiss.IndexPreTransform):
            for i in range(part.chain.size()):
                yield faiss.downcast_VectorTransform(part.chain.at(i))
            stack.append(part.index)
        elif isinstance(part, faiss.IndexRefine):
            stack += [part.refine_index, part.base_index]
        elif isinstance(part, (faiss.IndexIDMap, faiss.IndexIDMap2)):
            stack.append(part.index)


USABLE = "e.g. 'Flat' (exact), 'IVF4096,PQ32', 'HNSW32' or 'IVF4096,PQ32,RFlat'"


def index_problem(index: faiss.Index) -> str | None:
    """Why the cache cannot use ``index`` and what would work, or None when it can.

    FAISS builds all of these, and each one failed inside ``groc eval`` (a traceback after
    the index was trained, a crash, or silently wrong kernel weights)."""
    for part in _parts(index):
        if isinstance(part, (faiss.IndexIDMap, faiss.IndexIDMap2)):
            return ("IDMap stores states under ids given by the caller, but the cache adds them without ids "
                    "(a state's position is its id); drop 'IDMap'")
        if isinstance(part, faiss.IndexNSG):
            return ("NSG builds its graph once and cannot add states later, but the cache adds them block by block; "
                    "use HNSW32 (a graph that grows) or an IVF index such as 'IVF4096,PQ32'")
        if isinstance(part, faiss.Index2Layer):
            return "a two-level residual index (Residual...) cannot search; use an IVF index such as 'IVF4096,PQ32'"
        if isinstance(part, (faiss.IndexLSH, faiss.IndexIVFSpectralHash, faiss.ITQTransform, faiss.ITQMatrix)):
            return ("LSH, ITQ and spectral hashing compare binary codes by Hamming distance, not by the squared Euclidean "
                    f"distance the kernel needs; use a quantizer that approximates it, {USABLE}")
        if isinstance(part, faiss.NormalizationTransform):
            return ("L2norm scales every state to length 1, so its distances are not those between the states, which "
                    "the kernel mixes with exact distances inside a block; drop 'L2norm'")
        if isinstance(part, faiss.VectorTransform):
            if part.d_out > part.d_in and isinstance(part, faiss.PCAMatrix):
                return (f"PCA cannot output {part.d_out} dimensions from {part.d_in}-dimensional vectors; "
                        f"use PCA{part.d_in // 2} (or any size up to {part.d_in})")
            continue
        if part.metric_type != faiss.METRIC_L2:
            return (f"it compares vectors by {'inner product' if part.metric_type == faiss.METRIC_INNER_PRODUCT else 'a metric'} "
                    f"(FAISS metric {part.metric_type}), not by the squared Euclidean distance the kernel needs; "
                    f"build it with METRIC_L2, {USABLE}")
        if isinstance(part, faiss.IndexRefine) and not isinstance(faiss.downcast_index(part.refine_index),
                                                                   faiss.IndexFlatCodes):
            return ("its refinement stage must compare stored codes directly (Flat, SQ or PQ): "
                    "use ',RFlat' or 'Refine(SQfp16)'")
    return None


def exact_refinement(index: faiss.Index):
    """The index's exact refinement stage (",RFlat" or "Refine(Flat)"), or None."""
    part = faiss.downcast_index(index)
    if isinstance(part, faiss.IndexRefine) and type(faiss.downcast_index(part.refine_index)) in (
            faiss.IndexFlat, faiss.IndexFlatL2):
        return part
    return None


def is_flat(index: faiss.Index) -> bool:
    """Whether ``index`` is FAISS's exact search ("Flat"), the one ``search="torch"`` stands in for."""
    return type(faiss.downcast_index(index)) in (faiss.IndexFlat, faiss.IndexFlatL2)


def choose_search(search: str, flat: bool, device: str) -> str:
    """faiss or torch for ``search`` (one of SEARCHES) with an index that is or is not "Flat" on
    ``device`` ("cpu" or "cuda"): auto takes torch on CUDA when FAISS sees no GPU (faiss-gpu not
    installed) and the search is exact; faiss-gpu, where installed, stays the choice."""
    if search != "auto":
        return search
    return "torch" if device == "cuda" and flat and faiss.get_num_gpus() == 0 else "faiss"


@dataclass
class UnboundedSettings:
    """``groc eval``'s settings of ``cache`` unbounded (``knn``, ``kernel`` and ``bandwidth_scale``
    take a ``grid`` list)."""

    knn: int = setting(1024, "unbounded: neighbours k.")
    index: str = setting(AUTO, "unbounded: FAISS factory string ('Flat' is exact), or auto: 'Flat' when fewer states "
                         "train the index than IVF4096 needs (39 a list: 159,744), else the paper's 'IVF4096,PQm' (m the "
                         "largest divisor of the hidden size up to 32; ',RFlat' added for `datastore` disk); with "
                         "`index_load`, the loaded index's. The log and the record name the choice.")
    nprobe: int = setting(8, "unbounded: inverted lists visited per query (IVF indexes).")
    kernel: str = setting("gaussian", "unbounded: gaussian or epanechnikov.")
    bandwidth_scale: float = setting(1.0, "unbounded: multiplies the k-th-neighbour bandwidth (1 = paper).")
    index_train: int | None = setting(None, "unbounded, trainable index (IVF/PQ): train it on the first N states of "
                                      "the evaluated stream (default min(200000, tokens)); the quantizer sees those "
                                      "states, never their targets, before they are scored.")
    index_save: Path | None = setting(None, "unbounded: write the trained, empty FAISS index (quantizer and codebooks, "
                                      "no stored states) to this file for `index_load`.")
    index_load: Path | None = setting(None, "unbounded: use a trained index from `index_save` instead of training "
                                      "one (e.g. trained on valid states, used on test).")
    datastore: str = setting("memory", "unbounded, large datastores: where an index ending in ',RFlat' (exact "
                             "re-ranking of its candidates) reads each state. memory: a float32 copy inside the index, "
                             "4 x d bytes a state. disk: the memory-mapped `states` dump, so only the index's codes "
                             "stay in memory (44 bytes a state for IVF...,PQ32); same results. With `search` torch "
                             "and 'Flat': memory holds the states on the device, disk streams them from `states`.")
    search: str = setting("auto", "unbounded: nearest-neighbour search. faiss: the FAISS index (on the GPU where "
                          "faiss-gpu is installed); torch: exact search in torch on the evaluation's device (chunked "
                          "matrix products and top-k; needs `index` Flat); auto: torch on CUDA when FAISS sees no GPU "
                          "and the index is Flat, else faiss.")


def _whole(n) -> bool:
    """A whole number >= 1 (2.0 is; True and "2" are not)."""
    return not isinstance(n, (bool, str)) and int(n) == n and n >= 1


def _as_list(x, name: str) -> list:
    if isinstance(x, (str, int, float)):
        x = [x]
    x = list(x)
    if not x:
        raise ValueError(f"{name} needs at least one value")
    return x


@dataclass(frozen=True)
class UnboundedOptions:
    """The unbounded cache's construction options (``make_cache``'s keywords, with these defaults).

    dim: hidden size (inferred from train_vectors when None; needed to build the index
        at construction, so a bad factory string fails early).
    index: FAISS factory string, e.g. "IVF4096,PQ32" (paper) or "Flat" (exact, stores
        full vectors).  Metric: L2.
    nprobe: inverted lists visited per query (IVF indexes only).
    knn: number of neighbours k, or several (one column group each; the index is searched
        once for the largest and each smaller k uses a prefix of the sorted neighbours).
        Fewer than k stored entries: the ones that exist are used.
    kernels: "gaussian" and/or "epanechnikov".
    bandwidth_scales: s, multiplies the k-th-neighbour bandwidth (1.0 = paper).
    train_vectors: float32 [N, dim] for trainable indexes (see module docstring).
    trained_index: path written by ``save_trained``; replaces training.
    use_gpu: "auto" (FAISS GPU when faiss.get_num_gpus() > 0), True or False.
    block_size: positions searched per batch.  No effect on results with an exact index
        ("Flat"); with IVF/PQ, neighbours inside the block are compared exactly and older
        ones through the index, so results shift slightly with the block size.
    stored_states: [N, dim] array-like, row i the i-th state ``score`` will add (e.g. a
        dump's hidden.npy opened with ``np.load(..., mmap_mode="r")``).  Needs an index with
        an exact refinement stage (",RFlat"), which then reads candidates' states from here
        instead of keeping a float32 copy of each; see the module docstring.  With
        search="torch", the exact search streams every state from here instead.
    search: "faiss" (the index), "torch" (exact search in torch, ``index`` "Flat") or "auto"
        (``choose_search`` on ``device``).
    device: where search="torch" computes and keeps the states (a torch device).
    """

    dim: int | None = None
    index: str = "IVF4096,PQ32"
    nprobe: int = 8
    knn: int | Sequence[int] = 1024
    kernels: str | Sequence[str] = ("gaussian",)
    bandwidth_scales: float | Sequence[float] = (1.0,)
    train_vectors: np.ndarray | None = None
    trained_index: str | os.PathLike | None = None
    use_gpu: bool | str = "auto"
    block_size: int = 1024
    stored_states: np.ndarray | None = None
    search: str = "faiss"
    device: str = "cpu"

    def checked(self) -> UnboundedOptions:
        """These options checked (ValueError naming the bad one; the settings' own check, ``check``,
        for those it shares with them), then ``normalised``; ``dim`` from ``train_vectors`` if None."""
        knns = _as_list(self.knn, "knn")
        kernels = _as_list(self.kernels, "kernels")
        scales = [float(s) for s in _as_list(self.bandwidth_scales, "bandwidth_scales")]
        try:  # its messages name the settings
            UnboundedCache.check(UnboundedSettings(index=self.index, nprobe=self.nprobe, search=self.search),
                                 {"knn": knns, "kernel": kernels, "bandwidth_scale": scales}, chosen=True)
        except SettingError:
            raise  # its str() names the settings plainly
        except ValueError as exc:
            raise ValueError(named(str(exc))) from None
        if int(self.block_size) != self.block_size or self.block_size < 1:
            raise ValueError(f"block_size must be an integer >= 1, got {self.block_size}")
        if self.use_gpu not in ("auto", True, False):
            raise ValueError(f"use_gpu must be 'auto', True or False, got {self.use_gpu!r}")
        dim, train_vectors = self.dim, self.train_vectors
        if train_vectors is not None:
            train_vectors = np.ascontiguousarray(train_vectors, dtype=np.float32)
            if train_vectors.ndim != 2 or len(train_vectors) == 0:
                raise ValueError(
                    f"train_vectors must be a non-empty [N, dim] array, got {train_vectors.shape}"
                )
            if dim is None:
                dim = train_vectors.shape[1]
        if dim is None or int(dim) != dim or dim < 1:
            raise ValueError("unbounded cache needs dim (the hidden size) or train_vectors")
        if train_vectors is not None and train_vectors.shape[1] != int(dim):
            raise ValueError(
                f"train_vectors have dimension {train_vectors.shape[1]}, expected {int(dim)}"
            )
        return dataclasses.replace(self, dim=dim, train_vectors=train_vectors).normalised()

    def normalised(self) -> UnboundedOptions:
        """The options as the cache keeps them: lists of ints, strings and floats, float32
        ``train_vectors``, plain ``dim``, ``index``, ``nprobe``, ``block_size`` and ``device``."""
        vectors = self.train_vectors
        return dataclasses.replace(
            self, dim=int(self.dim), index=str(self.index), nprobe=int(self.nprobe),
            knn=[int(k) for k in _as_list(self.knn, "knn")], kernels=list(_as_list(self.kernels, "kernels")),
            bandwidth_scales=[float(s) for s in _as_list(self.bandwidth_scales, "bandwidth_scales")],
            train_vectors=None if vectors is None else np.ascontiguousarray(vectors, dtype=np.float32),
            block_size=int(self.block_size), device=str(self.device))


@register_cache
class UnboundedCache(ConfiguredCache):
    """kNN cache over every previous position, in a FAISS index, built from ``UnboundedOptions``
    (``make_cache("unbounded", ...)``: their keywords, checked).

    Columns of ``score`` (see ``settings``): for each k, for each kernel, for each s.
    """

    kind = "unbounded"
    source = "Grave et al. 2017a"
    Settings = UnboundedSettings
    Options = UnboundedOptions
    grid = ("knn", "kernel", "bandwidth_scale")
    needs_length = True  # `knn` is checked against the stream's length, an index trained on its start
    reads = ("index_load",)
    writes = ("index_save",)

    def __init__(self, options: UnboundedOptions):
        """The cache of ``options``: checked (``UnboundedOptions.checked``), or normalised from
        settings ``check`` passed (``from_settings``)."""
        o = options
        self.dim, self.factory, self.nprobe = o.dim, o.index, o.nprobe
        self.knns, self.kernels, self.scales = o.knn, o.kernels, o.bandwidth_scales
        self.block_size = o.block_size
        self.device = o.device
        self._index = self._new_index()
        import torch  # here, not at import: eval's help reads this module's settings without torch

        self.search = choose_search(o.search, is_flat(self._index), torch.device(o.device).type)
        use_gpu = o.use_gpu
        if self.search == "torch":
            if not is_flat(self._index):
                raise ValueError(f"search='torch' is exact search: it replaces index 'Flat', not {self.factory!r}")
            use_gpu = False  # no FAISS index is searched
        self.use_gpu = faiss.get_num_gpus() > 0 if use_gpu == "auto" else bool(use_gpu)
        if self.use_gpu and faiss.get_num_gpus() == 0:
            raise ValueError(
                "use_gpu=True but FAISS sees no GPU (install faiss-gpu, or use_gpu='auto')"
            )
        if self.use_gpu and max(self.knns) > GPU_MAX_KNN:
            raise ValueError(f"knn must be <= {GPU_MAX_KNN} with a FAISS GPU index")
        self.train_seconds = 0.0
        self.train_info: dict = {}
        self._ids = np.zeros(1024, dtype=np.int32)  # target id of each stored position
        self._gpu_res = None
        self._stored_states = o.stored_states
        self._fill(o.train_vectors, o.trained_index)
        self.settings = [
            {
                "kind": "unbounded",
                "index": self.factory,
                "nprobe": self.nprobe,
                "knn": k,
                "kernel": kern,
                "bandwidth_scale": s,
            }
            for k in self.knns
            for kern in self.kernels
            for s in self.scales
        ]
        self.config = {
            "kind": "unbounded",
            "dim": self.dim,
            "index": self.factory,
            "nprobe": self.nprobe,
            "knn": self.knns,
            "kernels": self.kernels,
            "bandwidth_scales": self.scales,
            "use_gpu": self.use_gpu,
            "search": self.search if self.search == "faiss" else f"torch ({self.device})",
            "block_size": self.block_size,
            "datastore": "memory" if o.stored_states is None else "stored_states",
            "training": self.train_info,
        }

    def _fill(self, train_vectors: np.ndarray | None, trained_index) -> None:
        """The index made ready for states: loaded from ``trained_index`` or trained on
        ``train_vectors`` where it needs training, and attached (see ``_attach``)."""
        stored_states = self._stored_states
        # _index: the whole index, on the CPU (trained, saved, loaded). _store: what states are
        # added to and searched in: _index, or with stored_states its stage before the exact
        # one; a GPU copy when a GPU is used; the torch search for search="torch" (_attach).
        self._store = self._index
        if stored_states is not None and self.search == "faiss":
            if exact_refinement(self._index) is None:
                raise ValueError(
                    f"index {self.factory!r} has no exact refinement stage to read stored_states from; "
                    f"end it with ',RFlat' (e.g. 'IVF4096,PQ32,RFlat')"
                )
        if stored_states is not None:
            shape = getattr(stored_states, "shape", ())
            if len(shape) != 2 or shape[1] != self.dim:
                raise ValueError(f"stored_states must be [N, {self.dim}], got shape {tuple(shape)}")
        if trained_index is not None:
            self.load_trained(trained_index)
        elif not self._index.is_trained:
            if train_vectors is None:
                raise ValueError(
                    f"index {self.factory!r} needs training: pass train_vectors "
                    "or a trained_index saved by save_trained"
                )
            self._train(train_vectors)
        if trained_index is None:  # load_trained attaches what it loads
            self._attach()

    # ---- groc eval: checks and construction from the settings ---------------------------

    @classmethod
    def check(cls, s: UnboundedSettings, values: dict[str, list], chosen: bool) -> None:
        """The settings' values, before anything is read (the constructor's arguments too)."""
        if chosen:
            load_faiss()
        if not _whole(s.nprobe):
            raise SettingError(f"`nprobe` {s.nprobe}: must be >= 1")
        if s.index_train is not None and s.index_train < 1:
            raise SettingError(f"`index_train` {s.index_train}: must be >= 1")
        for k in values["knn"]:
            if not _whole(k):
                raise SettingError(f"`knn` {k}: must be >= 1")
        for k in values["kernel"]:
            if k not in KERNELS:
                raise SettingError(f"`kernel` {k!r}: expected one of {', '.join(KERNELS)}")
        for b in values["bandwidth_scale"]:
            if not (b > 0 and math.isfinite(b)):
                raise SettingError(f"`bandwidth_scale` {b}: must be > 0")
        if (s.index_save or s.index_load) and not chosen:
            raise SettingError("`index_save` and `index_load` apply to `cache` unbounded only")
        if s.index_save and s.index_load:
            raise SettingError("give `index_save` or `index_load`, not both (a loaded index is already saved)")
        if s.index_load and not Path(s.index_load).is_file():
            raise SettingError(f"`index_load` {s.index_load}: no such file; write one with `index_save`")
        if s.datastore not in DATASTORES:
            raise SettingError(f"`datastore` {s.datastore!r}: expected one of {', '.join(DATASTORES)}")
        if s.datastore == "disk" and not chosen:
            raise SettingError("`datastore` disk applies to `cache` unbounded only")
        if s.search not in SEARCHES:
            raise SettingError(f"`search` {s.search!r}: expected one of {', '.join(SEARCHES)}")
        if s.search != "auto" and not chosen:
            raise SettingError(f"`search` {s.search} applies to `cache` unbounded only")

    @classmethod
    def check_context(cls, s: UnboundedSettings, values: dict[str, list], ctx: CacheContext) -> None:
        """A ``datastore`` disk without ``states``, and a factory string FAISS rejects or the cache
        cannot use: refused before any work."""
        if s.datastore == "disk" and not ctx.has_states:
            raise SettingError("`datastore` disk reads the states from a dump: add `states` DIR "
                             "(written by 'groc dump RUN DATASET --split S -o DIR')")
        if s.index_load:
            cls._check_trained_on(Path(s.index_load), ctx)
        cls._empty_index(cls.resolved(s, ctx.dim, ctx.total)[0], ctx.dim, ctx.device)

    @classmethod
    def _check_trained_on(cls, path: Path, ctx: CacheContext) -> None:
        """A trained index for other states (another model's, another hidden size), or one whose record
        of them is missing or unreadable, refused before any work: its quantizer would place this
        model's states in cells drawn for another's, silently worse neighbours."""
        record = path.with_name(path.name + ".json")
        again = "train one on this model's states with `index_save`"
        try:
            meta = parse_json(record.read_bytes())
        except FileNotFoundError:
            raise SettingError(f"`index_load` {path}: its record {record.name} beside it is missing, so the states it "
                               f"was trained on cannot be checked; {again}") from None
        except (OSError, ValueError) as exc:
            raise SettingError(f"`index_load` {path}: its record {record} is not one groc writes ({exc}); "
                               f"{again}") from None
        states = meta.get("states") if isinstance(meta, dict) else None
        if not isinstance(states, dict):
            raise SettingError(f"`index_load` {path}: its record {record.name} does not say which states it was "
                               f"trained on (written before groc recorded them); {again}")
        if states.get("dim") != ctx.dim:
            raise SettingError(f"`index_load` {path} was trained on {states.get('dim')}-dimensional states; this "
                               f"model's are {ctx.dim}-dimensional: {again}")
        if ctx.model_checksum is not None and states.get("model_checksum") != ctx.model_checksum:
            raise SettingError(f"`index_load` {path} was trained on another model's states (weights "
                               f"{str(states.get('model_checksum'))[:12]}, these are {ctx.model_checksum[:12]}); "
                               f"{again}")

    @classmethod
    def resolved(cls, s: UnboundedSettings, dim: int, total: int) -> tuple[UnboundedSettings, str]:
        """``s`` with ``index`` auto replaced by the index it chooses for ``dim``-dimensional states and a
        stream of ``total`` predictions (0: not yet known, then the IVF choice, to check the other
        settings against), and why (empty when ``index`` was given)."""
        if s.index != AUTO:
            return s, ""
        if s.index_load:
            meta = Path(s.index_load).with_name(Path(s.index_load).name + ".json")
            try:
                factory = parse_json(meta.read_bytes())["factory"]
            except (OSError, ValueError, KeyError, TypeError):
                raise SettingError(f"`index` auto takes the loaded index's factory string from {meta}, which is "
                                   "missing or unreadable: give `index` (the one `index_save` was given)") from None
            if not isinstance(factory, str) or not factory:
                raise SettingError(f"`index` auto: {meta} names no factory string: give `index`")
            return dataclasses.replace(s, index=factory), f"the loaded index's, {s.index_load}"
        if s.search == "torch":
            return dataclasses.replace(s, index="Flat"), "exact search in torch"
        need = AUTO_LISTS * MIN_POINTS_PER_LIST
        n_train = min(s.index_train or DEFAULT_INDEX_TRAIN, total)
        if total and n_train < need:
            return dataclasses.replace(s, index="Flat"), (
                f"exact: {n_train:,} training states, fewer than the {need:,} IVF{AUTO_LISTS} needs")
        m = max(d for d in range(1, 33) if dim % d == 0)
        factory = f"IVF{AUTO_LISTS},PQ{m}" + (",RFlat" if s.datastore == "disk" else "")
        return dataclasses.replace(s, index=factory), f"IVF-PQ, trained on {n_train:,} states" if total else ""

    @classmethod
    def _empty_index(cls, s: UnboundedSettings, dim: int, device: str) -> faiss.Index:
        """The (empty) index of ``s.index``, built to check it, and the search with it on ``device``,
        and to inspect it (``is_trained``, IVF list count)."""
        try:
            index = faiss.index_factory(dim, s.index, faiss.METRIC_L2)
        except Exception as err:
            raise SettingError(f"`index` {s.index!r}: FAISS rejected it for {dim}-dimensional states "
                             f"({_faiss_message(err)}); give a factory string valid for that size, or 'Flat'") from None
        problem = index_problem(index)
        if problem:
            raise SettingError(f"`index` {s.index!r}: FAISS builds it, but the unbounded cache cannot use it: {problem}")
        search = choose_search(s.search, is_flat(index), device)
        if search == "torch" and not is_flat(index):
            raise SettingError(f"`search` torch is exact search, in place of FAISS's 'Flat': give `index` Flat, not "
                             f"{s.index!r} (or `search` faiss for a compressed index)")
        if s.datastore == "disk" and search == "faiss" and exact_refinement(index) is None:
            raise SettingError(f"`index` {s.index!r} has no exact refinement stage for `datastore` disk to read states "
                             "for; end it with ',RFlat' (e.g. 'IVF4096,PQ32,RFlat'), or search exactly with `index` "
                             "Flat and `search` torch, which streams every state from the dump")
        return index

    @classmethod
    def warmup(cls, s: UnboundedSettings, values: dict[str, list], ctx: CacheContext) -> int:
        """The states an index that needs training is trained on (the first ``index_train`` of
        the stream); checks that need the stream's length."""
        # The last prediction sees total - 1 stored states: a larger k is never filled.
        k, total = max(values["knn"]), ctx.total
        if k > total - 1:
            raise SettingError(f"`knn` {k} is larger than the datastore can ever hold: the {ctx.split} split has "
                             f"{total:,} predictions, so at most {total - 1:,} states precede the last one; choose "
                             f"`knn` <= {max(total - 1, 1):,}")
        s = cls.resolved(s, ctx.dim, total)[0]
        index = cls._empty_index(s, ctx.dim, ctx.device)
        if index.is_trained or s.index_load:
            return 0
        n_train = min(s.index_train or DEFAULT_INDEX_TRAIN, total)
        ivf = cls._ivf(index)
        nlist = faiss.downcast_index(ivf).nlist if ivf is not None else 0
        if nlist and n_train < nlist:
            raise SettingError(f"`index` {s.index}: its {nlist:,} inverted lists need at least {nlist:,} training states, "
                             f"but only {n_train:,} are used (`index_train`, the split's length); use a smaller IVF "
                             "(about 1 list per 40 states), or 'Flat'")
        return n_train

    @classmethod
    def from_settings(cls, s: UnboundedSettings, values: dict[str, list], ctx: CacheContext,
                      first_states: np.ndarray | None = None) -> "UnboundedCache":
        """The cache, trained on ``first_states`` (see ``warmup``) or loaded from ``index_load``;
        a trained index is saved to ``index_save``."""
        s, why = cls.resolved(s, ctx.dim, ctx.total)
        if why:
            ctx.log(f"unbounded cache: index auto is {s.index} ({why})")
        if first_states is not None:
            ctx.log(f"training FAISS index {s.index} on the first {len(first_states):,} states of the stream")
        flat = is_flat(cls._empty_index(s, ctx.dim, ctx.device))
        search = choose_search(s.search, flat, ctx.device)
        if search == "torch":
            ctx.log(f"exact nearest-neighbour search in torch on {ctx.torch_device}"
                    f"{' (FAISS sees no GPU)' if s.search == 'auto' else ''}")
        elif ctx.device == "cuda" and faiss.get_num_gpus() == 0:
            ctx.log(f"FAISS sees no GPU (faiss-gpu is not installed): searching {s.index} on the CPU"
                    f"{'' if flat else '; `index` Flat `search` torch would search exactly on the GPU'}")
        cache = cls(UnboundedOptions(
            dim=ctx.dim, index=s.index, nprobe=s.nprobe, knn=values["knn"], kernels=values["kernel"],
            bandwidth_scales=values["bandwidth_scale"], train_vectors=first_states, trained_index=s.index_load,
            use_gpu="auto" if ctx.device == "cuda" else False, search=search, device=ctx.torch_device,
            stored_states=ctx.stored_states() if s.datastore == "disk" else None).normalised())
        if s.index_save:
            cache.save_trained(s.index_save, states={"model_checksum": ctx.model_checksum, "dim": ctx.dim,
                                                     "split": ctx.split})
            ctx.log(f"wrote the trained empty index to {s.index_save} (reuse it with `index_load`)")
        return cache

    # ---- index construction, training, persistence -------------------------------------

    def _new_index(self) -> faiss.Index:
        try:
            index = faiss.index_factory(self.dim, self.factory, faiss.METRIC_L2)
        except Exception as err:  # FAISS raises RuntimeError with a C++ trace
            raise ValueError(
                f"FAISS rejected index {self.factory!r} for dim {self.dim}: {_faiss_message(err)}"
            ) from None
        problem = index_problem(index)
        if problem:
            raise ValueError(f"index {self.factory!r} cannot serve the cache: {problem}")
        self._set_nprobe(index)
        # The factory turns on polysemous training for 8-bit PQ; it only reorders codebook
        # entries for Hamming pre-filtering, which we never use (search results are the
        # same), and it dominates training time.
        for sub in (index, self._ivf(index)):
            sub = faiss.downcast_index(sub) if sub is not None else None
            if hasattr(sub, "do_polysemous_training"):
                sub.do_polysemous_training = False
        return index

    @staticmethod
    def _ivf(index: faiss.Index):
        try:
            return faiss.extract_index_ivf(index)
        except Exception:  # not an IVF index
            return None

    def _set_nprobe(self, index: faiss.Index) -> None:
        ivf = self._ivf(index)
        if ivf is not None:
            ivf.nprobe = self.nprobe

    def _train(self, vectors: np.ndarray) -> None:
        start = time.perf_counter()
        try:
            self._index.train(vectors)
        except Exception as err:
            raise ValueError(
                f"training FAISS index {self.factory!r} on {len(vectors)} vectors failed: "
                f"{_faiss_message(err)}"
            ) from None
        self.train_seconds = time.perf_counter() - start
        self.train_info.update(
            source="train_vectors",
            num_vectors=int(len(vectors)),
            sha256=hashlib.sha256(vectors.tobytes()).hexdigest(),
            seconds=round(self.train_seconds, 3),
        )

    def _coded(self) -> faiss.Index:
        """The CPU index whose codes the cache keeps: without its refinement stage when
        that stage reads stored_states."""
        if self._stored_states is None:
            return self._index
        return faiss.downcast_index(exact_refinement(self._index).base_index)

    def _attach(self) -> None:
        if self.search == "torch":
            from .knn_torch import TorchExactSearch

            self._store = TorchExactSearch(self.dim, self.device, self._stored_states)
            return
        store = self._coded()
        if self.use_gpu:
            self._gpu_res = self._gpu_res or faiss.StandardGpuResources()
            try:
                store = faiss.index_cpu_to_gpu(self._gpu_res, 0, store)
            except Exception as err:
                raise SettingError(
                    f"index {self.factory!r} cannot run on the GPU ({_faiss_message(err)}); "
                    "search on the CPU instead (use_gpu=False; in groc eval, `device` cpu)"
                ) from None
            try:
                faiss.GpuParameterSpace().set_index_parameter(store, "nprobe", self.nprobe)
            except Exception:  # no nprobe on this index type
                pass
        self._store = store

    def save_trained(self, path: str | os.PathLike, states: dict | None = None) -> None:
        """Write the trained, empty index to ``path`` (atomic) and provenance to ``path``.json:
        ``states`` says which states it was trained on (the weights' checksum, their dimension, the
        split), which ``groc eval`` checks when it loads the index."""
        path = Path(path)
        index = faiss.clone_index(self._index)
        index.reset()  # keep the quantizers, drop the stored codes (if any are on the CPU)
        meta = {
            "format": "groc-faiss-trained-index/1",
            "factory": self.factory,
            "dim": self.dim,
            "metric": "L2",
            "faiss_version": faiss.__version__,
            "training": self.train_info,
        }
        if states is not None:
            meta["states"] = {**states, "count": self.train_info.get("num_vectors")}
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path.with_name(path.name + ".json")) as tmp:
            tmp.write_text(strict_json(meta, indent=2) + "\n")
        with atomic_path(path) as tmp:
            faiss.write_index(index, str(tmp))

    def load_trained(self, path: str | os.PathLike) -> None:
        """Use the trained empty index saved at ``path`` (only while the cache is empty)."""
        if len(self):
            raise ValueError("load_trained needs an empty cache")
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"trained index {str(path)!r} does not exist")
        meta_path = path.with_name(path.name + ".json")
        try:
            meta = parse_json(meta_path.read_bytes()) if meta_path.is_file() else {}
        except ValueError as exc:
            raise ValueError(f"trained index {str(path)!r}: its record {meta_path.name} is not JSON groc wrote "
                             f"({exc})") from None
        if not isinstance(meta, dict):
            raise ValueError(f"trained index {str(path)!r}: its record {meta_path.name} is not a JSON object")
        if meta and (meta.get("factory") != self.factory or meta.get("dim") != self.dim):
            raise ValueError(
                f"trained index {str(path)!r} is {meta.get('factory')!r} for dim "
                f"{meta.get('dim')}, expected {self.factory!r} for dim {self.dim}"
            )
        try:
            index = faiss.read_index(str(path))
        except Exception as err:
            raise ValueError(f"cannot read FAISS index {str(path)!r}: {_faiss_message(err)}") from None
        # Compare with the class FAISS reads back, not the one the factory builds: "Flat"
        # builds an IndexFlat and reads back as an IndexFlatL2.
        fresh = faiss.deserialize_index(faiss.serialize_index(self._new_index()))
        if (
            index.d != self.dim
            or type(faiss.downcast_index(index)) is not type(faiss.downcast_index(fresh))
            or not index.is_trained
            or index.ntotal != 0
        ):
            raise ValueError(
                f"{str(path)!r} is not a trained empty {self.factory!r} index for dim {self.dim}"
            )
        problem = index_problem(index)
        if problem:
            raise ValueError(f"trained index {str(path)!r} cannot serve the cache: {problem}")
        self._set_nprobe(index)
        self._index = index
        self.train_seconds = 0.0
        self.train_info = dict(meta.get("training", {}), source=str(path))
        if getattr(self, "config", None):
            self.config["training"] = self.train_info
        self._attach()

    # ---- scoring --------------------------------------------------------------------------

    def __len__(self) -> int:
        return int(self._store.ntotal)

    @property
    def nbytes(self) -> int:
        """Stored codes + FAISS ids (8 bytes each) + our target ids (the torch search: float32
        states and their norms + target ids); excludes quantizers and stored_states (on disk)."""
        try:
            per_state = (self._store.bytes_per_state if self.search == "torch"
                         else self._bytes_per_state(self._coded()))
        except Exception:
            per_state = 4 * self.dim
        return len(self) * (per_state + self._ids.itemsize)

    @classmethod
    def _bytes_per_state(cls, index: faiss.Index) -> int:
        part = faiss.downcast_index(index)
        if isinstance(part, faiss.IndexRefine):
            return cls._bytes_per_state(part.base_index) + cls._bytes_per_state(part.refine_index)
        ivf = cls._ivf(part)
        if ivf is not None:  # a list holds each code with an 8-byte id, without the list number
            return faiss.downcast_index(ivf).code_size + 8
        return part.sa_code_size()

    def score(self, hidden: np.ndarray, targets: np.ndarray) -> np.ndarray:
        h, y = check_chunk(hidden, targets, self.dim, need_hidden=True)
        out = np.empty((len(y), len(self.settings)), dtype=np.float64)
        for a in range(0, len(y), self.block_size):
            b = min(a + self.block_size, len(y))
            out[a:b] = self._score_block(h[a:b], y[a:b])
        return out

    def _score_block(self, h: np.ndarray, y: np.ndarray) -> np.ndarray:
        n, stored, kmax = len(y), len(self), max(self.knns)
        # Neighbours among the positions before the block (squared L2, sorted ascending).
        if stored:
            dist_idx, pos = self._search(h, min(kmax, stored))
            lab_idx = self._ids[np.maximum(pos, 0)].astype(np.int64)
            dist_idx = np.where(pos >= 0, np.maximum(dist_idx, 0), np.inf)
        else:
            dist_idx = np.zeros((n, 0))
            lab_idx = np.zeros((n, 0), dtype=np.int64)
        import torch

        # Exact distances to earlier positions of the block (float64: no cancellation blow-up).
        q = torch.from_numpy(h).double()
        sq = (q * q).sum(1)
        dist_in = (sq[:, None] + sq[None, :] - 2.0 * (q @ q.T)).clamp_(min=0.0)
        dist_in.masked_fill_(torch.ones(n, n, dtype=torch.bool).triu_(), torch.inf)
        dist = torch.cat([torch.from_numpy(dist_idx).double(), dist_in], dim=1)
        labels = torch.cat(
            [torch.from_numpy(lab_idx), torch.from_numpy(y)[None, :].expand(n, n)], dim=1
        )
        k_keep = min(kmax, dist.shape[1])
        dist, order = torch.topk(dist, k_keep, dim=1, largest=False, sorted=True)
        same = (torch.gather(labels, 1, order) == torch.from_numpy(y)[:, None]).numpy()
        dist = dist.numpy()

        out = np.empty((n, len(self.settings)), dtype=np.float64)
        col = 0
        for k in self.knns:
            d_k = dist[:, :k]
            found = np.isfinite(d_k)
            count = found.sum(1)
            # θ(h_t)²: squared distance to the k-th neighbour (or the farthest that exists).
            bw2 = np.take_along_axis(d_k, np.maximum(count - 1, 0)[:, None], 1)[:, 0]
            bw2 = np.where(count > 0, bw2, np.nan)
            for kernel in self.kernels:
                for s in self.scales:
                    with np.errstate(divide="ignore", invalid="ignore"):
                        u2 = np.where(bw2[:, None] > 0, d_k / (s * s * bw2[:, None]), 0.0)
                        u2 = np.where(found, u2, np.inf)
                        if kernel == "gaussian":
                            # Shift by the nearest neighbour's u² (cancels in the ratio) so
                            # that small bandwidth scales cannot underflow every weight.
                            weight = np.exp(-0.5 * (u2 - u2.min(1, keepdims=True)))
                        else:
                            weight = np.maximum(1.0 - u2, 0.0)
                        den = weight.sum(1)
                        num = np.where(same[:, :k], weight, 0.0).sum(1)
                        res = np.log(num) - np.log(den)
                    res[~(den > 0)] = np.nan
                    out[:, col] = res
                    col += 1
        self._add(h, y)
        return out

    def _search(self, h: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        if self._stored_states is None or self.search == "torch":
            return self._store.search(h, k)
        # faiss::IndexRefine::search with the refinement stage's vectors read from
        # stored_states: k * k_factor candidates from the codes, each at its exact distance.
        # They are not cut to the k nearest here: _score_block keeps the k nearest of them and
        # the block's own positions, which are the same k.
        k_base = int(k * exact_refinement(self._index).k_factor)
        _, pos = self._store.search(h, k_base)
        # The candidates' rows are gathered (np.take: several times faster than memmap
        # indexing), converted to float32 (torch: faster than numpy for float16), and compared
        # by the routine faiss::IndexFlat::compute_distance_subset uses, so the distances are
        # bit for bit those of the in-memory stage.
        import torch

        dist = np.empty(pos.shape, dtype=np.float32)
        rows = max(1, RERANK_ELEMENTS // (k_base * self.dim))
        gathered, converted = self._rerank_buffers(rows * k_base)
        for a in range(0, len(h), rows):
            p = pos[a : a + rows]
            x16 = np.take(self._stored_states, np.maximum(p, 0).ravel(), axis=0, out=gathered[: p.size], mode="clip")
            x = converted[: p.size]
            torch.from_numpy(x).copy_(torch.from_numpy(x16))
            local = np.where(p >= 0, np.arange(p.size).reshape(p.shape), -1)  # -1: no candidate (inf)
            q, out = np.ascontiguousarray(h[a : a + rows]), dist[a : a + rows]
            faiss.fvec_L2sqr_by_idx(faiss.swig_ptr(out), faiss.swig_ptr(q), faiss.swig_ptr(x), faiss.swig_ptr(local),
                                    self.dim, len(p), k_base)
        return dist, pos

    def _rerank_buffers(self, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """[rows, dim] buffers for the gathered states and their float32 copies, kept from
        block to block: fresh ones each time grew the heap by gigabytes (glibc serves
        allocations under its adaptive mmap threshold, up to 32 MiB, from the heap, and the
        index's growing lists kept what was freed from being returned)."""
        have = getattr(self, "_buffers", None)
        if have is None or len(have[0]) < rows:
            self._buffers = (np.empty((rows, self.dim), dtype=self._stored_states.dtype),
                             np.empty((rows, self.dim), dtype=np.float32))
        return self._buffers

    def _add(self, h: np.ndarray, y: np.ndarray) -> None:
        start, end = len(self), len(self) + len(y)
        if self._stored_states is not None:
            # Distances are read from stored_states by position: the states added must be its rows.
            rows = np.asarray(self._stored_states[start:end], dtype=np.float32)
            if rows.shape != h.shape or not np.array_equal(rows, h):
                raise ValueError(
                    f"the states added at positions {start}..{end - 1} are not rows {start}..{end - 1} "
                    "of stored_states; pass the stream's own states, in order"
                )
        if end > len(self._ids):
            grown = np.zeros(max(end, 2 * len(self._ids)), dtype=np.int32)
            grown[:start] = self._ids[:start]
            self._ids = grown
        self._ids[start:end] = y
        self._store.add(h)
