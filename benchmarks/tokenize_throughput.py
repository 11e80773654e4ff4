"""Throughput of `groc tokenize` with 1 and N processes on ~1M tokens of real text; prints JSON.

    python benchmarks/tokenize_throughput.py [--tokens 1000000] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("GROC_SHARED_DATA", REPO.parent / "shared" / "data"))
sys.path.insert(0, str(REPO))
from groc_cli.cpu import cpuinfo  # noqa: E402
from groc_cli.environment import cpu_flags  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--source", type=Path, default=DATA / "reuters" / "reuters.training.txt")
    args = parser.parse_args()
    lines, count = [], 0
    with open(args.source, encoding="utf-8") as handle:
        while count < args.tokens:
            for line in handle:
                lines.append(line)
                count += len(line.split())
                if count >= args.tokens:
                    break
            else:
                handle.seek(0)
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "input.txt"
        text.write_text("".join(lines), encoding="utf-8")
        results = {}
        for jobs in (1, args.jobs):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "groc_cli", "tokenize", str(text), "--lower", "-j", str(jobs),
                            "-o", str(Path(tmp) / f"out{jobs}.txt")], check=True)
            results[jobs] = time.perf_counter() - start
        same = (Path(tmp) / "out1.txt").read_bytes() == (Path(tmp) / f"out{args.jobs}.txt").read_bytes()
    print(json.dumps({
        "benchmark": "tokenize", "source": str(args.source), "whitespace_tokens": count, "lines": len(lines),
        "cpu": cpuinfo().model, "cpu_flags": cpu_flags(),
        "cpus": os.cpu_count(), "seconds": {f"j{j}": round(s, 2) for j, s in results.items()},
        "tokens_per_second": {f"j{j}": round(count / s) for j, s in results.items()},
        "speedup": round(results[1] / results[args.jobs], 2), "identical_output": same,
    }))


if __name__ == "__main__":
    main()
