"""Table 2 at the paper's scale, one row a GPU slot (recipes/gpu-table2.sh row | keep): which row is next, and
the record a slot brings back, checked before it joins the others (what comes back is untrusted, GUIDE 18).

    python recipes/lib/paper_rows.py next --records docs/records/table2-paper
    python recipes/lib/paper_rows.py keep --returned DIR --records docs/records/table2-paper

A row's record is the folder RECORDS/ptb-KIND/ of RECORD_FILES (the run's summary, config and per-epoch
metrics; its test evaluation closed with per-token records, open, and the training split's; the slot's log).
``next`` prints the next row to train: the first of ORDER without a record, else the first whose record did
not end by early stopping (a slot's time stopped it), else nothing. ``keep`` takes the row that ``next`` names
here (never a name from the returned files) and copies the returned record into place only if every file is
a regular file of the expected name and size, every JSON an object of the expected kind, every Parquet table
readable with its columns, the run's output layer that row's, and finite, plausible numbers; otherwise one
line, exit 2, and nothing changes. A row kept over an earlier record (a slot that converged where an earlier
one did not) replaces it whole.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from report import OUTPUT_LAYERS

#: The rows in the order slots train them: tied and GroC first (the paper's central comparison), then Table 2's.
ORDER = ("tied", "groc") + tuple(k for k in OUTPUT_LAYERS if k not in ("tied", "groc"))
JSON_FILES = ("summary.json", "config.json", "test.json", "test-open.json", "train.json")
PARQUET_FILES = {"metrics.parquet": ("epoch", "train_ppl", "valid_ppl", "lr"),
                 "test.parquet": ("word", "train_freq", "model_logp")}
RECORD_FILES = JSON_FILES + tuple(PARQUET_FILES) + ("lease.log",)
MAX_BYTES = 16 * 2**20
MAX_JSON_BYTES = 2**20


class BadRecord(Exception):
    pass


def _converged(record: Path) -> bool:
    try:
        return json.loads((record / "summary.json").read_text()).get("stop_reason") == "early-stopping"
    except (OSError, ValueError, AttributeError, RecursionError):
        return False


def next_row(records: Path, dataset: str = "ptb") -> str | None:
    missing = [k for k in ORDER if not (records / f"{dataset}-{k}").is_dir()]
    if missing:
        return missing[0]
    return next((k for k in ORDER if not _converged(records / f"{dataset}-{k}")), None)


def _json(path: Path) -> dict:
    if path.stat().st_size > MAX_JSON_BYTES:
        raise BadRecord(f"{path.name} is larger than a record's JSON ({path.stat().st_size:,} bytes)")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        raise BadRecord(f"{path.name} is not JSON ({type(exc).__name__})") from None
    if not isinstance(value, dict):
        raise BadRecord(f"{path.name} is not a JSON object")
    return value


def _number(record: dict, key: str, name: str, low: float = 0.0) -> float:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < low:
        raise BadRecord(f"{name}'s {key} is {str(value)[:40]!r}, not a finite number >= {low:g}")
    return float(value)


def check(returned: Path, kind: str) -> None:
    """Every file of a returned record, or BadRecord naming the first that is not as ``row`` writes it."""
    if returned.is_symlink() or not returned.is_dir():
        raise BadRecord(f"{returned} is not a folder")
    names = sorted(p.name for p in returned.iterdir())
    if names != sorted(RECORD_FILES):
        extra = sorted(set(names) - set(RECORD_FILES))
        missing = sorted(set(RECORD_FILES) - set(names))
        raise BadRecord(f"it holds {', '.join(extra) or 'no unexpected file'} and lacks {', '.join(missing) or 'none'}"
                        f"; a row's record is {', '.join(RECORD_FILES)}")
    for name in RECORD_FILES:
        path = returned / name
        if path.is_symlink() or not path.is_file():
            raise BadRecord(f"{name} is not a regular file")
        if path.stat().st_size > MAX_BYTES:
            raise BadRecord(f"{name} is larger than 16 MiB")
    docs = {name: _json(returned / name) for name in JSON_FILES}
    model = docs["config.json"].get("model")
    if not isinstance(model, dict) or model.get("output") != kind:
        output = model.get("output") if isinstance(model, dict) else None
        raise BadRecord(f"config.json trained the output layer {str(output)[:40]!r}, not {kind}, the row next here")
    summary = docs["summary.json"]
    if summary.get("stop_reason") not in ("early-stopping", "max-minutes", "max-epochs", "max-tokens"):
        raise BadRecord(f"summary.json's stop_reason is {str(summary.get('stop_reason'))[:40]!r}")
    _number(summary, "epochs", "summary.json", 1)
    _number(summary, "parameters", "summary.json", 1)
    _number(summary, "seconds", "summary.json")
    _number(summary, "best_valid_ppl", "summary.json", 1)
    for name in ("test.json", "test-open.json", "train.json"):
        _number(docs[name], "perplexity", name, 1)
    for name, columns in PARQUET_FILES.items():
        try:
            table = pq.read_table(returned / name)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise BadRecord(f"{name} is not a Parquet table ({str(exc).splitlines()[0][:80]})") from None
        lacking = [c for c in columns if c not in table.column_names]
        if lacking:
            raise BadRecord(f"{name} lacks the columns {', '.join(lacking)}")
    logp = pq.read_table(returned / "test.parquet", columns=["model_logp"])["model_logp"]
    if not pa.types.is_floating(logp.type) or logp.null_count:
        raise BadRecord("test.parquet's model_logp are not all numbers")
    values = logp.to_numpy(zero_copy_only=False)
    if not (values <= 0).all():
        raise BadRecord("test.parquet's model_logp are not all log-probabilities (<= 0)")


def keep(returned: Path, records: Path, dataset: str = "ptb") -> Path:
    kind = next_row(records, dataset)
    if kind is None:
        raise BadRecord(f"every row of {records} has converged; no row was next")
    check(returned, kind)
    final = records / f"{dataset}-{kind}"
    records.mkdir(parents=True, exist_ok=True)
    aside = Path(tempfile.mkdtemp(prefix=f".{final.name}.partial.", dir=records))
    try:
        for name in RECORD_FILES:
            shutil.copyfile(returned / name, aside / name, follow_symlinks=False)
            os.chmod(aside / name, 0o644)
        os.chmod(aside, 0o755)
        if final.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{final.name}.old.", dir=records))
            os.replace(final, old / final.name)
            os.replace(aside, final)
            shutil.rmtree(old)
        else:
            os.replace(aside, final)
    finally:
        if aside.exists():
            shutil.rmtree(aside)
    return final


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="recipes/lib/paper_rows.py", description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    sub = verbs.add_parser("next")
    sub.add_argument("--records", type=Path, required=True)
    sub = verbs.add_parser("keep")
    sub.add_argument("--returned", type=Path, required=True)
    sub.add_argument("--records", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.verb == "next":
        kind = next_row(args.records)
        if kind is not None:
            print(kind)
        return 0
    try:
        final = keep(args.returned, args.records)
    except BadRecord as exc:
        print(f"gpu-table2: keep refused {args.returned}: {exc}; nothing was changed", file=sys.stderr)
        return 2
    summary = json.loads((final / "summary.json").read_text())
    how = "converged" if summary["stop_reason"] == "early-stopping" else f"not converged ({summary['stop_reason']})"
    print(f"gpu-table2: kept {final}: {summary['epochs']} epochs, {how}, test perplexity "
          f"{json.loads((final / 'test.json').read_text())['perplexity']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
