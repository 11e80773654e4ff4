"""CPU threads: training speed with --threads 1, 2 and auto on a quiet and on a shared machine.

    python benchmarks/threads.py                 # ~30 min on 2 cores; prints ONE JSON object
    python benchmarks/threads.py --kinds tied --tokens 20000 --scenarios side-by-side

For each scenario, each kind (tied, groc) and each --threads value it runs `groc train` on the
embedded sample (Austen's Emma, prepared here as the quickstart does, at the quickstart's size)
for --tokens tokens and reads the tokens/s that `--json` reports. Scenarios:
  idle        nothing else runs;
  busy        one other process spins on one core for the whole measurement (a shared machine);
  side-by-side  two `groc train` with the same --threads at once (the tokens/s of each).
Each setting is measured --repeats times, the settings of a scenario taking turns: `runs` holds every
measurement, `tokens_per_s` each copy's median and `vs_one_thread` the slower copy's median against one
thread's in the same scenario and kind. `chose` gives, per run, the thread count it started with and each count `--threads auto` moved to
as other runs came and went (from the run's own log lines).
Run it on a machine with nothing else running: the scenarios add their own load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "groc_cli" / "data" / "austen-emma.txt"
sys.path.insert(0, str(REPO))
from groc_cli.cpu import cpuinfo  # noqa: E402
from groc_cli.environment import cpu_flags  # noqa: E402
SIZE = ["--emb", "64", "--hidden", "128", "--dropout", "0.2", "--seed", "1"]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def groc(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "groc_cli", *map(str, args)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(proc: subprocess.Popen) -> tuple[dict, str]:
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"groc failed ({proc.returncode}): {err.decode()[-2000:]}")
    return json.loads(out), err.decode()


def prepare(work: Path) -> tuple[Path, Path]:
    data, lexicon = work / "emma", work / "lexicon.parquet"
    finish(groc("prepare", "--train", SAMPLE, "--tokenize", "--lower", "--split", "170K,rest",
                "--min-count", "2", "-o", data, "--json"))
    finish(groc("lexicon", "--vocab", data, "-o", lexicon, "--json"))
    return data, lexicon


def train_args(work: Path, data: Path, lexicon: Path, kind: str, threads: str, tokens: int, name: str) -> list[str]:
    extra = ["--lexicon", str(lexicon)] if kind == "groc" else []
    return ["train", str(data), "-o", str(work / name), "--output-layer", kind, *SIZE, *extra,
            "--max-tokens", str(tokens), "--threads", threads, "--json"]


def chosen_threads(err: str) -> list[int]:
    """The count the run started with, then each count --threads auto moved to as runs came and went."""
    return [int(n) for n in re.findall(r"(\d+) CPU thread", err)]


def token_budgets(spec: str) -> dict[str, int]:
    """'tied=150000,groc=30000' (or one number for every kind)."""
    if "=" not in spec:
        return {"*": int(spec)}
    return {kind: int(n) for kind, n in (part.split("=") for part in spec.split(","))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kinds", default="tied,groc")
    ap.add_argument("--threads", default="1,2,auto")
    ap.add_argument("--tokens", default="tied=150000,groc=30000",
                    help="training tokens per measurement, per kind (10-20 s each at one thread on 2 cores)")
    ap.add_argument("--scenarios", default="idle,busy,side-by-side")
    ap.add_argument("--repeats", type=int, default=3, help="measurements of each setting, taking turns; the median is kept")
    args = ap.parse_args()
    budgets = token_budgets(args.tokens)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data, lexicon = prepare(work)
        n = 0
        for scenario in args.scenarios.split(","):
            hog = None
            if scenario == "busy":
                hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
                time.sleep(1.0)
            try:
                cells: dict[tuple[str, str], dict] = {}
                # Round-robin repeats, so that a slow spell of the machine hits every setting alike.
                copies = 2 if scenario == "side-by-side" else 1
                for _ in range(args.repeats):
                    for kind in args.kinds.split(","):
                        budget = budgets.get(kind, budgets.get("*"))
                        for threads in args.threads.split(","):
                            procs = []
                            for _ in range(copies):
                                n += 1
                                procs.append(groc(*train_args(work, data, lexicon, kind, threads, budget, f"r{n}"), env=env))
                            results = [finish(p) for p in procs]
                            row = cells.setdefault((kind, threads), {"scenario": scenario, "kind": kind, "threads": threads,
                                                                     "chose": [], "runs": []})
                            row["chose"] += [chosen_threads(err) for _, err in results]
                            row["runs"].append([round(r["final"]["tokens_per_s"]) for r, _ in results])
                            log(json.dumps(row))
                for row in cells.values():  # per copy, the median over the repeats
                    row["tokens_per_s"] = [round(statistics.median(speeds)) for speeds in zip(*row["runs"])]
                    rows.append(row)
            finally:
                if hog is not None:
                    hog.kill()
                    hog.wait()
    for row in rows:  # each row against one thread in the same scenario and kind
        base = next(r for r in rows if (r["scenario"], r["kind"], r["threads"]) == (row["scenario"], row["kind"], "1"))
        row["vs_one_thread"] = round(min(row["tokens_per_s"]) / min(base["tokens_per_s"]), 2)
    print(json.dumps({"benchmark": "threads", "cpus": len(os.sched_getaffinity(0)),
                      "machine": cpuinfo().model,
                      "cpu_flags": cpu_flags(), "python": platform.python_version(),
                      "tokens": budgets, "repeats": args.repeats, "size": " ".join(SIZE), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
