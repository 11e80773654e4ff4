"""Perplexity of a trained run on one split: closed or open vocabulary, optional cache.

Per prediction t (see ``stream``), natural logs throughout:

1. the model's log p(y_t) over the evaluation vocabulary (``vocab``): closed (the model's
   words, unknown -> <unk>) or union (model ∪ the split's types, paper 5.1);
2. GroC, union: ``downweight_new`` F scales the probability of words outside the model's
   training vocabulary and renormalises:
   log p'(y) = log p(y) + [y new] log F - log(1 - (1 - F) M_new), M_new = Σ_new p(w);
3. ``uniform_weight`` u: p = (1 - u) p + u / |vocab| (needed by table models in union
   mode, which give new words no mass);
4. a cache: p = (1 - w) p + w p_cache (w = ``cache_weight``, the cache's share;
   Grave et al. 2017c's λ is w, the GroC paper's λ is 1 - w).

``model_logp`` in per-token records is the result of 1-3, ``final_logp`` of 4.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..artifacts.io import provenance
from ..artifacts.locks import claim_output
from ..caches import CacheContext
from ..console import log, progress
from ..environment import environment
from ..errors import SettingError
from ..models import output_layer_class
from ..runtime import rebalance_threads, resolve_device
from ..text.dataset import open_dataset
from ..run_storage import Run
from .cached import CachedStream, CachePlan, CacheSetup, check_caches
from .grid import add_grid, parse_grid, ppl, weights
from .settings import EvalSettings, cache_kinds, check_reading, check_split, check_unit, check_vocab
from .states import open_states
from .stream import Chunk, load_lexicon, load_model, model_chunks
from .vocab import EvalVocab, run_eval_vocab

#: Step 3's u for a table model in union mode, unless one is given (``uniform_share``).
TABLE_UNION_UNIFORM = 0.01


def uniform_share(composes: bool, mode: str, given: float | None = None) -> float:
    """Step 3's u: the ``given`` one, else 0.01 for a model that gives words outside its vocabulary
    no mass (its output layer does not ``compose_unseen_words``) in union mode, else 0."""
    if given is not None:
        return given
    return TABLE_UNION_UNIFORM if not composes and mode == "union" else 0.0


def mix_uniform(lp, uniform: float, vocab_size: int):
    """Step 3, p = (1 - u) p + u / |vocab|, on float64 log-probabilities: a numpy array (eval) or a
    torch tensor (``load_run`` and ``groc score``, whose numbers have always come from torch's
    logaddexp, which rounds the last bit differently from numpy's on about 0.1% of values)."""
    floor = math.log(uniform) - math.log(vocab_size)
    if isinstance(lp, np.ndarray):
        return np.logaddexp(math.log1p(-uniform) + lp, floor)
    import torch

    return torch.logaddexp(math.log1p(-uniform) + lp, torch.full_like(lp, floor))


@dataclass(frozen=True)
class EvalPlan:
    """What the checked settings decide, made once (``plan_evaluation``) and read by the stream,
    the cache and the grid: the ``split`` and ``vocab``, step 3's u (``uniform_weight``: the given
    one or ``uniform_share``'s), ``grid`` parsed (None without one) and the cache (``CachePlan``).
    ``settings``: the settings themselves, for the rest."""

    settings: EvalSettings
    split: str
    vocab: str
    uniform_weight: float
    grid: dict[str, list] | None
    cache: CachePlan

    def as_dict(self) -> dict:
        """The settings as records give them: ``uniform_weight`` and ``grid`` as decided."""
        d = self.settings.as_dict()
        d["uniform_weight"] = self.uniform_weight
        if self.grid is not None:
            d["grid"] = self.grid
        return d


def plan_evaluation(s: EvalSettings, kind: str) -> EvalPlan:
    """Everything that can be checked without the model, and the plan it decides. ``kind``: the
    run's output layer."""
    check_vocab(s.vocab)
    if s.cache not in cache_kinds():
        raise SettingError(f"`cache` {s.cache!r}: expected one of {', '.join(cache_kinds())}")
    check_unit("uniform_weight", s.uniform_weight)
    check_unit("downweight_new", s.downweight_new, low_open=True)
    check_reading(s.checkpoint, s.chunk)
    if s.downweight_new != 1.0 and not (output_layer_class(kind).composes_unseen_words and s.vocab == "union"):
        raise SettingError("`downweight_new` applies to GroC models with `vocab` union only; drop it")
    composes = output_layer_class(kind).composes_unseen_words
    table_union = not composes and s.vocab == "union"
    u = uniform_share(composes, s.vocab, s.uniform_weight)
    if table_union and u == 0:
        raise SettingError(f"a {kind} model gives words outside its vocabulary no probability, so `vocab` union "
                           "needs `uniform_weight` > 0 (default 0.01) or perplexity is infinite")
    grid = parse_grid(s.grid, s.cache) if s.grid is not None else None
    for w in weights(s, grid):  # cache_weight, or its grid list
        check_unit("cache_weight", w)
    return EvalPlan(s, s.split, s.vocab, u, grid, check_caches(s, grid))


def adjust(chunk: Chunk, model_size: int, vocab_size: int, downweight: float, uniform: float) -> np.ndarray:
    """Steps 2 and 3 of the module docstring on one chunk's model log-probabilities."""
    lp = chunk.logp.copy()
    if downweight != 1.0 and chunk.new_mass is not None:
        new = chunk.targets >= model_size
        with np.errstate(divide="ignore"):
            lp += np.where(new, math.log(downweight), 0.0) - np.log1p(-(1.0 - downweight) * chunk.new_mass)
    if uniform > 0:
        lp = mix_uniform(lp, uniform, vocab_size)
    return lp


@dataclass(frozen=True)
class EvalOutputs:
    """The files an evaluation writes besides its summary: ``per_token`` (one row per prediction,
    one setting), ``grid_out`` (the grid's table); ``force``: replace existing ones (the cache's
    ``index_save`` too)."""

    per_token: Path | None = None
    grid_out: Path | None = None
    force: bool = False


@dataclass
class _Opened:
    """An evaluation's inputs, checked and opened: the stream's ``chunks`` through ``cached``."""

    run: Run
    dataset: Any
    states: Any  # None without ``states_dir``
    device: Any
    model_checksum: str
    model_words: list[str]
    model_counts: list[int]
    vocab: EvalVocab
    cached: CachedStream
    chunks: Iterator[Chunk]


def evaluate(run_dir: Path, dataset_dir: Path, s: EvalSettings, outputs: EvalOutputs = EvalOutputs(),
             states_dir: Path | None = None, vocab_given: bool = True, split_given: bool = True,
             verify: bool = False) -> dict:
    """Evaluate; returns the JSON summary. With ``states_dir``, ``s.vocab`` and ``s.split`` default
    to the states' own (``*_given`` False). With ``s.grid`` every combination is scored in
    the same pass; the summary's perplexity is the best one's and ``grid`` lists them all.
    Each output file is locked from its check until it is written (one writer per output)."""
    with contextlib.ExitStack() as claims:
        started = time.perf_counter()
        run = Run(run_dir)
        dataset = open_dataset(dataset_dir, verify)
        states = None
        if states_dir is not None:
            states = open_states(states_dir)
            states.settle(s, vocab_given, split_given)
        check_split(dataset, s.split)
        plan = plan_evaluation(s, run.model_config.output)
        _claim(plan, outputs, claims, (run_dir, dataset_dir, states_dir))
        opened = _open(plan, run, dataset, states)
        totals = _score(plan, opened, outputs.per_token)
        return _summary(plan, opened, totals, outputs, states_dir, started)


def _claim(plan: EvalPlan, outputs: EvalOutputs, claims: contextlib.ExitStack, inputs: tuple) -> None:
    """Refuse outputs the plan cannot write, then check and lock each (held by ``claims``); none may
    replace one of ``inputs`` (the run, dataset and states), the lexicon or a file the cache reads."""
    if outputs.per_token is not None and plan.grid is not None:
        raise SettingError("`per_token` records one setting: drop `grid`, or evaluate the best grid setting again with "
                           "`per_token`")
    if outputs.grid_out is not None and plan.grid is None:
        raise SettingError("`grid_out` needs `grid`")
    reads, writes = plan.cache.files()
    inputs = (*inputs, plan.settings.lexicon, *reads)
    for path, flag, what in ((outputs.per_token, "`per_token`", "per-token table"),
                             (outputs.grid_out, "`grid_out`", "grid table"), *writes):
        if path is not None:
            claims.enter_context(claim_output(Path(path), outputs.force, flag, what, inputs))


def _open(plan: EvalPlan, run: Run, dataset, states) -> _Opened:
    """The model (or the dumped ``states``), the evaluation vocabulary and the cache, checked before
    any work; the stream of chunks they give."""
    s, kind = plan.settings, run.model_config.output
    lexicon = load_lexicon(s.lexicon, kind)
    device = resolve_device(s.device)
    model_checksum = run.model_checksum(s.checkpoint) if states is None else states.meta["model_checksum"]
    setup = CacheSetup(plan.cache, CacheContext(dim=run.model_config.emb, split=plan.split, has_states=states is not None,
                                                device=device.type, torch_device=str(device),
                                                model_checksum=model_checksum,
                                                stored_states=states.hidden if states is not None else None, log=log))
    if states is not None:
        states.check(run, dataset, plan.split, s.checkpoint)
    model_words, model_counts, vocab = run_eval_vocab(run, dataset, plan.split, plan.vocab)
    total = len(vocab.targets) - 1
    setup.check_stream(total)
    cached = CachedStream(setup)

    if states is None:
        model = load_model(run, s.checkpoint, device, vocab, lexicon)
        chunks = model_chunks(model, vocab, device, s.chunk)
    else:
        chunks = states.chunks(vocab, s.chunk)
    log(f"evaluating {kind} model on {plan.split}: {total:,} predictions, {plan.vocab} vocabulary of {vocab.size:,} words"
        f"{f', {plan.cache.kind} cache' if plan.cache.kind != 'none' else ''}")
    return _Opened(run, dataset, states, device, model_checksum, model_words, model_counts, vocab, cached, chunks)


def _score(plan: EvalPlan, o: _Opened, per_token: Path | None) -> tuple[float, np.ndarray, int]:
    """The stream scored: the model's NLL (steps 1-3), each column's final NLL and the number of
    predictions; each prediction's row written to ``per_token`` where given."""
    based = ((c, adjust(c, o.vocab.model_size, o.vocab.size, plan.settings.downweight_new, plan.uniform_weight))
             for c in o.chunks)
    # For the per-token table only, in the dataset's width (2 or 4 bytes a token, not int64's 8): what eval
    # holds per token of the split is what grows with its length (docs/benchmarks.md).
    split_ids = o.dataset.ids(plan.split) if per_token is not None else None
    model_nll = 0.0
    final_nll = None
    count = 0
    with contextlib.ExitStack() as stack:
        writer = None
        if per_token is not None:
            from .records import PerTokenWriter

            meta = provenance("eval", run=str(o.run.path), dataset_checksum=o.dataset.checksum,
                              model_checksum=o.model_checksum, settings=plan.as_dict())
            writer = stack.enter_context(PerTokenWriter(Path(per_token), o.dataset.words, o.model_words,
                                                        o.model_counts, meta))
        advance = stack.enter_context(progress(f"eval {plan.split}", total=len(o.vocab.targets) - 1, unit="tok"))
        for chunk, base, final in o.cached.run(based):
            model_nll -= float(base.sum())
            column_nll = -final.sum(axis=0)
            final_nll = column_nll if final_nll is None else final_nll + column_nll
            count += len(chunk)
            advance(len(chunk))
            rebalance_threads()
            if writer is not None:
                pos = np.arange(chunk.start + 1, chunk.start + 1 + len(chunk))
                writer.write(pos, split_ids[pos], base, final[:, 0])
    return model_nll, final_nll, count


def _summary(plan: EvalPlan, o: _Opened, totals: tuple, outputs: EvalOutputs, states_dir: Path | None,
             started: float) -> dict:
    """The JSON summary of the scored stream (``totals``: ``_score``'s), the grid's table written
    where ``outputs`` name one, and the log line."""
    model_nll, final_nll, count = totals
    s, kind, vocab, per_token = plan.settings, o.run.model_config.output, o.vocab, outputs.per_token
    seconds = time.perf_counter() - started
    best = int(np.argmin(final_nll))
    oov = int(vocab.oov[1:].sum())
    result = {
        "perplexity": ppl(float(final_nll[best]), count),
        "model_perplexity": ppl(model_nll, count),
        "nll": float(final_nll[best]) / count,
        "tokens": count,
        "oov_tokens": oov,
        "oov_rate": oov / count,
        "vocab_size": vocab.size,
        "model_vocab_size": vocab.model_size,
        "new_words": vocab.new_words,
        "model": kind,
        "run": str(o.run.path),
        "dataset": str(o.dataset.path),
        "model_checksum": o.model_checksum,
        "dataset_checksum": o.dataset.checksum,
        "states": str(states_dir) if states_dir is not None else None,
        "settings": plan.as_dict(),
        "cache_config": o.cached.cache.config if o.cached.cache is not None else None,
        "per_token": str(per_token) if per_token is not None else None,
        "seconds": round(seconds, 3),
        "tokens_per_s": round(count / max(seconds, 1e-9), 1),
        "environment": environment(str(o.device), s.lexicon or (o.run.lexicon_path if output_layer_class(kind).needs_lexicon else None)),
        # States from 'groc dump' (the model's log-probs) were computed where the dump ran.
        "states_environment": o.states.meta.get("environment") if o.states is not None else None,
    }
    if plan.grid is not None:
        rows = add_grid(result, o.cached.columns(), final_nll, best, outputs.grid_out, run=str(o.run.path), dataset_checksum=
                        o.dataset.checksum, model_checksum=o.model_checksum, settings=plan.as_dict(),
                        model_perplexity=result["model_perplexity"], tokens=count)
    cache_text = f", {plan.cache.kind} cache (weight {rows[best]['cache_weight'] if plan.grid else s.cache_weight}) over model ppl {result['model_perplexity']:.2f}" if plan.cache.kind != "none" else ""
    log(f"{plan.split}: perplexity {result['perplexity']:.2f} over {count:,} tokens ({plan.vocab} vocabulary, {vocab.size:,} words, "
        f"OOV {100 * result['oov_rate']:.2f}%){cache_text}; {seconds:.1f}s, {result['tokens_per_s']:,.0f} tok/s")
    return result
