"""Evaluation throughput of one model with no cache, and with the unigram, local and unbounded
caches, on the same real text in one process (paper Table 4's evaluation-time ratios).

    python benchmarks/eval_throughput.py                          # paper-size tied model, PTB valid
    python benchmarks/eval_throughput.py --run results/work/runs/small/ptb-tied --dataset results/work/ptb

Without --run, a model of the requested size is created by `groc train` with a single step
(timing does not depend on what the weights learned). Every setting runs `groc eval`'s own
code path (groc_cli.evaluation.evaluate) over the whole split: model forward, softmax, cache
and interpolation. A trainable FAISS index (IVF/PQ) is trained once on the split's first
--index-train states and saved (--index-save); the timed unbounded run loads it
(--index-load), so its time excludes training, which is reported on its own.

Prints ONE JSON object on stdout: tokens/s per setting and the ratio of its time to the
static (no cache) evaluation, each the median of --repeats runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from groc_cli.environment import environment  # noqa: E402
from groc_cli.evaluation.perplexity import EvalSettings, evaluate  # noqa: E402

DATA = Path(os.environ.get("GROC_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def groc(*args) -> None:
    subprocess.run([sys.executable, "-m", "groc_cli", *map(str, args)], check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, help="trained run directory (default: a one-step model of --emb/--hidden)")
    ap.add_argument("--dataset", type=Path, help="dataset directory (default: PTB prepared in a temporary directory)")
    ap.add_argument("--split", default="valid")
    ap.add_argument("--output-layer", dest="output", default="tied", help="output layer of the one-step model")
    ap.add_argument("--emb", type=int, default=300, help="one-step model: embedding size (paper PTB: 300)")
    ap.add_argument("--hidden", type=int, default=1024, help="one-step model: LSTM units (paper: 1024)")
    ap.add_argument("--cache-size", type=int, default=10_000, help="local cache window (paper: 10,000)")
    ap.add_argument("--theta", type=float, default=0.5)
    ap.add_argument("--index", default=None, help="unbounded cache index (default IVF1024,PQm with m the largest divisor "
                    "of the state size up to 32; the paper used IVF4096,PQ32 on 10M tokens)")
    ap.add_argument("--index-train", type=int, default=50_000)
    ap.add_argument("--nprobe", type=int, default=8)
    ap.add_argument("--knn", type=int, default=1024)
    ap.add_argument("--chunk", type=int, default=256, help="positions per LSTM call (groc eval --chunk)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per setting; the median is reported")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (CPU)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory(prefix="groc-eval-bench-") as tmp:
        tmp = Path(tmp)
        dataset = args.dataset
        if dataset is None:
            ptb = DATA / "ptb"
            if not ptb.is_dir():
                sys.exit(f"error: {ptb} not found; pass --dataset")
            dataset = tmp / "ptb"
            groc("prepare", "--train", ptb / "ptb.train.txt", "--valid", ptb / "ptb.valid.txt", "--test", ptb / "ptb.test.txt",
                 "-o", dataset)
        run = args.run
        if run is None:
            run = tmp / "model"
            log(f"creating a one-step {args.output} model ({args.emb}/{args.hidden}) for timing")
            groc("train", dataset, "-o", run, "--output-layer", args.output, "--emb", args.emb, "--hidden", args.hidden,
                 "--max-tokens", 700, "--seed", 1)
        if args.index is None:
            from groc_cli.run_storage import Run

            dim = Run(run).model_config.emb
            args.index = f"IVF1024,PQ{max(m for m in range(1, 33) if dim % m == 0)}"
        common = dict(split=args.split, device=args.device, chunk=args.chunk)
        index_file = tmp / "trained.index"
        settings = {
            "static": {},
            "unigram": dict(cache="unigram", cache_weight=0.05),
            "local": dict(cache="local", cache_weight=0.05, theta=args.theta, cache_size=args.cache_size),
            "unbounded": dict(cache="unbounded", cache_weight=0.1, index=args.index, nprobe=args.nprobe, knn=args.knn,
                              index_train=args.index_train, index_load=str(index_file)),
        }
        # Train (and time) the index once, outside the timed runs.
        t0 = time.perf_counter()
        trained = evaluate(run, dataset, EvalSettings(**common, **{**settings["unbounded"], "index_load": None,
                                                                   "index_save": str(index_file)}))
        index_training = trained["cache_config"]["training"]
        index_run_seconds = time.perf_counter() - t0
        results: dict[str, dict] = {}
        times: dict[str, list[float]] = {name: [] for name in settings}
        # Round-robin repeats, so background load hits every setting alike.
        for r in range(args.repeats):
            for name, kw in settings.items():
                out = evaluate(run, dataset, EvalSettings(**common, **kw))
                times[name].append(out["seconds"])
                results[name] = {"perplexity": round(out["perplexity"], 3), "tokens": out["tokens"]}
                log(f"repeat {r + 1}/{args.repeats} {name}: {out['seconds']:.2f}s, ppl {out['perplexity']:.2f}")
        base = statistics.median(times["static"])
        for name, r in results.items():
            seconds = statistics.median(times[name])
            r.update(seconds=round(seconds, 3), tokens_per_s=round(r["tokens"] / seconds, 1),
                     time_vs_static=round(seconds / base, 3), all_seconds=[round(t, 3) for t in times[name]])
        print(json.dumps({
            "benchmark": "eval_throughput",
            "settings": {
                "run": str(args.run) if args.run else f"one-step {args.output} model, emb {args.emb}, hidden {args.hidden}",
                "dataset": str(args.dataset) if args.dataset else "PTB", "split": args.split, "cache_size": args.cache_size,
                "theta": args.theta, "index": args.index, "nprobe": args.nprobe, "knn": args.knn, "chunk": args.chunk,
                "repeats": args.repeats, "device": args.device, "threads": torch.get_num_threads(),
            },
            "environment": environment(args.device),
            "index_training": {**index_training, "run_seconds_including_training": round(index_run_seconds, 3)},
            "results": results,
        }, indent=1))


if __name__ == "__main__":
    main()
