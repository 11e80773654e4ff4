"""Peak memory and time of `groc prepare` on PTB and on 10M / 100M-token inputs; prints JSON.

    python benchmarks/prepare_memory.py [--sizes ptb,10M,100M] [--tmp DIR]

`ptb` prepares PTB's three files (1,085,779 tokens); `10M`, `100M` prepare one --train file
of that many tokens (<eos> included), made by concatenating PTB's and WikiText-2's training
files over and over into DIR (deleted afterwards; 100M tokens take about 550 MB). Each run is
one `groc prepare` subprocess whose peak resident set size (its own or a worker's, whichever is
larger) comes from wait4. `imports_rss_mb` is `groc --version`'s: what any groc command holds
before it reads a byte. Which code runs is whatever `python -m groc_cli` imports (PYTHONPATH).
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
DATA = Path(os.environ.get("GROC_SHARED_DATA", REPO.parent / "shared" / "data"))
SOURCES = (DATA / "ptb" / "ptb.train.txt", DATA / "wikitext-2" / "wiki.train.tokens")


def run(args: list[str], cwd: Path) -> dict:
    """Run `groc ARGS`; its wall time and peak RSS (ru_maxrss covers the waited-for workers too)."""
    start = time.perf_counter()
    # In `cwd`, not here: `python -m` would import the groc_cli of the current directory first.
    proc = subprocess.Popen([sys.executable, "-m", "groc_cli", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            cwd=cwd, env={**os.environ, "OMP_NUM_THREADS": "1"})
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"groc {' '.join(args)} failed:\n{stderr.decode()}")
    return {"seconds": round(seconds, 1), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}


def write_corpus(path: Path, tokens: int) -> int:
    """Whole lines of the sources, in turn, until `tokens` tokens (one <eos> a line) are written."""
    written = 0
    with open(path, "wb") as out:
        while True:
            for source in SOURCES:
                with open(source, "rb") as handle:
                    for line in handle:
                        out.write(line)
                        written += len(line.split()) + 1
                        if written >= tokens:
                            return written


def parse_size(text: str) -> int:
    return int(float(text[:-1]) * {"K": 1e3, "M": 1e6, "G": 1e9}[text[-1].upper()]) if text[-1].isalpha() else int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="ptb,10M,100M", help="comma-separated: ptb and/or token counts (10M, 100M)")
    parser.add_argument("--tmp", type=Path, default=None, help="where the corpus and the datasets go (default: $TMPDIR)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.tmp, prefix="groc-prepare-memory-") as tmp:
        tmp = Path(tmp)
        code = subprocess.run([sys.executable, "-c", "import groc_cli; print(groc_cli.__file__)"], cwd=tmp,
                              capture_output=True, text=True, check=True).stdout.strip()
        results = {"benchmark": "prepare_memory", "groc_cli": str(Path(code).parent), "cpus": os.cpu_count(),
                   "imports_rss_mb": run(["--version"], tmp)["peak_rss_mb"], "runs": []}
        for size in args.sizes.split(","):
            out = tmp / f"dataset-{size}"
            if size == "ptb":
                ptb = DATA / "ptb"
                flags = ["--train", ptb / "ptb.train.txt", "--valid", ptb / "ptb.valid.txt", "--test", ptb / "ptb.test.txt"]
                row = {"input": "ptb train+valid+test", "tokens": 1_085_779}
            else:
                corpus = tmp / f"corpus-{size}.txt"
                row = {"input": "ptb.train + wiki.train, repeated", "tokens": write_corpus(corpus, parse_size(size))}
                row["input_bytes"] = corpus.stat().st_size
                flags = ["--train", corpus]
            row.update(run(["prepare", *map(str, flags), "-o", str(out)], tmp))
            manifest = json.loads((out / "manifest.json").read_text())
            row["tokens"] = sum(s["tokens"] for s in manifest["splits"].values())
            row["types"] = manifest["types_total"]
            results["runs"].append(row)
            shutil.rmtree(out)
            (tmp / f"corpus-{size}.txt").unlink(missing_ok=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
