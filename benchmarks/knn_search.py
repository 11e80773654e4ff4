"""The unbounded cache's exact nearest-neighbour search in torch against FAISS's exact "Flat", in
one process, taking turns, on the same states.

    python benchmarks/knn_search.py                                   # CPU, 1 thread, ~5 min
    python benchmarks/knn_search.py --threads 2 --sizes 10000 100000
    python benchmarks/knn_search.py --device cuda --sizes 1000000 10000000 --stream 0   # GPU: torch only

`search`: for each datastore size N, one block of --queries states (the cache searches 1,024 at a
time) against N stored states for the --knn nearest, by faiss.IndexFlatL2.search and by
TorchExactSearch.search (groc_cli/caches/knn_torch.py), --repeats times each, alternating;
the median seconds, queries/s, and torch's time over FAISS's. Both find the same neighbours up
to float32 rounding: ``same_neighbour_sets`` is the share of FAISS's k neighbours that torch finds
too (per query, averaged), ``same_positions`` the share in the same rank, and
``max_relative_distance_difference`` the largest difference between the two sorted distance lists
over the largest distance; where that is at rounding level, neighbours that differ are ties.

`stream`: the cache itself (``make_cache("unbounded", index="Flat")`` with search faiss and
torch) scoring a stream of --stream positions block by block, as ``groc eval --cache unbounded``
does: tokens/s of each, the ratio, the largest difference in log-probability, the positions whose
log-probability differs (a near-tie at the k-th neighbour taken one way or the other), and the
perplexity of each, mixed at weight 0.1 with a uniform model.

On CUDA FAISS runs only where faiss-gpu is installed (on the CPU otherwise, which the JSON says).

States: the LM-like synthetic stream of benchmarks/cache_throughput.py (Zipf words, bursts, tanh
of a moving average of word vectors). Prints ONE JSON object on stdout, progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import faiss  # noqa: E402

from cache_throughput import log, synthetic_stream  # noqa: E402
from groc_cli.caches import interpolate, make_cache  # noqa: E402
from groc_cli.caches.knn_torch import TorchExactSearch  # noqa: E402
from groc_cli.environment import environment  # noqa: E402


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def search(states: np.ndarray, queries: np.ndarray, k: int, device: torch.device, repeats: int) -> dict:
    """One block of queries against every state, FAISS and torch taking turns."""
    flat = faiss.IndexFlatL2(states.shape[1])
    on_gpu = device.type == "cuda" and faiss.get_num_gpus() > 0
    if on_gpu:
        flat = faiss.index_cpu_to_gpu(faiss.StandardGpuResources(), 0, flat)
    ours = TorchExactSearch(states.shape[1], device)
    for a in range(0, len(states), 65_536):
        flat.add(states[a : a + 65_536])
        ours.add(states[a : a + 65_536])
    times = {"faiss": [], "torch": []}
    results = {}
    for _ in range(repeats):
        for name, index in (("faiss", flat), ("torch", ours)):
            sync(device)
            start = time.perf_counter()
            results[name] = index.search(queries, k)
            sync(device)
            times[name].append(time.perf_counter() - start)
    seconds = {name: statistics.median(t) for name, t in times.items()}
    (fd, fi), (td, ti) = results["faiss"], results["torch"]
    return {
        "states": len(states), "queries": len(queries), "knn": k,
        "faiss_on": "gpu" if on_gpu else "cpu",
        "faiss_seconds": round(seconds["faiss"], 4), "torch_seconds": round(seconds["torch"], 4),
        "faiss_queries_per_s": round(len(queries) / seconds["faiss"], 1),
        "torch_queries_per_s": round(len(queries) / seconds["torch"], 1),
        "torch_vs_faiss": round(seconds["torch"] / seconds["faiss"], 3),
        "same_neighbour_sets": round(float(np.mean([np.isin(t, f).mean() for f, t in zip(fi, ti)])), 5),
        "same_positions": round(float((fi == ti).mean()), 5),
        "max_relative_distance_difference": float((np.abs(fd.astype(np.float64) - td) / fd.max()).max()),
        "runs": {name: [round(x, 4) for x in t] for name, t in times.items()},
    }


def stream(hidden: np.ndarray, targets: np.ndarray, k: int, device: torch.device) -> dict:
    """The unbounded cache scoring the stream with each search; chunks alternate between them."""
    caches = {name: make_cache("unbounded", dim=hidden.shape[1], index="Flat", knn=k, search=name, device=str(device))
              for name in ("faiss", "torch")}
    seconds = {name: 0.0 for name in caches}
    outs = {name: [] for name in caches}
    for a in range(0, len(targets), 2048):
        for name, cache in caches.items():
            start = time.perf_counter()
            outs[name].append(cache.score(hidden[a : a + 2048], targets[a : a + 2048]))
            seconds[name] += time.perf_counter() - start
    f, t = (np.concatenate(outs[name]) for name in ("faiss", "torch"))
    both = np.isfinite(f) & np.isfinite(t)
    # Perplexity of the cache mixed (weight 0.1) with a uniform model over the stream's vocabulary.
    uniform = np.full(len(targets), -np.log(targets.max() + 1))
    ppl = {name: float(np.exp(-interpolate(uniform, out, [0.1]).mean())) for name, out in (("faiss", f), ("torch", t))}
    return {
        "positions": len(targets), "knn": k,
        "faiss_tokens_per_s": round(len(targets) / seconds["faiss"], 1),
        "torch_tokens_per_s": round(len(targets) / seconds["torch"], 1),
        "torch_vs_faiss": round(seconds["torch"] / seconds["faiss"], 3),
        "same_finite": bool((np.isfinite(f) == np.isfinite(t)).all()),
        "max_logp_difference": float(np.abs(f[both] - t[both]).max()) if both.any() else 0.0,
        "positions_differing": int((np.abs(f[both] - t[both]) > 1e-6).sum()),
        "faiss_perplexity": round(ppl["faiss"], 4), "torch_perplexity": round(ppl["torch"], 4),
        "perplexity_relative_difference": abs(ppl["torch"] - ppl["faiss"]) / ppl["faiss"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000],
                    help="datastore sizes of the search benchmark")
    ap.add_argument("--dim", type=int, default=300, help="state size (the paper-scale models' emb 300)")
    ap.add_argument("--knn", type=int, default=1024, help="neighbours k (the unbounded cache's default)")
    ap.add_argument("--queries", type=int, default=1024, help="queries per search (the cache's block)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--stream", type=int, default=20_000, help="positions of the cache benchmark (0: skip it)")
    ap.add_argument("--threads", type=int, default=1, help="torch and FAISS threads")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    device = torch.device(args.device)
    result = {
        "benchmark": "knn_search",
        "args": vars(args),
        "machine": {**environment(str(device)), "faiss_gpus": faiss.get_num_gpus()},
        "search": [], "stream": None,
    }
    largest = max(args.sizes)
    log(f"generating {largest + args.queries:,} states of dim {args.dim}")
    states, _ = synthetic_stream(largest + args.queries, args.dim, 50_000, seed=args.dim)
    queries = states[largest:]  # the states after the datastore's, as the cache's next block
    for n in sorted(args.sizes):
        log(f"search: {args.queries} queries, k {args.knn}, against {n:,} states")
        result["search"].append(search(states[:n], queries, args.knn, device, args.repeats))
        log(json.dumps(result["search"][-1]))
    if args.stream:
        log(f"stream: the unbounded cache over {args.stream:,} positions, k {args.knn}")
        hidden, targets = synthetic_stream(args.stream, args.dim, 50_000, seed=args.dim + 1)
        result["stream"] = stream(hidden, targets, args.knn, device)
        log(json.dumps(result["stream"]))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
