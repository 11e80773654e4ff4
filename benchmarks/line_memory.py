"""Peak memory of `groc score` on one 5-million-character line and of `groc eval` on a 10M-token
split (issue 30: memory bounded by settings, not by the length of a line); prints JSON.

    python benchmarks/line_memory.py [--chars 5000000] [--eval-tokens 10000000] [--eval-caches none,local] [--tmp DIR]
    python benchmarks/line_memory.py --eval-tokens 1000000    # minutes; the defaults took over 25 on a 2-core AMD EPYC

A tiny tied run (emb 16, hidden 24) is trained on the embedded Persuasion sample; the line and the
split repeat that sample's words (no new words), so what grows is only the length. Each figure is
one `groc` subprocess's peak resident set size from wait4; `imports_rss_mb` is `groc --version`'s.
`--eval-tokens 0` skips eval; eval runs once per `--eval-caches` kind (the local cache's window:
`--cache-size`, else its default of 10,000 states), each with `--per-token`, so the per-token Parquet writer is measured too. Which code runs is whatever `python -m groc_cli` imports (PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from groc_cli.cpu import cpuinfo  # noqa: E402

BOOK = REPO / "groc_cli" / "data" / "austen-persuasion.txt"
TINY = ["--emb", "16", "--hidden", "24", "--batch-size", "4", "--bptt", "12", "--seed", "3"]


def groc(args: list, cwd: Path) -> dict:
    """Run `groc ARGS` in `cwd` (not here: `python -m` would import this checkout first); its wall
    time and peak RSS."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "groc_cli", *map(str, args)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, cwd=cwd, env={**os.environ, "OMP_NUM_THREADS": "1"})
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"groc {' '.join(map(str, args))} failed:\n{stderr.decode()[-2000:]}")
    return {"peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "seconds": round(time.perf_counter() - start, 1)}


def window(cache: str, size: int | None) -> list:
    return ["--cache-size", size] if size is not None and cache in ("local", "unigram") else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=5_000_000)
    parser.add_argument("--eval-tokens", type=int, default=10_000_000)
    parser.add_argument("--eval-caches", default="none,local", help="Comma-separated --cache kinds to measure eval with.")
    parser.add_argument("--cache-size", type=int, default=None, help="The local cache's window for eval (default: "
                        "its own, 10,000); memory depends on it, time grows with it.")
    parser.add_argument("--tmp", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="groc-line-memory-", dir=args.tmp))
    try:
        groc(["prepare", "--train", BOOK, "--split", "4000,1000", "-o", work / "data"], work)
        groc(["train", work / "data", "-o", work / "tied", "--output-layer", "tied", "--max-tokens", "300", *TINY], work)
        words = BOOK.read_text(encoding="utf-8").split()[:2000]
        seen = " ".join(words)
        line = " ".join([seen] * (args.chars // len(seen) + 1))[: args.chars].rsplit(" ", 1)[0]
        (work / "line.txt").write_text(line + "\n", encoding="utf-8")
        result = {"machine": f"{cpuinfo().model}, {os.cpu_count()} cores",
                  "imports_rss_mb": groc(["--version"], work)["peak_rss_mb"],
                  "score_line": {"chars": len(line), "tokens": len(line.split()) + 1,
                                 **groc(["score", work / "tied", work / "line.txt"], work)}}
        if args.eval_tokens:
            lines_needed = args.eval_tokens // 21 + 1  # 20 words and <eos> a line
            with open(work / "split.txt", "w", encoding="utf-8") as handle:
                for i in range(lines_needed):
                    start = (i * 20) % (len(words) - 20)
                    handle.write(" ".join(words[start : start + 20]) + "\n")
            result["eval_split"] = {"tokens": lines_needed * 21,
                                    "prepare": groc(["prepare", "--train", BOOK, "--test", work / "split.txt", "-o",
                                                     work / "big"], work)}
            for cache in filter(None, args.eval_caches.split(",")):
                result["eval_split"][f"cache_{cache}"] = groc(["eval", work / "tied", work / "big", "--split", "test",
                                                               "--cache", cache, "--per-token", work / "tokens.parquet",
                                                               "--force", *window(cache, args.cache_size)], work)
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
