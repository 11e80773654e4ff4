"""Unbounded cache over large datastores: memory, time and perplexity of where the states live.

    python benchmarks/large_datastore.py layouts STATES --tokens 1000000 --index IVF1024,PQ32
    python benchmarks/large_datastore.py eval -- groc eval RUN DATASET --states STATES --cache unbounded ...

`layouts` scores the first --tokens states of a `groc dump` directory with the unbounded cache
in each way of holding its datastore, each in a fresh process (so peak memory is its own):
  flat-memory      'Flat': every state as float32 in memory, exact distances;
  pq-memory        'IVF…,PQ…': codes and ids in memory, PQ (approximate) distances;
  pq-ondisk-lists  the same with FAISS's OnDiskInvertedLists: codes and ids in an mmapped file
                   (a prototype of the alternative to --datastore disk; not in groc);
  rflat-memory     'IVF…,PQ…,RFlat': codes plus a float32 copy of each state, exact re-ranking;
  rflat-disk       the same, re-ranking from the memory-mapped dump (groc eval --datastore disk).
Each trainable index loads one index trained on the first --index-train states. Perplexity
interpolates the dump's model log-probabilities with the cache at --cache-weight.

`eval` runs one command (normally `groc eval ... --datastore disk`) and measures it.

Peak memory: `peak_rss_bytes` is the kernel's high-water mark (ru_maxrss), which counts pages
of memory-mapped files that were resident (the dump, on-disk lists) as well as the process's
own memory; `peak_anon_bytes` is the largest RssAnon sampled every --sample seconds: what
must stay in memory, while mapped file pages can be dropped and read again.

Prints ONE JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LAYOUTS = ("flat-memory", "pq-memory", "pq-ondisk-lists", "rflat-memory", "rflat-disk")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def measure(command: list[str], sample: float) -> dict:
    """Run ``command``; its wall time, exit status, stdout, peak RSS and peak anonymous RSS."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE)
    peak_anon = 0
    stop = threading.Event()

    def poll():
        nonlocal peak_anon
        status = Path(f"/proc/{proc.pid}/status")
        while not stop.is_set():
            try:
                for line in status.read_text().splitlines():
                    if line.startswith("RssAnon:"):
                        peak_anon = max(peak_anon, int(line.split()[1]) * 1024)
            except OSError:  # the process has ended
                return
            stop.wait(sample)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    stdout = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    stop.set()
    poller.join()
    return {"returncode": proc.returncode, "seconds": round(time.perf_counter() - started, 1),
            "peak_rss_bytes": usage.ru_maxrss * 1024, "peak_anon_bytes": peak_anon, "stdout": stdout.decode()}


def one_layout(args) -> dict:
    """Runs in its own process: score the stream with one layout; prints its figures."""
    import faiss
    import numpy as np
    import torch

    from groc_cli.caches import interpolate, make_cache

    faiss.omp_set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    states = Path(args.states)
    hidden = np.load(states / "hidden.npy", mmap_mode="r")
    targets = np.load(states / "targets.npy", mmap_mode="r")
    model_logp = np.load(states / "logp.npy", mmap_mode="r")
    n = min(args.tokens, len(targets))
    index = {"flat-memory": "Flat", "pq-memory": args.index, "pq-ondisk-lists": args.index}.get(
        args.one, f"{args.index},RFlat")
    trained = None if index == "Flat" else f"{args.trained}.{'rflat' if index.endswith(',RFlat') else 'pq'}"
    cache = make_cache("unbounded", dim=hidden.shape[1], index=index, nprobe=args.nprobe, knn=args.knn, use_gpu=False,
                       trained_index=trained, stored_states=hidden if args.one == "rflat-disk" else None)
    if args.one == "pq-ondisk-lists":
        # The alternative to --datastore disk: FAISS keeps the IVF's codes and ids in an
        # mmapped file (faiss/invlists/OnDiskInvertedLists.h). The cache's searched index is
        # private; reaching into it here is what a prototype may do.
        ivf = faiss.extract_index_ivf(cache._store)
        lists = faiss.OnDiskInvertedLists(ivf.nlist, ivf.code_size, str(Path(args.workdir) / "lists.ivfdata"))
        ivf.replace_invlists(lists, False)
        cache.lists = lists  # alive as long as the index that uses it
    started = time.perf_counter()
    nll = model_nll = 0.0
    for a in range(0, n, args.chunk):
        b = min(a + args.chunk, n)
        h = np.asarray(hidden[a:b], dtype=np.float32)
        lm = np.asarray(model_logp[a:b], dtype=np.float64)
        mixed = interpolate(lm, cache.score(h, np.asarray(targets[a:b], dtype=np.int64)), [args.cache_weight])
        nll -= float(mixed.sum())
        model_nll -= float(lm.sum())
    seconds = time.perf_counter() - started
    return {"layout": args.one, "index": index, "tokens": n, "score_seconds": round(seconds, 1),
            "tokens_per_s": round(n / seconds, 1), "perplexity": math.exp(nll / n), "model_perplexity": math.exp(model_nll / n),
            "cache_nbytes": int(cache.nbytes), "cache_bytes_per_state": round(cache.nbytes / n, 1)}


def layouts(args) -> dict:
    from groc_cli.caches import make_cache
    import numpy as np

    hidden = np.load(Path(args.states) / "hidden.npy", mmap_mode="r")
    results = []
    with tempfile.TemporaryDirectory(prefix="groc-datastore-", dir=args.workdir) as tmp:
        trained = str(Path(tmp) / "trained")
        sample = np.asarray(hidden[: args.index_train], dtype=np.float32)
        for suffix, index in (("pq", args.index), ("rflat", f"{args.index},RFlat")):
            started = time.perf_counter()
            make_cache("unbounded", index=index, train_vectors=sample, use_gpu=False).save_trained(f"{trained}.{suffix}")
            log(f"trained {index} on {len(sample):,} states in {time.perf_counter() - started:.1f}s")
        del sample
        for layout in args.layouts.split(","):
            command = [sys.executable, __file__, "layouts", args.states, "--one", layout, "--trained", trained,
                       "--workdir", tmp, *(f"--{k.replace('_', '-')}={getattr(args, k)}" for k in
                                           ("tokens", "index", "nprobe", "knn", "cache_weight", "chunk", "threads"))]
            got = measure(command, args.sample)
            if got["returncode"] != 0:
                sys.exit(f"error: layout {layout} failed (exit status {got['returncode']})")
            row = {**json.loads(got["stdout"]), **{k: got[k] for k in ("seconds", "peak_rss_bytes", "peak_anon_bytes")}}
            log(json.dumps(row))
            results.append(row)
    return {"mode": "layouts", "states": args.states, "results": results}


def eval_command(args) -> dict:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    got = measure(command, args.sample)
    if got["returncode"] != 0:
        sys.exit(f"error: the command failed (exit status {got['returncode']})")
    summary = json.loads(got["stdout"])
    out = {"mode": "eval", "command": command, "wall_seconds": got["seconds"], "eval_seconds": summary["seconds"],
           **{k: got[k] for k in ("peak_rss_bytes", "peak_anon_bytes")},
           **{k: summary[k] for k in ("perplexity", "model_perplexity", "tokens", "tokens_per_s", "cache_config", "settings")}}
    if summary.get("per_token") and args.segments:
        out["segments"] = segments(Path(summary["per_token"]), args.segments)
    return out


def segments(path: Path, count: int) -> list[dict]:
    """Perplexity of consecutive equal parts of the stream (e.g. the passes of a repeated text)."""
    import numpy as np
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["model_logp", "final_logp"])
    model = table.column("model_logp").to_numpy()
    final = table.column("final_logp").to_numpy()
    edges = np.linspace(0, len(final), count + 1).astype(int)
    return [{"positions": [int(a), int(b)], "perplexity": math.exp(-final[a:b].mean()),
             "model_perplexity": math.exp(-model[a:b].mean())} for a, b in zip(edges[:-1], edges[1:])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    lay = sub.add_parser("layouts", help="compare the ways of holding the datastore on one dump")
    lay.add_argument("states", help="a groc dump directory")
    lay.add_argument("--tokens", type=int, default=1_000_000, help="score the first N states")
    lay.add_argument("--index", default="IVF1024,PQ32", help="the compressed index (RFlat layouts append ',RFlat')")
    lay.add_argument("--index-train", type=int, default=100_000)
    lay.add_argument("--nprobe", type=int, default=8)
    lay.add_argument("--knn", type=int, default=256)
    lay.add_argument("--cache-weight", type=float, default=0.1)
    lay.add_argument("--chunk", type=int, default=1024)
    lay.add_argument("--threads", type=int, default=1)
    lay.add_argument("--layouts", default=",".join(LAYOUTS))
    lay.add_argument("--workdir", default=None, help="where the on-disk lists and trained indexes go (default: $TMPDIR)")
    lay.add_argument("--sample", type=float, default=0.5, help="seconds between memory samples")
    lay.add_argument("--one", choices=LAYOUTS, help=argparse.SUPPRESS)
    lay.add_argument("--trained", help=argparse.SUPPRESS)
    ev = sub.add_parser("eval", help="measure one command, e.g. groc eval ... --datastore disk")
    ev.add_argument("--segments", type=int, default=0, help="with --per-token in the command: perplexity of N equal parts")
    ev.add_argument("--sample", type=float, default=0.5, help="seconds between memory samples")
    ev.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    if args.mode == "layouts" and args.one:
        # OnDiskInvertedLists prints its file resizes on the C stdout: send those to stderr.
        result = os.dup(1)
        os.dup2(2, 1)
        os.write(result, (json.dumps(one_layout(args)) + "\n").encode())
        return
    started, load = time.strftime("%Y-%m-%dT%H:%M:%S"), os.getloadavg()
    out = layouts(args) if args.mode == "layouts" else eval_command(args)
    out.update(started=started, machine=platform.machine(), cpus=os.cpu_count(), loadavg_start=load,
               loadavg_end=os.getloadavg())
    print(json.dumps(out))


if __name__ == "__main__":
    main()
