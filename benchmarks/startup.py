"""Start-up time of groc commands that should not pay for torch: --help (of groc and of the stages), tokenize, prepare.

    python benchmarks/startup.py                          # this checkout
    python benchmarks/startup.py --before /tmp/before     # and an older groc_cli tree, interleaved

Each command runs --repeat times in a fresh interpreter (`python -m groc_cli ...`, with
PYTHONPATH at the tree); the median wall time is reported, and with --before the ratio
before/after, measured alternately so that outside load hits both alike. Each command's time is also given
against a bare `python -c "import torch"` measured the same way (`vs_import_torch`): what a command that
imported torch would cost at least. Prints ONE JSON object.
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

REPO = Path(__file__).resolve().parent.parent


def commands(scratch: Path) -> dict[str, list[str]]:
    text = scratch / "two-lines.txt"
    text.write_text("The quick brown fox .\nIt jumps .\n")
    return {
        "groc --help": ["--help"],
        "groc train --help": ["train", "--help"],
        "groc finetune --help": ["finetune", "--help"],
        "groc eval --help": ["eval", "--help"],
        "groc tokenize (2 lines)": ["tokenize", str(text)],
        "groc prepare (2 lines)": ["prepare", "--train", str(text), "-o", str(scratch / "out"), "--force"],
    }


def once(argv: list[str], cwd: Path, tree: Path | None = None) -> float:
    """Seconds of `python ARGV` in a fresh interpreter, with PYTHONPATH at `tree` where one is given."""
    # -m puts the working directory first on sys.path: run from a scratch directory, not a checkout.
    env = {**os.environ, "PYTHONPATH": str(tree)} if tree else None
    started = time.perf_counter()
    subprocess.run([sys.executable, *argv], env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", type=Path, help="another tree holding groc_cli/ (e.g. from git archive)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    trees = {"after": REPO, **({"before": args.before.resolve()} if args.before else {})}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        import_torch = statistics.median(once(["-c", "import torch"], Path(tmp)) for _ in range(args.repeat))
        for name, argv in commands(Path(tmp)).items():
            times: dict[str, list[float]] = {t: [] for t in trees}
            for _ in range(args.repeat):
                for tree_name, tree in trees.items():
                    times[tree_name].append(once(["-m", "groc_cli", *argv], Path(tmp), tree))
            row = {"command": name, **{f"{t}_seconds": round(statistics.median(v), 3) for t, v in times.items()}}
            row["vs_import_torch"] = round(row["after_seconds"] / import_torch, 3)
            if args.before:
                row["before_over_after"] = round(row["before_seconds"] / row["after_seconds"], 2)
            print(json.dumps(row), file=sys.stderr, flush=True)
            rows.append(row)
    print(json.dumps({"benchmark": "startup", "repeat": args.repeat, "python": sys.version.split()[0],
                      "loadavg": os.getloadavg(), "import_torch_seconds": round(import_torch, 3), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
