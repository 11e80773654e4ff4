"""The Python API's `load_run(...).score(sentences)` beside `groc score` on the same text, in one run.

    python benchmarks/api_score.py                          # a one-step tied model of Persuasion, 2,000 Emma lines
    python benchmarks/api_score.py --output-layer groc --lines 5000 --emb 300 --hidden 1024
    python benchmarks/api_score.py --run runs/ptb-tied --text ptb.test.txt

Without --run, a model of --emb/--hidden is made by `groc train` with a few steps on the packaged
Persuasion (timing does not depend on what the weights learned). The text is the first --lines
non-empty lines of the packaged Emma (many words the model never saw: union vocabulary), or --text.
`groc score` runs as a process (its start-up, measured on a one-word input, is subtracted); the API
runs in this process (load_run included). Both get the same --threads. The two must give the same
log-probabilities (checked, to 1e-4 per line). Prints ONE JSON object: seconds of each, the median
of --repeats (and the API scoring one sentence at a time, `score_stream`, as `score` did before it
batched), and api_over_command, the API's time over the command's (target: at most 1.5).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BOOKS = REPO / "groc_cli" / "data"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def groc(*args, env=None) -> str:
    return subprocess.run([sys.executable, "-m", "groc_cli", *map(str, args)], stdin=subprocess.DEVNULL, check=True,
                          stdout=subprocess.PIPE, env=env).stdout.decode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, help="trained run directory (default: a few-step model of --emb/--hidden)")
    ap.add_argument("--text", type=Path, help="one sentence a line (default: the packaged Emma's first --lines lines)")
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--output-layer", dest="output", default="tied")
    ap.add_argument("--emb", type=int, default=200)
    ap.add_argument("--hidden", type=int, default=650)
    ap.add_argument("--vocab", default="union", choices=("union", "model"))
    ap.add_argument("--threads", type=int, default=1, help="CPU threads of both (OMP_NUM_THREADS of the command)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": str(args.threads)}
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    sys.path.insert(0, str(REPO))
    from groc_cli.api import load_run

    with tempfile.TemporaryDirectory(prefix="groc-api-bench-") as tmp:
        tmp = Path(tmp)
        run = args.run
        if run is None:
            groc("prepare", "--train", BOOKS / "austen-persuasion.txt", "--split", "4000,1000", "-o", tmp / "data", env=env)
            run = tmp / "run"
            extra = []
            if args.output == "groc":
                groc("lexicon", "--vocab", tmp / "data", "-o", tmp / "lex.parquet", env=env)
                extra = ["--lexicon", tmp / "lex.parquet"]
            groc("train", tmp / "data", "-o", run, "--output-layer", args.output, "--emb", args.emb, "--hidden",
                 args.hidden, "--max-tokens", 200, "--batch-size", 4, "--bptt", 20, *extra, env=env)
        text = args.text
        if text is None:
            lines = [line.strip() for line in BOOKS.joinpath("austen-emma.txt").read_text(encoding="utf-8").splitlines()]
            text = tmp / "text.txt"
            text.write_text("\n".join([line for line in lines if line][: args.lines]) + "\n", encoding="utf-8")
        sentences = text.read_text(encoding="utf-8").splitlines()
        tokens = sum(len(s.split()) + 1 for s in sentences)
        empty = tmp / "one-word.txt"  # start-up: an empty input is refused
        empty.write_text("the\n")
        flags = ["--vocab", args.vocab, "--threads", args.threads]
        command, startup, api, single = [], [], [], []
        for r in range(args.repeats):
            t = time.perf_counter()
            groc("score", run, empty, *flags, env=env)
            startup.append(time.perf_counter() - t)
            t = time.perf_counter()
            out = groc("score", run, text, *flags, env=env)
            command.append(time.perf_counter() - t)
            t = time.perf_counter()
            scores = load_run(run, vocab=args.vocab, threads=args.threads).score(sentences)
            api.append(time.perf_counter() - t)
            t = time.perf_counter()
            list(load_run(run, vocab=args.vocab, threads=args.threads).score_stream(sentences))
            single.append(time.perf_counter() - t)
            log(f"repeat {r + 1}: command {command[-1]:.2f}s (start-up {startup[-1]:.2f}s), api {api[-1]:.2f}s")
        rows = [line.split("\t") for line in out.splitlines()[1:]]
        worst = max(abs(float(row[0]) - s.log_prob) for row, s in zip(rows, scores))
        if len(rows) != len(scores) or worst > 1e-4:
            sys.exit(f"error: the API and groc score disagree (lines {len(scores)} vs {len(rows)}, worst {worst:g})")
        cmd = statistics.median(command) - statistics.median(startup)
        api_s = statistics.median(api)
        print(json.dumps({
            "benchmark": "api_score",
            "run": "one-step" if args.run is None else str(args.run),
            "output_layer": args.output if args.run is None else None,
            "emb": args.emb if args.run is None else None,
            "hidden": args.hidden if args.run is None else None,
            "vocab": args.vocab,
            "sentences": len(sentences),
            "tokens": tokens,
            "threads": args.threads,
            "repeats": args.repeats,
            "command_seconds": round(cmd, 3),
            "command_startup_seconds": round(statistics.median(startup), 3),
            "api_seconds": round(api_s, 3),
            "api_over_command": round(api_s / cmd, 3),
            "one_sentence_at_a_time_seconds": round(statistics.median(single), 3),
            "max_line_difference": worst,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        }))


if __name__ == "__main__":
    main()
