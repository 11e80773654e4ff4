"""A table of run directories (``groc runs``): one row per run found, from what runs already write.

A run directory is one holding ``config.json`` whose "format" is ``formats.RUN_FORMAT`` (``run_storage.py``);
its row reads ``config.json`` (kind, dataset, stage, versions), ``summary.json`` (written when
training ends: epochs, stopping reason, best validation perplexity, seconds) and, for a run
without one (training, or interrupted: ``resume`` continues it), ``metrics.parquet`` and the last row of
``steps.parquet`` (minutes trained so far). A run whose output lock (``.NAME.lock`` beside it, which
``train`` and ``finetune`` hold while they write it) names a live process is "running (pid N)"; its row only
reads files, so it never blocks that process. Its evaluations are those ``groc eval`` keeps inside it
(``evals/``, ``record_evaluation``), and ``groc eval`` JSON files found under the same directories whose
``run`` is that run as it is now (a relative run path is tried from the working directory and from the
directories above the JSON, ``_run_of``); each counts only while the checkpoint it scored still has the
JSON's model checksum. Each is listed with its dataset and split (``evals``); the test perplexity is a
test split's without a cache, on the run's own dataset first (closed vocabulary preferred), with its
dataset. A record (``is_record``: a finished run kept without its checkpoints, its evaluations inside
it) is a row with status "record" and the test perplexity of its own evaluation. Symbolic links below
the directories given are not followed. A directory that holds a
``config.json`` that cannot be read is a row whose status says why, not an error.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Iterable

from .formats import RUN_FORMAT
from .errors import GrocError
from .json_input import parse_json

COLUMNS = ("run", "status", "kind", "stage", "parameters", "dataset", "epochs", "stop_reason", "best_valid_ppl",
           "test_ppl", "test_dataset", "test_vocab", "minutes", "groc_version", "evals")  # evals, the widest, last
#: Where ``groc eval`` records each evaluation of a run, inside the run (``record_evaluation``).
EVALS_DIR = "evals"
#: Directories not searched (hidden ones too: a --force replacement trains in .NAME.incomplete-*).
SKIP = {"__pycache__", "node_modules", "best", "last", "states", "cache"}
#: Eval JSON files read at most this large (a grid's JSON is far smaller; anything bigger is not one).
MAX_EVAL_BYTES = 1 << 20


def find(roots: Iterable[Path]) -> tuple[list[Path], list[Path]]:
    """(run directories, JSON files other than the runs' own) under ``roots``, sorted; a root
    that does not exist is a GrocError naming it."""
    runs, jsons, seen = set(), set(), set()
    for root in roots:
        root = Path(root)
        if not root.exists():
            raise GrocError(f"{root}: no such directory")
        if not root.is_dir():  # a file, or a device such as /dev/null
            raise GrocError(f"{root} is not a directory; give directories that hold run directories (or runs themselves)")
        # Symbolic links below the root are not followed, to directories or to files: what is listed lies
        # inside the directories given (a link to a run elsewhere is not that run; give its directory).
        for here, dirs, files in os.walk(root, followlinks=False):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP)
            here = Path(here)
            real = here.resolve()  # a root given twice, or a root inside another, shows each run once
            if real in seen:
                dirs[:] = []
                continue
            seen.add(real)
            files = [f for f in files if not (here / f).is_symlink()]
            if "config.json" in files and _claims_run(here / "config.json"):
                runs.add(here)
                dirs[:] = []  # a run holds no other runs
                # its own evaluations (a record keeps them beside its summary; groc eval records each one under
                # evals/; _evals checks whose they are)
                jsons.update(here / f for f in files if f.endswith(".json") and f not in ("config.json", "summary.json"))
                recorded = here / EVALS_DIR
                if recorded.is_dir() and not recorded.is_symlink():
                    jsons.update(f for f in recorded.iterdir() if f.suffix == ".json" and not f.is_symlink())
                continue
            jsons.update(here / f for f in files if f.endswith(".json"))
    return sorted(runs), sorted(jsons)


def _claims_run(path: Path) -> bool:
    """config.json of a run, or one too damaged to tell (then it is a row saying so)."""
    try:
        data = parse_json(path.read_bytes())
    except (OSError, ValueError):
        return True
    return not isinstance(data, dict) or data.get("format") == RUN_FORMAT or "model" in data


def _load(path: Path) -> dict | None:
    try:
        data = parse_json(path.read_bytes())
    except (OSError, ValueError):  # parse_json's ValueError: also absurd nesting, a huge integer
        return None
    return data if isinstance(data, dict) else None


def _metrics(run: Path) -> tuple[int | None, float | None]:
    """(epochs, best validation perplexity) from metrics.parquet, for a run without summary.json."""
    path = run / "metrics.parquet"
    if not path.is_file():
        return None, None
    try:
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
    except Exception:  # damaged: the row says unfinished, the numbers stay empty
        return None, None
    valid = [r.get("valid_ppl") for r in rows if isinstance(r.get("valid_ppl"), (int, float))]
    return len(rows), (min(valid) if valid else None)


def _minutes_so_far(run: Path) -> float | None:
    """Training minutes up to the last logged step (steps.parquet's cumulative seconds), or None."""
    path = run / "steps.parquet"
    if not path.is_file():
        return None
    try:
        import pyarrow.parquet as pq

        seconds = pq.read_table(path, columns=["seconds"]).column("seconds").to_pylist()
    except Exception:  # damaged or still being replaced: no figure rather than a wrong one
        return None
    last = seconds[-1] if seconds else None
    return round(last / 60, 1) if isinstance(last, (int, float)) and math.isfinite(last) else None


def _run_of(path: Path, data: dict, settings: dict, known: set[str], hashes: dict[Path, str | None]) -> str | None:
    """The run (a resolved path in ``known``) whose model the eval JSON at ``path`` (``data``, its
    ``settings``) scored, or None.

    ``groc eval`` records the run path as it was given, so a relative one is relative to the directory the
    evaluation ran from, which the JSON does not record: it is tried against the working directory, then
    against the JSON's own directory and each one above it (a recipe run from the directory holding
    ``results/`` writes ``results/work/evals/X.json`` naming ``results/work/runs/X``). A candidate counts
    only while the checkpoint the JSON scored (``settings.checkpoint``, best by default) still has the
    JSON's model_checksum: an evaluation of a model since trained further (resumed with a larger
    budget) is not that run's test perplexity. ``hashes`` caches each weights file's SHA-256."""
    named = Path(str(data["run"]))
    here = path.resolve().parent
    candidates = [named] if named.is_absolute() else [Path.cwd() / named, *(d / named for d in (here, *here.parents))]
    for candidate in candidates:
        try:
            key = str(candidate.resolve())
        except (OSError, ValueError):  # a crafted path (a NUL byte, a symlink loop) names no run
            continue
        if key in known and _checked(key, data, settings, hashes) is not None:
            return key
    return None


def _evals(jsons: list[Path], known: set[str]) -> dict[str, dict]:
    """Resolved run path (one of ``known``) -> {"test": (preference, test perplexity, vocabulary, dataset) of the
    eval JSON that gives its test perplexity, or None; "all": every evaluation of it found, once each, as
    {dataset, split, vocab, cache, perplexity}}. The test perplexity is a test split's without a cache,
    the run's own dataset's first (its checksum), then the closed vocabulary's."""
    found: dict[str, dict] = {}
    hashes: dict[Path, str | None] = {}
    seen: set[tuple] = set()
    for path in jsons:
        try:
            if path.stat().st_size > MAX_EVAL_BYTES:
                continue
        except OSError:
            continue
        data = _load(path)
        if not data or "run" not in data or not isinstance(data.get("perplexity"), (int, float)):
            continue
        settings = data.get("settings") if isinstance(data.get("settings"), dict) else {}
        if settings.get("grid"):
            continue
        # A record's own evaluation is the record's (no weights are left to check it against; the run it
        # names, if also listed, has its own copy under evals/); one that groc eval recorded inside a run
        # (evals/) is that run's while its checksum holds; any other is the run it scored.
        own = str(path.parent.resolve())
        inside = str(path.parent.parent.resolve()) if path.parent.name == EVALS_DIR else None
        if own in known and is_record(path.parent):
            key = own
        elif inside in known:
            key = inside if is_record(Path(inside)) else _checked(inside, data, settings, hashes)
        else:
            key = _run_of(path, data, settings, known, hashes)
        if key is None:
            continue
        entry = found.setdefault(key, {"test": None, "all": []})
        dataset = Path(str(data.get("dataset"))).name if data.get("dataset") else None
        vocab, cache = str(settings.get("vocab", "model")), str(settings.get("cache", "none"))
        split = settings.get("split")
        same = (key, data.get("dataset_checksum") or dataset, split, vocab, cache,
                json.dumps(settings, sort_keys=True, default=str), float(data["perplexity"]))
        if same not in seen:
            seen.add(same)
            entry["all"].append({"dataset": dataset, "split": split, "vocab": vocab, "cache": cache,
                                 "perplexity": float(data["perplexity"])})
        if split != "test" or cache != "none":
            continue
        rank = (0 if data.get("dataset_checksum") == _trained_on(key) else 1, 0 if vocab == "model" else 1)
        if entry["test"] is None or rank < entry["test"][0]:
            entry["test"] = (rank, float(data["perplexity"]), vocab, dataset)
    for entry in found.values():
        entry["all"].sort(key=lambda e: (str(e["dataset"]), str(e["split"]), e["vocab"], e["cache"], e["perplexity"]))
    return found


def _trained_on(run: str) -> str | None:
    """The checksum of the dataset a run was trained on (its config.json), or None."""
    config = _load(Path(run) / "config.json") or {}
    dataset = config.get("dataset") if isinstance(config.get("dataset"), dict) else {}
    return dataset.get("checksum") if isinstance(dataset.get("checksum"), str) else None


def _checked(run: str, data: dict, settings: dict, hashes: dict[Path, str | None]) -> str | None:
    """``run`` if the checkpoint the eval JSON ``data`` scored still has its model checksum (or it records none)."""
    checksum = data.get("model_checksum")
    if not isinstance(checksum, str):
        return run
    which = settings.get("checkpoint") if settings.get("checkpoint") in ("best", "last") else "best"
    weights = Path(run) / which / "model.safetensors"
    if weights not in hashes:
        from .artifacts.integrity import sha256_file

        try:
            hashes[weights] = sha256_file(weights)
        except OSError:
            hashes[weights] = None
    return run if hashes[weights] == checksum else None


def record_evaluation(result: dict, run_dir: Path) -> Path:
    """Keep an evaluation's record (``groc eval``'s JSON) inside the run it scored, under evals/, so that
    ``groc runs`` finds it from the run alone: named by split, dataset and a digest of what it measured
    (dataset and model checksums, settings), so evaluating the same again replaces it. Returns the path;
    OSError where the run cannot be written (a read-only copy)."""
    import hashlib

    from .artifacts.io import write_json
    from .console import strict_json

    settings = result.get("settings") or {}
    key = strict_json({"dataset": result.get("dataset_checksum"), "model": result.get("model_checksum"),
                       "settings": settings}, sort_keys=True)
    dataset = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(str(result.get("dataset"))).name)[:60]
    name = f"{settings.get('split', 'split')}-{dataset or 'dataset'}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"
    folder = Path(run_dir) / EVALS_DIR
    folder.mkdir(exist_ok=True)
    path = folder / name
    write_json(result, path)
    return path


def is_record(run: Path) -> bool:
    """A finished run kept without its checkpoints (summary.json, and neither best/ nor last/), as
    ``recipes/table2-cpu.sh`` keeps each row under docs/records: its numbers stand, but it cannot be
    evaluated or resumed again."""
    return (run / "summary.json").is_file() and not (run / "best").exists() and not (run / "last").exists()


def row(run: Path, evals: dict[str, dict]) -> dict:
    """One run's row (COLUMNS); ``status``: done, record (done, kept without its checkpoints), running (pid N),
    unfinished or damaged (with why)."""
    out = {c: None for c in COLUMNS}
    out["run"] = str(run)
    config = _load(run / "config.json")
    if config is None or not isinstance(config.get("model"), dict):
        out["status"] = "damaged: config.json unreadable" if config is None else "damaged: config.json has no model"
        return out
    model, dataset = config["model"], config.get("dataset") if isinstance(config.get("dataset"), dict) else {}
    out.update(kind=model.get("output"), stage=config.get("stage"), parameters=config.get("parameters"),
               dataset=Path(str(dataset.get("path"))).name if dataset.get("path") else None,
               groc_version=config.get("groc_version"))
    summary = _load(run / "summary.json")
    if summary is not None:
        out.update(status="done", epochs=summary.get("epochs"), stop_reason=summary.get("stop_reason"),
                   best_valid_ppl=summary.get("best_valid_ppl"),
                   minutes=round(summary["seconds"] / 60, 1) if isinstance(summary.get("seconds"), (int, float)) else None)
    else:
        damaged = (run / "summary.json").exists()
        out["epochs"], out["best_valid_ppl"] = _metrics(run)
        out["minutes"] = _minutes_so_far(run)
        from .artifacts.locks import lock_holder  # here, as pyarrow is: numpy and pyarrow only for a run not done

        writer = None if damaged else lock_holder(run)
        out["status"] = ("damaged: summary.json unreadable" if damaged else
                         f"running (pid {writer})" if writer is not None else
                         "unfinished" if (run / "last").is_dir() else "unfinished: no checkpoint")
    if out["status"] == "done" and is_record(run):
        out["status"] = "record"
    elif not (run / "best" / "model.safetensors").is_file() and out["status"] == "done":
        out["status"] = "damaged: best/model.safetensors missing"
    found = evals.get(str(run.resolve()))
    if found is not None:
        if found["test"] is not None:
            out["test_ppl"], out["test_vocab"], out["test_dataset"] = found["test"][1], found["test"][2], found["test"][3]
        out["evals"] = found["all"] or None
    return out


def table(roots: Iterable[Path], sort: str | None = None) -> list[dict]:
    """The rows of every run under ``roots``, sorted by ``sort`` (a column; numbers ascending, empty
    cells last), else by path. SettingError-style GrocError for an unknown column."""
    if sort is not None and sort not in COLUMNS:
        raise GrocError(f"sort {sort!r}: expected one of {', '.join(COLUMNS)}")
    runs, jsons = find(roots)
    evals = _evals(jsons, {str(r.resolve()) for r in runs})
    rows = [row(r, evals) for r in runs]
    if sort is not None:
        def key(r):
            v = r[sort]
            if v is None or (isinstance(v, float) and math.isnan(v)):
                return (2, 0, "")
            return (0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v))
        rows.sort(key=key)
    return rows


def evals_text(evals: list[dict] | None) -> str | None:
    """A row's evaluations in one cell: "dataset/split ppl" each (with the vocabulary and cache where not
    the closed one without a cache), separated by "; "."""
    if not evals:
        return None
    parts = []
    for e in evals:
        extra = "".join(f" {x}" for x in ((e["vocab"] if e["vocab"] != "model" else None),
                                            (f"+{e['cache']}" if e["cache"] != "none" else None)) if x)
        parts.append(f"{e['dataset']}/{e['split']}{extra} {_cell(e['perplexity'])}")
    return "; ".join(parts)


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return evals_text(value) or "-"
    if isinstance(value, float):
        return f"{value:,.2f}" if math.isfinite(value) else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def aligned(rows: list[dict]) -> str:
    """The rows as an aligned text table (numbers right-aligned), one line a run."""
    cells = [[_cell(r[c]) for c in COLUMNS] for r in rows]
    widths = [max([len(c)] + [len(line[i]) for line in cells]) for i, c in enumerate(COLUMNS)]
    numeric = [all(isinstance(r[c], (int, float)) or r[c] is None for r in rows) and c != "run" for c in COLUMNS]
    def fmt(line):
        return "  ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in zip(line, widths, numeric)).rstrip()
    return "\n".join([fmt(list(COLUMNS))] + [fmt(line) for line in cells])
