"""A GPU window's runs (recipes/gpu-table2.sh): how each stands, and the few files `collect` brings
back from the machine (results, not state: no checkpoint leaves it).

    python recipes/lib/window.py status --state results/gpu-table2/paper-ptb
    python recipes/lib/window.py bundle --state results/gpu-table2/paper-ptb --out DIR
    python recipes/lib/window.py unpack --bundle DIR --out results/work/evals/gpu-window

The state directory holds, per output layer KIND that was started there: KIND.pid (its process,
while it lives), KIND.start (its start, Unix seconds), KIND.log (its stderr), KIND.rc (its exit
status, once it has one) and evals/KIND.test.json + .tokens.parquet (collect's evaluation);
start.json (the last start's settings) and window.lock, held by every process of the window while
one lives.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from report import OUTPUT_LAYERS

#: The output layers in Table 2's order (recipes/lib/output-layers.txt).
KINDS = OUTPUT_LAYERS
#: What collect may bring back: files, and bytes each (the lent machine's limits).
MAX_FILES, MAX_BYTES = 8, 16 * 2**20
#: Exit statuses of a run ended by SIGINT or SIGTERM (groc train's 130 and 143): resumable.
INTERRUPTED = (130, 143)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _json(path: Path) -> dict | None:
    text = _read(path)
    try:
        return json.loads(text) if text else None
    except json.JSONDecodeError:
        return None


def _alive(pid: int, kind: str) -> bool:
    """Whether ``pid`` is still this run's process (a reused pid runs another command line)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return stat[0] != "Z" and b"_run" in cmdline and kind.encode() in cmdline


def _last_line(log: Path, error: bool = False) -> str:
    """The log's last line (with ``error``, its last 'groc: error:' or traceback line, if any)."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    if error:
        for line in reversed(lines):
            if "error" in line.lower() or "Traceback" in line or "Killed" in line:
                return line
    return lines[-1] if lines else ""


def runs(state: Path) -> list[dict]:
    """Each started run of the window, in Table 2's order: kind, run directory, state (training,
    finished, stopped, died), detail, epochs done, best validation perplexity and its epoch,
    minutes, and the run's config.json, summary.json, metrics rows and evaluation when present."""
    start = _json(state / "start.json") or {}
    now = time.time()
    rows = []
    for kind in KINDS:
        pid_text = _read(state / f"{kind}.pid")
        run = Path(start.get("runs", {}).get(kind, ""))
        if pid_text is None or not start.get("runs", {}).get(kind):
            continue
        rc_text, start_text = _read(state / f"{kind}.rc"), _read(state / f"{kind}.start")
        rc_text = rc_text if rc_text and rc_text.isdigit() else None  # a half-written file: no status yet
        started = float(start_text) if start_text and start_text.isdigit() else now
        log = state / f"{kind}.log"
        summary, config = _json(run / "summary.json"), _json(run / "config.json")
        metrics = pq.read_table(run / "metrics.parquet").to_pylist() if (run / "metrics.parquet").is_file() else []
        valid = [(m["valid_ppl"], m["epoch"]) for m in metrics if m.get("valid_ppl") is not None]
        best = min(valid) if valid else (None, None)
        if rc_text is None and pid_text.isdigit() and _alive(int(pid_text), kind):
            status, detail = "training", _last_line(log)
            minutes = (now - started) / 60
        else:
            if rc_text is None:
                status, detail = "stopped", "killed: no exit status (the machine went back, or SIGKILL)"
            elif int(rc_text) == 0:
                status = "finished"
                detail = summary["stop_reason"] if summary else "no summary.json"
            elif int(rc_text) in INTERRUPTED:
                status, detail = "stopped", f"interrupted (exit {rc_text}); start again to resume"
            else:
                status, detail = "died", f"exit {rc_text}: {_last_line(log, error=True)}"
            ended = log.stat().st_mtime if log.exists() else now
            minutes = summary["seconds"] / 60 if summary else (ended - started) / 60
        evaluation = _json(state / "evals" / f"{kind}.test.json")
        rows.append({"kind": kind, "run": str(run), "state": status, "detail": detail, "epochs": len(metrics),
                     "best_valid_ppl": best[0], "best_epoch": best[1], "minutes": minutes, "config": config,
                     "summary": summary, "metrics": metrics, "evaluation": evaluation,
                     "has_checkpoint": (run / "best" / "model.safetensors").is_file()})
    return rows


def status(state: Path) -> None:
    """One line per run on stdout; the window's settings on stderr."""
    start = _json(state / "start.json")
    if start is None:
        print(f"gpu-table2: nothing was started in {state} (run start first)", file=sys.stderr)
        raise SystemExit(2)
    rows = runs(state)
    training = sum(r["state"] == "training" for r in rows)
    print(f"{start['scale']} {start['dataset']}, started {start['started']}, MINUTES={start['minutes']} on "
          f"{start['device']}: {training} of {len(rows)} runs training", file=sys.stderr)
    for r in rows:
        ppl = f"{r['best_valid_ppl']:.2f}" if r["best_valid_ppl"] is not None else "–"
        epoch = r["epochs"] + (r["state"] == "training")
        print(f"{r['kind']:<14} {r['state']:<9} epoch {epoch:>3}  best valid {ppl:>8}  {r['minutes']:6.1f} min  "
              f"{r['detail'][:100]}")


def environment(state: Path) -> dict:
    """What made the results: the GPU (nvidia-smi), torch with its CUDA and cuDNN, the packages, the
    CPU, groc's version and commit."""
    import torch  # here only: status and unpack never need it

    env: dict = {"python": platform.python_version(), "platform": platform.platform(),
                 "torch": torch.__version__, "torch_cuda": torch.version.cuda,
                 "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
                 "cuda_available": torch.cuda.is_available(),
                 "torch_devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]}
    env["gpus"], env["nvidia_smi"] = [], "not found"
    for query in ("name,driver_version,memory.total,compute_cap", "name,driver_version,memory.total"):
        try:  # drivers before 510 know no compute_cap
            out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            env["nvidia_smi"] = f"not run: {exc}"
            break
        env["nvidia_smi"] = (out.stdout if out.returncode == 0 else out.stderr or out.stdout).strip()[:300]
        if out.returncode == 0:
            env["gpus"] = [dict(zip(query.split(","), (v.strip() for v in line.split(","))))
                           for line in out.stdout.splitlines() if line.strip()]
            break
    for name in ("groc-cli", "numpy", "pyarrow", "faiss-cpu", "faiss-gpu-cu12", "safetensors", "nltk"):
        try:
            env[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    try:
        env["cpu"] = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        env["cpu"] = platform.processor()
    env["cpu_count"] = os.cpu_count()
    repo = Path(__file__).resolve().parents[2]
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True)
    env["commit"] = head.stdout.strip() if head.returncode == 0 else None  # a copied tree has no .git
    return env


def _per_token(state: Path, rows: list[dict]) -> pa.Table | None:
    """Every evaluated run's per-token records side by side: position, word, in_train, train_freq
    (the same for every run: one dataset, one training split), then each run's model_logp under its
    output layer's name, as float32 (7 digits): seven layers of WikiText-2's test set, one row per run
    and token in float64, would pass 16 MiB. Each run's provenance is kept in the metadata."""
    table, meta = None, {}
    for r in rows:
        path = state / "evals" / f"{r['kind']}.test.tokens.parquet"
        if r["evaluation"] is None or not path.is_file():
            continue
        t = pq.read_table(path)
        meta[r["kind"]] = json.loads(t.schema.metadata[b"groc"])
        if not t["model_logp"].equals(t["final_logp"]):
            raise SystemExit(f"gpu-table2: {path}: final_logp differs from model_logp (a cache?); collect evaluates "
                             "without one")
        shared = t.select(["position", "word", "in_train", "train_freq"]).replace_schema_metadata(None)
        if table is None:
            table = shared
        elif not table.select(shared.column_names).equals(shared):
            raise SystemExit(f"gpu-table2: {path} scores other tokens than {next(iter(meta))}'s evaluation")
        table = table.append_column(r["kind"], t["model_logp"].cast(pa.float32()))
    if table is None:
        return None
    return table.replace_schema_metadata({b"groc": json.dumps({"stage": "gpu-table2 collect", "evaluations": meta})})


def bundle(state: Path, out: Path) -> None:
    """Into ``out`` (beside the table): metrics.parquet, per-token.parquet, runs.json and
    environment.json, and a copy of the recipe's commands.log."""
    rows = runs(state)
    metrics = [pa.Table.from_pylist(r["metrics"]).add_column(0, "output", pa.array([r["kind"]] * len(r["metrics"])))
               for r in rows if r["metrics"]]
    if metrics:
        pq.write_table(pa.concat_tables(metrics, promote_options="default"), out / "metrics.parquet", compression="zstd")
    tokens = _per_token(state, rows)
    if tokens is not None:
        pq.write_table(tokens, out / "per-token.parquet", compression="zstd")
    start = _json(state / "start.json")
    record = {"window": start, "collected": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "runs": {r["kind"]: {k: r[k] for k in ("run", "state", "detail", "epochs", "best_valid_ppl", "best_epoch",
                                                     "minutes", "config", "summary", "evaluation")}
                       | {"log_tail": _tail(state / f"{r['kind']}.log", 40)} for r in rows}}
    (out / "runs.json").write_text(json.dumps(record, indent=1) + "\n")
    (out / "environment.json").write_text(json.dumps(environment(state), indent=1) + "\n")
    log = Path(start["log"])
    if log.is_file():
        (out / "commands.log").write_bytes(log.read_bytes()[-MAX_BYTES // 2:])


def _tail(path: Path, lines: int) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


#: The datasets a window trains (gpu-table2.sh's DATASET): the only names unpack writes files for.
DATASETS = ("ptb", "wt2")


class BadBundle(Exception):
    """A bundle that came back other than collect writes it: one line, and nothing written."""


def _bundle_file(bundle_dir: Path, name: str) -> Path:
    path = bundle_dir / name
    if path.is_symlink() or not path.is_file():
        raise BadBundle(f"{path} is not a regular file")
    return path


def read_bundle(bundle_dir: Path) -> tuple[str, dict[str, pa.Table], dict]:
    """The dataset, each output layer's per-token table (as groc eval wrote it) and runs.json of a bundle that came
    back from another machine, every name and value checked before anything is written (GUIDE 18)."""
    try:
        record = json.loads(_bundle_file(bundle_dir, "runs.json").read_text())
        dataset = record["window"]["dataset"]
        evaluations = record["runs"]
    except BadBundle:
        raise
    except (OSError, ValueError, RecursionError, KeyError, TypeError) as exc:
        raise BadBundle(f"{bundle_dir / 'runs.json'} is not a collect record ({type(exc).__name__})") from None
    if dataset not in DATASETS:
        raise BadBundle(f"runs.json names the dataset {str(dataset)[:40]!r}, not one of {', '.join(DATASETS)}")
    try:
        table = pq.read_table(_bundle_file(bundle_dir, "per-token.parquet"))
        meta = json.loads(table.schema.metadata[b"groc"])["evaluations"]
        shared = table.select(["position", "word", "in_train", "train_freq"])
    except BadBundle:
        raise
    except (OSError, ValueError, RecursionError, KeyError, TypeError, pa.ArrowException) as exc:
        raise BadBundle(f"{bundle_dir / 'per-token.parquet'} is not collect's per-token table "
                        f"({str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__})") from None
    if not isinstance(meta, dict):
        raise BadBundle(f"{bundle_dir / 'per-token.parquet'} does not list its evaluations")
    tables = {}
    for kind, provenance in meta.items():
        if kind not in KINDS:
            raise BadBundle(f"per-token.parquet names the output layer {str(kind)[:40]!r}, not one of {', '.join(KINDS)}")
        if kind not in table.column_names or not pa.types.is_floating(table.schema.field(kind).type):
            raise BadBundle(f"per-token.parquet has no float column of log-probabilities for {kind}")
        if not isinstance(evaluations, dict) or not isinstance(evaluations.get(kind), dict):
            raise BadBundle(f"runs.json has no record of the {kind} run")
        logp = table[kind].cast(pa.float64())
        values = logp.to_numpy(zero_copy_only=False)
        if logp.null_count or not (values <= 0).all():  # NaN fails too
            raise BadBundle(f"per-token.parquet's {kind} log-probabilities are not all finite-or-minus-infinity and <= 0")
        t = shared.append_column("model_logp", logp).append_column("final_logp", logp)
        tables[kind] = t.replace_schema_metadata({b"groc": json.dumps(provenance, sort_keys=True).encode()})
    return dataset, tables, evaluations


def unpack(bundle_dir: Path, out: Path) -> None:
    """Each run's per-token file and evaluation back from a collected bundle, as groc eval wrote them
    (provenance included, log-probabilities as float64 from the bundle's float32), named
    <dataset>-<output>.test.tokens.parquet and .test.json: `groc compare` takes them (Figure 3). The
    bundle is read and checked whole first, the files are written in a folder aside and moved into
    ``out`` only once all are written; names come from the known datasets and output layers only."""
    dataset, tables, evaluations = read_bundle(bundle_dir)
    out.mkdir(parents=True, exist_ok=True)
    aside = Path(tempfile.mkdtemp(prefix=".unpack.", dir=out))
    try:
        names = []
        for kind, t in tables.items():
            pq.write_table(t, aside / f"{dataset}-{kind}.test.tokens.parquet", compression="zstd")
            (aside / f"{dataset}-{kind}.test.json").write_text(json.dumps(evaluations[kind].get("evaluation"),
                                                                          indent=1) + "\n")
            names += [f"{dataset}-{kind}.test.tokens.parquet", f"{dataset}-{kind}.test.json"]
        for name in names:
            os.replace(aside / name, out / name)
            if name.endswith(".parquet"):
                print(out / name)
    finally:
        shutil.rmtree(aside, ignore_errors=True)


def check_bundle(out: Path) -> None:
    """At most MAX_FILES files of at most MAX_BYTES each, or exit status 1 naming the excess."""
    files = sorted(p for p in out.iterdir())
    big = [f"{p.name} ({p.stat().st_size / 2**20:.1f} MiB)" for p in files if p.stat().st_size > MAX_BYTES]
    if len(files) > MAX_FILES or big:
        raise SystemExit(f"gpu-table2: collect made {len(files)} files (at most {MAX_FILES})"
                         + (f"; over 16 MiB: {', '.join(big)}" if big else ""))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="recipes/lib/window.py", description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    for verb in ("status", "bundle"):
        sub = verbs.add_parser(verb)
        sub.add_argument("--state", type=Path, required=True)
        if verb == "bundle":
            sub.add_argument("--out", type=Path, required=True)
    sub = verbs.add_parser("unpack")
    sub.add_argument("--bundle", type=Path, required=True)
    sub.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.verb == "status":
        status(args.state)
    elif args.verb == "bundle":
        bundle(args.state, args.out)
        check_bundle(args.out)
    else:
        try:
            unpack(args.bundle, args.out)
        except BadBundle as exc:
            print(f"gpu-table2: unpack refused: {exc}; nothing was written", file=sys.stderr)
            sys.exit(2)


if __name__ == "__main__":
    main()
