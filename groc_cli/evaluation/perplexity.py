"""Perplexity of a trained run on one split: closed or open vocabulary, optional cache.

Per prediction t (see ``stream``), natural logs throughout:

1. the model's log p(y_t) over the evaluation vocabulary (``vocab``): closed (the model's
   words, unknown -> <unk>) or union (model ∪ the split's types, paper 5.1);
2. GroC, union: ``--downweight-new F`` scales the probability of words outside the model's
   training vocabulary and renormalises:
   log p'(y) = log p(y) + [y new] log F - log(1 - (1 - F) M_new), M_new = Σ_new p(w);
3. ``--uniform-weight u``: p = (1 - u) p + u / |vocab| (needed by table models in union
   mode, which give new words no mass);
4. a cache: p = (1 - w) p + w p_cache (w = ``--cache-weight``, the cache's share;
   Grave et al. 2017c's λ is w, the GroC paper's λ is 1 - w).

``model_logp`` in per-token records is the result of 1-3, ``final_logp`` of 4.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import torch

from ..artifacts import claim_output, provenance
from ..caches import CACHE_KINDS, UnboundedCache as UNBOUNDED, interpolate, make_cache
from ..console import log, progress
from ..errors import GrocError
from ..models import output_layer_class
from ..runtime import rebalance_threads, resolve_device
from ..text.dataset import open_dataset
from ..training.run import Run
from .states import open_states
from .stream import Chunk, load_lexicon, load_model, model_chunks
from .vocab import VOCAB_MODES, run_eval_vocab

CACHES = ("none", *CACHE_KINDS)
KERNELS = ("gaussian", "epanechnikov")
#: Where the unbounded cache's exact refinement stage finds each state (--datastore).
DATASTORES = ("memory", "disk")
TABLE_UNION_UNIFORM = 0.01
#: States the default index is trained on when --index-train is not given (IVF4096 wants
#: about 39 points per centroid; FAISS warns below that).
DEFAULT_INDEX_TRAIN = 200_000


@dataclass
class EvalSettings:
    split: str = "test"
    vocab: str = "model"
    uniform_weight: float | None = None  # None: 0.01 for table models in union mode, else 0
    downweight_new: float = 1.0
    cache: str = "none"
    cache_weight: float = 0.1
    theta: float = 0.3
    cache_size: int | None = None  # None: 10,000 for local, the whole history for unigram
    knn: int = 1024
    index: str = "IVF4096,PQ32"
    nprobe: int = 8
    kernel: str = "gaussian"
    bandwidth_scale: float = 1.0
    index_train: int | None = None
    index_save: str | None = None
    index_load: str | None = None
    datastore: str = "memory"
    grid: str | None = None
    lexicon: str | None = None
    checkpoint: str = "best"
    chunk: int = 256
    device: str = "auto"
    resolved: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        d = asdict(self)
        d.pop("resolved")
        d.update(self.resolved)
        return d


def _check_unit(name: str, value: float | None, low_open: bool = False) -> None:
    if value is None:
        return
    ok = (0.0 < value <= 1.0) if low_open else (0.0 <= value <= 1.0)
    if not ok or math.isnan(value):
        raise GrocError(f"{name} {value}: must be in {'(0, 1]' if low_open else '[0, 1]'}")


#: --grid keys per cache: the flag each one replaces, and how its values are read.
GRID_KEYS = {
    "cache-weight": ("unigram", "local", "unbounded"),
    "theta": ("local",),
    "knn": ("unbounded",),
    "kernel": ("unbounded",),
    "bandwidth-scale": ("unbounded",),
}


def parse_grid(text: str, cache: str) -> dict[str, list]:
    """"cache-weight=0.05,0.1;theta=0.1,0.3" -> {"cache-weight": [0.05, 0.1], "theta": [0.1, 0.3]}."""
    if cache == "none":
        raise GrocError("--grid needs a cache: add --cache unigram, local or unbounded")
    grid: dict[str, list] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        key, eq, values = part.partition("=")
        key = key.strip().lstrip("-")
        if not eq or not values.strip():
            raise GrocError(f"--grid {text!r}: expected NAME=V1,V2,... parts separated by ';' (e.g. 'cache-weight=0.05,0.1;theta=0.1,0.3')")
        if key not in GRID_KEYS:
            raise GrocError(f"--grid: unknown name {key!r}; choose from {', '.join(GRID_KEYS)}")
        if cache not in GRID_KEYS[key]:
            raise GrocError(f"--grid: {key} does not apply to the {cache} cache (it applies to: {', '.join(GRID_KEYS[key])})")
        if key in grid:
            raise GrocError(f"--grid: {key} is given twice")
        items = [v.strip() for v in values.split(",") if v.strip()]
        try:
            if key == "knn":
                parsed = [int(v) for v in items]
            elif key == "kernel":
                parsed = items
            else:
                parsed = [float(v) for v in items]
        except ValueError:
            raise GrocError(f"--grid {key}={values.strip()}: not a list of {'integers' if key == 'knn' else 'numbers'}") from None
        if len(set(parsed)) != len(parsed):
            raise GrocError(f"--grid {key}: repeated value")
        grid[key] = parsed
    if not grid:
        raise GrocError(f"--grid {text!r}: no values")
    return grid


def grid_settings(s: EvalSettings) -> EvalSettings:
    """The settings with every --grid list in place of its single flag (lists everywhere)."""
    grid = s.resolved.get("grid") or {}
    return {
        "cache_weight": grid.get("cache-weight", [s.cache_weight]),
        "theta": grid.get("theta", [s.theta]),
        "knn": grid.get("knn", [s.knn]),
        "kernel": grid.get("kernel", [s.kernel]),
        "bandwidth_scale": grid.get("bandwidth-scale", [s.bandwidth_scale]),
    }


def validate(s: EvalSettings, kind: str) -> None:
    """Everything that can be checked without the model. ``kind``: the run's output layer."""
    if s.vocab not in VOCAB_MODES:
        raise GrocError(f"--vocab {s.vocab!r}: expected one of {', '.join(VOCAB_MODES)}")
    if s.cache not in CACHES:
        raise GrocError(f"--cache {s.cache!r}: expected one of {', '.join(CACHES)}")
    _check_unit("--uniform-weight", s.uniform_weight)
    _check_unit("--downweight-new", s.downweight_new, low_open=True)
    if s.cache_size is not None and s.cache_size < 1:
        raise GrocError(f"--cache-size {s.cache_size}: must be >= 1")
    if s.nprobe < 1:
        raise GrocError(f"--nprobe {s.nprobe}: must be >= 1")
    if s.index_train is not None and s.index_train < 1:
        raise GrocError(f"--index-train {s.index_train}: must be >= 1")
    if s.checkpoint not in ("best", "last"):
        raise GrocError(f"--checkpoint {s.checkpoint!r}: expected best or last")
    if s.chunk < 1:
        raise GrocError(f"--chunk {s.chunk}: must be >= 1")
    if s.downweight_new != 1.0 and not (output_layer_class(kind).composes_unseen_words and s.vocab == "union"):
        raise GrocError("--downweight-new applies to GroC models with --vocab union only; drop it")
    table_union = not output_layer_class(kind).composes_unseen_words and s.vocab == "union"
    u = s.uniform_weight if s.uniform_weight is not None else (TABLE_UNION_UNIFORM if table_union else 0.0)
    if table_union and u == 0:
        raise GrocError(f"a {kind} model gives words outside its vocabulary no probability, so --vocab union "
                        "needs --uniform-weight > 0 (default 0.01) or perplexity is infinite")
    s.resolved["uniform_weight"] = u
    if s.grid is not None:
        s.resolved["grid"] = parse_grid(s.grid, s.cache)
    values = grid_settings(s)  # the single flags, or their --grid lists
    for w in values["cache_weight"]:
        _check_unit("--cache-weight", w)
    for t in values["theta"]:
        if t < 0 or not math.isfinite(t):
            raise GrocError(f"--theta {t}: must be a finite number >= 0")
    for k in values["knn"]:
        if k < 1:
            raise GrocError(f"--knn {k}: must be >= 1")
    for k in values["kernel"]:
        if k not in KERNELS:
            raise GrocError(f"--kernel {k!r}: expected one of {', '.join(KERNELS)}")
    for b in values["bandwidth_scale"]:
        if not (b > 0 and math.isfinite(b)):
            raise GrocError(f"--bandwidth-scale {b}: must be > 0")
    if (s.index_save or s.index_load) and s.cache != "unbounded":
        raise GrocError("--index-save and --index-load apply to --cache unbounded only")
    if s.index_save and s.index_load:
        raise GrocError("give --index-save or --index-load, not both (a loaded index is already saved)")
    if s.index_load and not Path(s.index_load).is_file():
        raise GrocError(f"--index-load {s.index_load}: no such file; write one with --index-save")
    if s.datastore not in DATASTORES:
        raise GrocError(f"--datastore {s.datastore!r}: expected one of {', '.join(DATASTORES)}")
    if s.datastore == "disk" and s.cache != "unbounded":
        raise GrocError("--datastore disk applies to --cache unbounded only")


def check_index_string(factory: str, dim: int, datastore: str = "memory"):
    """Build the (empty) FAISS index once to reject a bad factory string, or one the cache
    cannot use, early; returned so later checks can inspect it (``is_trained``, IVF list
    count)."""
    import faiss

    from ..caches.unbounded import _faiss_message, exact_refinement, index_problem

    try:
        index = faiss.index_factory(dim, factory, faiss.METRIC_L2)
    except Exception as err:
        raise GrocError(f"--index {factory!r}: FAISS rejected it for {dim}-dimensional states ({_faiss_message(err)}); "
                        "give a factory string valid for that size, or 'Flat'") from None
    problem = index_problem(index)
    if problem:
        raise GrocError(f"--index {factory!r}: FAISS builds it, but the unbounded cache cannot use it: {problem}")
    if datastore == "disk" and exact_refinement(index) is None:
        raise GrocError(f"--index {factory!r} has no exact refinement stage for --datastore disk to read states for; "
                        "end it with ',RFlat' (e.g. 'IVF4096,PQ32,RFlat')")
    return index


def check_datastore(s: EvalSettings, total: int, index) -> None:
    """Checks that need the stream's length: before any state is computed."""
    if s.cache != "unbounded":
        return
    # The last prediction sees total - 1 stored states: a larger k is never filled.
    k = max(grid_settings(s)["knn"])
    if k > total - 1:
        raise GrocError(f"--knn {k} is larger than the datastore can ever hold: the {s.split} split has {total:,} predictions, "
                        f"so at most {total - 1:,} states precede the last one; choose --knn <= {max(total - 1, 1):,}")
    if not index.is_trained and not s.index_load:
        import faiss

        n_train = min(s.index_train or DEFAULT_INDEX_TRAIN, total)
        ivf = UNBOUNDED._ivf(index)
        nlist = faiss.downcast_index(ivf).nlist if ivf is not None else 0
        if nlist and n_train < nlist:
            raise GrocError(f"--index {s.index}: its {nlist:,} inverted lists need at least {nlist:,} training states, but "
                            f"only {n_train:,} are used (--index-train, the split's length); use a smaller IVF "
                            f"(about 1 list per 40 states), or 'Flat'")


def _make_cache(s: EvalSettings, dim: int, device: torch.device, train_vectors: np.ndarray | None = None,
                stored_states: np.ndarray | None = None):
    values = grid_settings(s)
    try:
        if s.cache == "unigram":
            return make_cache("unigram", cache_size=s.cache_size)
        if s.cache == "local":
            return make_cache("local", thetas=values["theta"], cache_size=s.cache_size or 10_000, dim=dim)
        cache = make_cache("unbounded", dim=dim, index=s.index, nprobe=s.nprobe, knn=values["knn"], kernels=values["kernel"],
                           bandwidth_scales=values["bandwidth_scale"], train_vectors=train_vectors,
                           trained_index=s.index_load, use_gpu="auto" if device.type == "cuda" else False,
                           stored_states=stored_states)
    except ValueError as exc:
        raise GrocError(f"--cache {s.cache}: {exc}") from None
    if s.index_save:
        cache.save_trained(s.index_save)
        log(f"wrote the trained empty index to {s.index_save} (reuse it with --index-load)")
    return cache


def adjust(chunk: Chunk, model_size: int, vocab_size: int, downweight: float, uniform: float) -> np.ndarray:
    """Steps 2 and 3 of the module docstring on one chunk's model log-probabilities."""
    lp = chunk.logp.copy()
    if downweight != 1.0 and chunk.new_mass is not None:
        new = chunk.targets >= model_size
        with np.errstate(divide="ignore"):
            lp += np.where(new, math.log(downweight), 0.0) - np.log1p(-(1.0 - downweight) * chunk.new_mass)
    if uniform > 0:
        lp = np.logaddexp(math.log1p(-uniform) + lp, math.log(uniform) - math.log(vocab_size))
    return lp


class CachedStream:
    """Feeds chunks to a cache; an index that needs training is trained on the first
    ``index_train`` states of the stream, which are buffered (not recomputed) meanwhile.
    ``stored_states``: the stream's states on disk, for --datastore disk."""

    def __init__(self, s: EvalSettings, dim: int, device: torch.device, total: int, needs_training: bool,
                 stored_states: np.ndarray | None = None):
        self.s, self.dim, self.device, self.stored_states = s, dim, device, stored_states
        self.cache = None
        self.train_states = 0
        if s.cache == "none":
            return
        if needs_training and not s.index_load:
            self.train_states = min(s.index_train or DEFAULT_INDEX_TRAIN, total)
        else:
            self.cache = _make_cache(s, dim, device, stored_states=stored_states)

    def run(self, chunks: Iterable[tuple[Chunk, np.ndarray]]) -> Iterator[tuple[Chunk, np.ndarray, np.ndarray]]:
        """(chunk, base logp) -> (chunk, base logp, final logp)."""
        s = self.s
        if s.cache == "none":
            for chunk, base in chunks:
                yield chunk, base, base[:, None]
            return
        buffered: list[tuple[Chunk, np.ndarray]] = []
        held = 0
        for chunk, base in chunks:
            if self.cache is None:
                buffered.append((chunk, base))
                held += len(chunk)
                if held < self.train_states:
                    continue
                yield from self._train_and_flush(buffered)
                buffered = []
                continue
            yield chunk, base, self._mix(chunk, base)
        if self.cache is None and buffered:
            yield from self._train_and_flush(buffered)

    def _train_and_flush(self, buffered):
        vectors = np.concatenate([c.hidden for c, _ in buffered])[: self.train_states]
        log(f"training FAISS index {self.s.index} on the first {len(vectors):,} states of the stream")
        self.cache = _make_cache(self.s, self.dim, self.device, train_vectors=vectors, stored_states=self.stored_states)
        for chunk, base in buffered:
            yield chunk, base, self._mix(chunk, base)

    def _mix(self, chunk: Chunk, base: np.ndarray) -> np.ndarray:
        """[n, P]: one column per grid point (one column without --grid)."""
        hidden = chunk.hidden if self.s.cache != "unigram" else None
        cache_logp = self.cache.score(hidden, chunk.targets)
        return interpolate(base, cache_logp, grid_settings(self.s)["cache_weight"])

    def columns(self) -> list[dict]:
        """The setting of each column of _mix: cache setting p, weight i -> column p * W + i."""
        weights = grid_settings(self.s)["cache_weight"]
        if self.cache is None:
            return [{"cache_weight": w} for w in weights]
        return [{**{k: v for k, v in setting.items() if k != "kind"}, "cache_weight": w}
                for setting in self.cache.settings for w in weights]


def evaluate(run_dir: Path, dataset_dir: Path, s: EvalSettings, per_token: Path | None = None, force: bool = False,
             states_dir: Path | None = None, vocab_given: bool = True, split_given: bool = True,
             grid_out: Path | None = None, verify: bool = False) -> dict:
    """Evaluate; returns the JSON summary. With ``states_dir``, --vocab and --split default
    to the states' own (``*_given`` False). With ``s.grid`` every combination is scored in
    the same pass; the summary's perplexity is the best one's and ``grid`` lists them all.
    Each output file is locked from its check until it is written (one writer per output)."""
    with contextlib.ExitStack() as outputs:
        return _evaluate(run_dir, dataset_dir, s, per_token, force, states_dir, vocab_given, split_given, grid_out,
                         outputs, verify)


def _evaluate(run_dir, dataset_dir, s: EvalSettings, per_token, force, states_dir, vocab_given, split_given, grid_out,
              outputs: contextlib.ExitStack, verify: bool) -> dict:
    started = time.perf_counter()
    run = Run(run_dir)
    dataset = open_dataset(dataset_dir, verify)
    kind = run.model_config.output
    states = None
    if states_dir is not None:
        states = open_states(states_dir)
        if not vocab_given:
            s.vocab = states.meta["vocab"]
        if not split_given:
            s.split = states.meta["split"]
        if s.vocab != states.meta["vocab"]:
            raise GrocError(f"--vocab {s.vocab}: the states in {states_dir} were dumped with --vocab {states.meta['vocab']}; "
                            "drop --vocab or dump again")
        if s.lexicon is not None:
            raise GrocError("--lexicon cannot change states already dumped (their log-probabilities are fixed); "
                            "pass --lexicon to 'groc dump' instead")
    if not dataset.has_split(s.split):
        have = ", ".join(dataset.manifest["splits"]) or "none"
        raise GrocError(f"dataset {dataset.path} has no {s.split} split (it has: {have}); choose another --split")
    validate(s, kind)
    if per_token is not None and s.grid is not None:
        raise GrocError("--per-token records one setting: drop --grid, or evaluate the best grid setting again with --per-token")
    if grid_out is not None and s.grid is None:
        raise GrocError("--grid-out needs --grid")
    inputs = (run_dir, dataset_dir, states_dir, s.lexicon, s.index_load)
    for path, flag, what in ((per_token, "--per-token", "per-token table"), (grid_out, "--grid-out", "grid table"),
                             (s.index_save, "--index-save", "file")):
        if path is not None:
            outputs.enter_context(claim_output(Path(path), force, flag, what, inputs))
    lexicon = load_lexicon(s.lexicon, kind)
    dim = run.model_config.emb
    if s.datastore == "disk" and states is None:
        raise GrocError("--datastore disk reads the states from a dump: add --states DIR "
                        "(written by 'groc dump RUN DATASET --split S -o DIR')")
    index = check_index_string(s.index, dim, s.datastore) if s.cache == "unbounded" else None
    needs_training = index is not None and not index.is_trained
    device = resolve_device(s.device)
    if states is not None:
        states.check(run, dataset, s.split, s.checkpoint)
    model_words, model_counts, vocab = run_eval_vocab(run, dataset, s.split, s.vocab)
    total = len(vocab.targets) - 1
    check_datastore(s, total, index)
    cached = CachedStream(s, dim, device, total, needs_training,
                          stored_states=states.hidden() if s.datastore == "disk" else None)

    if states is None:
        model = load_model(run, s.checkpoint, device, vocab, lexicon)
        chunks = model_chunks(model, vocab, device, s.chunk)
        model_checksum = run.model_checksum(s.checkpoint)
    else:
        chunks = states.chunks(vocab, s.chunk)
        model_checksum = states.meta["model_checksum"]
    log(f"evaluating {kind} model on {s.split}: {total:,} predictions, {s.vocab} vocabulary of {vocab.size:,} words"
        f"{f', {s.cache} cache' if s.cache != 'none' else ''}")

    u = s.resolved["uniform_weight"]
    based = ((c, adjust(c, vocab.model_size, vocab.size, s.downweight_new, u)) for c in chunks)
    split_ids = dataset.ids(s.split).astype(np.int64)
    model_nll = 0.0
    final_nll = None
    count = 0
    with contextlib.ExitStack() as stack:
        writer = None
        if per_token is not None:
            from .records import PerTokenWriter

            meta = provenance("eval", run=str(run.path), dataset_checksum=dataset.checksum,
                              model_checksum=model_checksum, settings=s.as_dict())
            writer = stack.enter_context(PerTokenWriter(Path(per_token), dataset.words, model_words, model_counts, meta))
        advance = stack.enter_context(progress(f"eval {s.split}", total=total, unit="tok"))
        for chunk, base, final in cached.run(based):
            model_nll -= float(base.sum())
            column_nll = -final.sum(axis=0)
            final_nll = column_nll if final_nll is None else final_nll + column_nll
            count += len(chunk)
            advance(len(chunk))
            rebalance_threads()
            if writer is not None:
                pos = np.arange(chunk.start + 1, chunk.start + 1 + len(chunk))
                writer.write(pos, split_ids[pos], base, final[:, 0])
    seconds = time.perf_counter() - started
    best = int(np.argmin(final_nll))
    oov = int(vocab.oov[1:].sum())
    result = {
        "perplexity": _ppl(float(final_nll[best]), count),
        "model_perplexity": _ppl(model_nll, count),
        "nll": float(final_nll[best]) / count,
        "tokens": count,
        "oov_tokens": oov,
        "oov_rate": oov / count,
        "vocab_size": vocab.size,
        "model_vocab_size": vocab.model_size,
        "new_words": vocab.new_words,
        "model": kind,
        "run": str(run.path),
        "dataset": str(dataset.path),
        "model_checksum": model_checksum,
        "dataset_checksum": dataset.checksum,
        "states": str(states_dir) if states_dir is not None else None,
        "settings": s.as_dict(),
        "cache_config": cached.cache.config if cached.cache is not None else None,
        "per_token": str(per_token) if per_token is not None else None,
        "seconds": round(seconds, 3),
        "tokens_per_s": round(count / max(seconds, 1e-9), 1),
    }
    if s.grid is not None:
        rows = [{**setting, "perplexity": _ppl(float(nll), count), "nll": float(nll) / count, "best": i == best}
                for i, (setting, nll) in enumerate(zip(cached.columns(), final_nll))]
        result["grid"] = rows
        result["best"] = rows[best]
        result["grid_output"] = str(grid_out) if grid_out is not None else None
        if grid_out is not None:
            _write_grid(rows, Path(grid_out), provenance("eval --grid", run=str(run.path), dataset_checksum=dataset.checksum,
                                                          model_checksum=model_checksum, settings=s.as_dict(),
                                                          model_perplexity=result["model_perplexity"], tokens=count))
        settings_text = ", ".join(f"{k} {v}" for k, v in rows[best].items() if k not in ("perplexity", "nll", "best"))
        log(f"grid of {len(rows)} settings in one pass; best: {settings_text}")
    cache_text = f", {s.cache} cache (weight {rows[best]['cache_weight'] if s.grid else s.cache_weight}) over model ppl {result['model_perplexity']:.2f}" if s.cache != "none" else ""
    log(f"{s.split}: perplexity {result['perplexity']:.2f} over {count:,} tokens ({s.vocab} vocabulary, {vocab.size:,} words, "
        f"OOV {100 * result['oov_rate']:.2f}%){cache_text}; {seconds:.1f}s, {result['tokens_per_s']:,.0f} tok/s")
    return result


def _write_grid(rows: list[dict], path: Path, meta: dict) -> None:
    import pyarrow as pa

    from ..artifacts import atomic_path, write_parquet

    with atomic_path(path) as tmp:
        write_parquet(pa.Table.from_pylist(rows), tmp, meta)


def _ppl(nll: float, count: int) -> float:
    mean = nll / count
    return math.exp(mean) if mean < 700 else math.inf
