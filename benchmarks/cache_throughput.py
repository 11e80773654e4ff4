"""Throughput of the caches in groc_cli.caches on synthetic but LM-like hidden states.

    python benchmarks/cache_throughput.py                       # defaults below, ~5-10 min on 2 cores
    python benchmarks/cache_throughput.py --tokens 20000 --train-vectors 20000 --index IVF1024,PQ32

Prints one JSON object on stdout (progress on stderr): tokens/s of each cache kind scoring
the whole stream in chunks, as an evaluation would, index training seconds separately,
memory held, and tokens/s of a softmax-only "model" (hidden @ output embedding + log-softmax
over --softmax-vocab words).  A real LM eval is slower than its softmax alone, so
``1 + softmax_tokens_per_s / cache_tokens_per_s`` is an upper bound on
(eval with cache) / (static eval); it is reported as ``max_eval_slowdown``.

States: words are drawn from a Zipf law (bursty, so caches have something to find) and the
state at t is tanh of an exponential moving average of random word vectors of the words up
to t; the target is the next word.  Index training uses states from a separate stream
generated the same way (as a held-out split would be).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import faiss  # noqa: E402

from groc_cli.caches import make_cache  # noqa: E402
from groc_cli.environment import environment  # noqa: E402


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def synthetic_stream(n: int, dim: int, vocab: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    # Zipf(1.1) unigram, with bursts: 30% of tokens repeat a word from the last 500.
    words = np.minimum(rng.zipf(1.1, n + 1) - 1, vocab - 1)
    repeat = rng.random(n + 1) < 0.3
    lag = rng.integers(1, 500, n + 1)
    for t in np.flatnonzero(repeat):
        if t >= lag[t]:
            words[t] = words[t - lag[t]]
    emb = np.random.default_rng(seed + 1).standard_normal((vocab, dim)).astype(np.float32)
    hidden = np.empty((n, dim), dtype=np.float32)
    state = np.zeros(dim, dtype=np.float32)
    for t in range(n):
        state = 0.8 * state + 0.6 * emb[words[t]]
        hidden[t] = state
    np.tanh(hidden, out=hidden)
    hidden *= 3.0  # LSTM outputs scaled to typical pre-softmax norms
    return hidden, words[1:].astype(np.int64)


def run_cache(cache, hidden, targets, chunk: int, softmax_vocab: int, softmax_every: int) -> dict:
    """Score the stream chunk by chunk.  Every ``softmax_every``-th chunk also goes through
    a softmax-only "model" (hidden @ E^T, log-softmax), timed separately but interleaved, so
    that both see the same machine load (the 2-core box is shared)."""
    gen = torch.Generator().manual_seed(0)
    out_emb = torch.randn(softmax_vocab, hidden.shape[1], generator=gen) / hidden.shape[1] ** 0.5
    cache_s = soft_s = 0.0
    soft_tokens = finite = 0
    for i, a in enumerate(range(0, len(targets), chunk)):
        h, y = hidden[a : a + chunk], targets[a : a + chunk]
        if i % softmax_every == 0:
            start = time.perf_counter()
            with torch.no_grad():
                torch.log_softmax(torch.from_numpy(h) @ out_emb.T, dim=1)
            soft_s += time.perf_counter() - start
            soft_tokens += len(y)
        start = time.perf_counter()
        out = cache.score(h, y)
        cache_s += time.perf_counter() - start
        finite += int(np.isfinite(out[:, 0]).sum())
    cache_tps = len(targets) / cache_s
    soft_tps = soft_tokens / soft_s
    return {
        "settings": len(cache.settings),
        "seconds": round(cache_s, 3),
        "tokens_per_s": round(cache_tps, 1),
        "memory_bytes": int(cache.nbytes),
        "fraction_target_in_cache": round(finite / len(targets), 4),
        "softmax_only_tokens_per_s": round(soft_tps, 1),
        "max_eval_slowdown": round(1 + soft_tps / cache_tps, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=100_000)
    ap.add_argument("--local-dim", type=int, default=1024, help="Grave et al. 2017c: 1024 LSTM units")
    ap.add_argument("--unbounded-dim", type=int, default=256, help="Grave et al. 2017a: 256 LSTM units")
    ap.add_argument("--word-vocab", type=int, default=50_000)
    ap.add_argument("--chunk", type=int, default=2048, help="positions per score() call")
    ap.add_argument("--cache-size", type=int, default=10_000)
    ap.add_argument("--thetas", type=float, nargs="+", default=[0.0, 0.25, 0.5, 0.75, 1.0],
                    help="GroC C.4 grid: 5 values from 0 to 1, scored in one pass")
    ap.add_argument("--index", default="IVF4096,PQ32")
    ap.add_argument("--nprobe", type=int, default=8)
    ap.add_argument("--knn", type=int, default=1024)
    ap.add_argument("--train-vectors", type=int, default=50_000,
                    help="held-out states for IVF k-means and PQ codebooks")
    ap.add_argument("--softmax-vocab", type=int, default=50_000,
                    help="output vocabulary of the softmax-only reference model")
    ap.add_argument("--softmax-every", type=int, default=8,
                    help="time the softmax reference on every N-th chunk")
    ap.add_argument("--kinds", nargs="+", default=["unigram", "local", "unbounded"])
    args = ap.parse_args()

    result = {
        "benchmark": "cache_throughput",
        "args": vars(args),
        "machine": {**environment(), "faiss_threads": faiss.omp_get_max_threads(), "faiss_gpus": faiss.get_num_gpus()},
        "caches": {},
    }
    dims = {"unigram": args.local_dim, "local": args.local_dim, "unbounded": args.unbounded_dim}
    streams: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for kind in args.kinds:
        dim = dims[kind]
        if dim not in streams:
            log(f"generating {args.tokens} states of dim {dim}")
            streams[dim] = synthetic_stream(args.tokens, dim, args.word_vocab, seed=dim)
        hidden, targets = streams[dim]
        entry: dict = {"dim": dim}
        if kind == "unigram":
            cache = make_cache("unigram")
        elif kind == "local":
            cache = make_cache("local", thetas=args.thetas, cache_size=args.cache_size)
        else:
            log(f"training {args.index} on {args.train_vectors} held-out states")
            train, _ = synthetic_stream(args.train_vectors, dim, args.word_vocab, seed=dim + 7)
            cache = make_cache("unbounded", dim=dim, index=args.index, nprobe=args.nprobe,
                               knn=args.knn, train_vectors=train)
            entry["index"] = args.index
            entry["train_vectors"] = args.train_vectors
            entry["train_seconds"] = round(cache.train_seconds, 3)
        log(f"scoring {args.tokens} positions with the {kind} cache")
        entry.update(run_cache(cache, hidden, targets, args.chunk, args.softmax_vocab,
                               args.softmax_every))
        result["caches"][kind] = entry
        log(json.dumps({kind: entry}))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
