"""The reproduction report's tables and figures, built from the committed records alone (GUIDE 17).

    python recipes/lib/build_report.py              # rewrite the built blocks of docs/*.md and docs/figures/
    python recipes/lib/build_report.py --check      # exit 1, naming the first block or figure that drifted

A built block in a Markdown file of docs/ is the text between ``<!-- built:NAME -->`` and ``<!-- /built -->``:
the builder replaces it with BLOCKS[NAME](records), so the text around a table can be edited by hand while
the table can only come from the records. Figures are PNG files in docs/figures/, each drawn from the records
too; docs/figures/figures.json records, per figure, the SHA-256 of the data it shows and of the PNG with the
matplotlib version that drew it, so --check finds a figure whose data changed on any machine, and a changed
drawing where the matplotlib version is the same. Every number comes from a file under docs/records/: the
runs' summary.json, config.json and metrics.parquet, their evaluations (JSON) and per-token tables, and the
benchmarks' JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "recipes" / "lib"))

from report import recipe  # noqa: E402

PAPER_TABLE2 = recipe("table2").PAPER_TABLE2
BLOCK = re.compile(r"(<!-- built:([a-z0-9-]+) -->\n)(.*?)(<!-- /built -->)", re.S)

#: Table 2 on CPU: the rows in the recipe's order, and what each A/B row changes.
CPU_ROWS = ("tied", "tied-hidden", "lookup", "adaptive", "bilinear", "deep-residual", "convolutional", "groc",
            "groc-hidden", "groc-free-bias")
CPU_LABELS = {"tied-hidden": "tied, no input dropout (A/B)", "groc-hidden": "groc, no input dropout (A/B)",
              "groc-free-bias": "groc, free per-word bias (A/B)"}
TABLE_MODELS = ("tied", "lookup", "adaptive", "bilinear", "deep-residual", "convolutional")
CONVERGE_LABELS = {"tied": "tied", "tied-awd": "tied, the authors' prefix dropouts (A/B)",
                   "groc": "GroC (256-filter encoder, composed bias)",
                   "groc-uniform": "GroC, B.1's uniform init (A/B)", "groc-add": "GroC, forms added (A/B)",
                   "groc-sparse": "GroC, sparse updates, p = 0.3 (A/B)",
                   "groc-free-bias": "GroC, free per-word bias", "groc-paper-encoder": "GroC, paper-size encoder",
                   "groc-paper-encoder-free-bias": "GroC, paper-size encoder and free bias"}
#: The bias and encoder comparison (issue 89): the models of the frequency bins and the validation figure.
CONVERGE_SHORT = {"groc": "GroC", "groc-free-bias": "free bias", "groc-paper-encoder": "paper-size encoder",
                  "groc-paper-encoder-free-bias": "paper-size encoder, free bias"}
AMP_LABELS = {"groc": "GroC, float32", "groc-amp": "GroC, bfloat16 autocast (`--amp`)"}
BINS = (0, 1, 50, 100, 500, 1000, 5000)


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def _benchmark(records: Path, name: str) -> dict | None:
    """docs/records/benchmarks/NAME, None where there is no such record."""
    path = records / "benchmarks" / name
    return _json(path) if path.is_file() else None


def _no_record(name: str) -> str:
    return f"No record yet (`docs/records/benchmarks/{name}`).\n"


def _fmt(value, spec: str = ".2f") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return format(value, spec)


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _machine(config: dict) -> str:
    env = config.get("environment", {})
    if env.get("gpu"):
        return str(env["gpu"])
    threads = env.get("threads", "?")
    return f"{env.get('cpu', 'CPU')} ({_vector(env.get('cpu_flags'))}), {threads} thread{'' if threads == 1 else 's'}"


def _vector(flags) -> str:
    """The widest vector extensions among a record's CPU flags: 'AVX-512, AMX', 'AVX2', ..."""
    flags = flags or []
    vec = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "x86-64"
    return vec + (", AMX" if "amx_tile" in flags else "")


def _rows(records: Path, prefix: str, order) -> list[tuple[str, Path]]:
    return [(k, records / f"{prefix}{k}") for k in order if (records / f"{prefix}{k}" / "summary.json").is_file()]


# -- Table 2 on CPU ---------------------------------------------------------------------------------------------
def table2_cpu(records: Path) -> str:
    rows = []
    for kind, d in _rows(records / "table2-cpu", "ptb-", CPU_ROWS):
        s, config = _json(d / "summary.json"), _json(d / "config.json")
        paper = PAPER_TABLE2.get(kind.split("-hidden")[0].split("-free-bias")[0])
        rows.append([CPU_LABELS.get(kind, kind), f"{s['parameters'] / 1e6:.2f}M", str(s["epochs"]), s["stop_reason"],
                     f"{s['seconds'] / 60:,.0f}", _fmt(_json(d / "train.json")["perplexity"]),
                     _fmt(s["best_valid_ppl"]), f"**{_json(d / 'test.json')['perplexity']:.2f}**",
                     _fmt(_json(d / "test-open.json")["perplexity"]), _machine(config),
                     _fmt(paper[0][1], ".1f") if paper else "–"])
    return _table(["row", "params", "epochs", "stopped", "minutes", "train ppl (no dropout)", "valid ppl",
                   "test ppl", "test ppl, open vocabulary", "machine", "paper's test ppl (2 × 1024)"], rows)


def _per_token(path: Path):
    t = pq.read_table(path, columns=["word", "train_freq", "model_logp"])
    return (np.asarray(t["word"].to_pylist(), dtype=object), t["train_freq"].to_numpy(),
            t["model_logp"].to_numpy().astype(np.float64))


def _best_table_model(records: Path) -> str:
    tests = {k: _json(d / "test.json")["perplexity"] for k, d in _rows(records / "table2-cpu", "ptb-", TABLE_MODELS)}
    return min(tests, key=tests.get)


def _bins(freq: np.ndarray) -> list[tuple[str, np.ndarray]]:
    out = []
    for lo, hi in zip(BINS, BINS[1:] + (None,)):
        mask = (freq >= lo) & (freq < hi) if hi is not None else freq >= lo
        label = f"{lo}" if hi == lo + 1 else f"{lo}–{hi - 1}" if hi is not None else f"≥{lo}"
        out.append((label, mask))
    return out


def figure3_data(records: Path) -> dict:
    base = records / "table2-cpu"
    words, freq, groc = _per_token(base / "ptb-groc" / "test.parquet")
    best = _best_table_model(records)
    others = {k: _per_token(base / f"ptb-{k}" / "test.parquet")[2] for k in dict.fromkeys(("tied", best))}
    bins = []
    for label, mask in _bins(freq):
        n = int(mask.sum())
        row = {"bin": label, "tokens": n, "groc_ppl": float(np.exp(-groc[mask].mean())) if n else None}
        for k, logp in others.items():
            row[f"{k}_ppl"] = float(np.exp(-logp[mask].mean())) if n else None
            row[f"median_vs_{k}"] = float(np.median(logp[mask] - groc[mask])) if n else None  # groc's loss minus k's
        bins.append(row)
    return {"best": best, "bins": bins}


def figure3_cpu(records: Path) -> str:
    data = figure3_data(records)
    best = data["best"]
    rows = [[b["bin"], f"{b['tokens']:,}", _fmt(b["tied_ppl"], ",.1f"), _fmt(b[f"{best}_ppl"], ",.1f"),
             _fmt(b["groc_ppl"], ",.1f"), _fmt(b["median_vs_tied"], "+.3f"), _fmt(b[f"median_vs_{best}"], "+.3f")]
            for b in data["bins"] if b["tokens"]]
    return _table(["training frequency", "test tokens", "tied ppl", f"{best} ppl", "GroC ppl",
                   "GroC − tied, median Δ loss (nats)", f"GroC − {best}, median Δ loss (nats)"], rows)


def ranks_cpu(records: Path) -> str:
    """Perplexity of tied and GroC (and the A/B rows that have records) by the word's training-frequency rank, and
    `<unk>`: where GroC's deficit lies."""
    base = records / "table2-cpu"
    words, freq, tied = _per_token(base / "ptb-tied" / "test.parquet")
    vocab = pq.read_table(base / "ptb-tied" / "test.parquet", columns=["word", "train_freq"]).to_pylist()
    ranking = sorted({(r["word"], r["train_freq"]) for r in vocab if r["word"] != "<unk>"}, key=lambda x: (-x[1], x[0]))
    rank = {w: i + 1 for i, (w, _) in enumerate(ranking)}
    ranks = np.asarray([rank.get(w, 0) for w in words])
    unk = words == "<unk>"
    groups = [("`<unk>`", unk), ("ranks 1–100", (ranks >= 1) & (ranks <= 100)),
              ("ranks 101–3,000", (ranks > 100) & (ranks <= 3000)), ("ranks above 3,000", ranks > 3000),
              ("every token", np.ones_like(unk))]
    models = [k for k in ("tied", "groc", "groc-free-bias") if (base / f"ptb-{k}" / "test.parquet").is_file()]
    logps = {"tied": tied, **{k: _per_token(base / f"ptb-{k}" / "test.parquet")[2] for k in models if k != "tied"}}
    rows = []
    for label, mask in groups:
        cells = [label, f"{int(mask.sum()):,}"]
        cells += [_fmt(float(np.exp(-logps[k][mask].mean())), ",.2f") for k in models]
        cells += [_fmt(float(np.exp((logps[k][mask] - tied[mask]).mean())), ".3f") for k in models if k != "tied"]
        rows.append(cells)
    over = [f"{CONVERGE_SHORT[k]}'s probability over tied's (geometric mean)" for k in models if k != "tied"]
    return _table(["test tokens", "count", *[f"{k} ppl" for k in models], *over], rows)


# -- converged on Emma --------------------------------------------------------------------------------------------
def converge(records: Path) -> str:
    return _converged(records / "converge", CONVERGE_LABELS)


def converge_amp(records: Path) -> str:
    """GroC on Emma in float32 and under bfloat16 autocast, side by side on one machine."""
    return _converged(records / "converge-amp", AMP_LABELS)


def _converged(base: Path, labels: dict) -> str:
    rows = []
    for model, d in _rows(base, "", labels):
        s = _json(d / "summary.json")
        ev = {k: _json(d / f"{k}.json")["perplexity"] for k in ("emma-train", "emma-closed", "emma-open", "near-open",
                                                                "far-open")}
        rows.append([labels[model], f"{s['parameters']:,}", str(s["epochs"]), s["stop_reason"],
                     f"{s['seconds'] / 60:,.0f}", _fmt(ev["emma-train"]), _fmt(s["best_valid_ppl"]),
                     f"**{ev['emma-closed']:.2f}**", _fmt(ev["emma-open"]), _fmt(ev["near-open"]), _fmt(ev["far-open"]),
                     _machine(_json(d / "config.json"))])
    if not rows:
        return f"No model has a record yet (`docs/records/{base.name}/`).\n"
    return _table(["model", "params", "epochs", "stopped", "minutes", "train ppl (no dropout)", "valid ppl",
                   "test ppl", "test, open vocabulary", "Persuasion, open", "Thursday, open", "machine"], rows)


def converge_bins(records: Path) -> str:
    """Each converged GroC's median loss against tied on Emma's test tokens, by the word's training frequency."""
    base = records / "converge"
    if not (base / "tied" / "emma-closed.parquet").is_file():
        return "No tied record yet (`docs/records/converge/tied/`).\n"
    words, freq, tied = _per_token(base / "tied" / "emma-closed.parquet")
    models = {}
    for model, d in _rows(base, "", CONVERGE_SHORT):
        other, _, logp = _per_token(d / "emma-closed.parquet")
        if not np.array_equal(other, words):
            raise SystemExit(f"build_report: {d}/emma-closed.parquet scores other tokens than tied's")
        models[model] = logp
    rows = [[label, f"{int(mask.sum()):,}", _fmt(float(np.exp(-tied[mask].mean())), ",.1f"),
             *[_fmt(float(np.median(tied[mask] - logp[mask])), "+.3f") for logp in models.values()]]
            for label, mask in _bins(freq) if mask.any()]
    return _table(["training frequency", "test tokens", "tied ppl",
                   *[f"{CONVERGE_SHORT[m]}: median Δ loss (nats)" for m in models]], rows)


# -- Table 2 at the paper's scale -------------------------------------------------------------------------------
def table2_paper(records: Path) -> str:
    from paper_rows import ORDER

    rows = []
    for kind, d in _rows(records / "table2-paper", "ptb-", ORDER):
        s, config = _json(d / "summary.json"), _json(d / "config.json")
        rows.append([kind, f"{s['parameters'] / 1e6:.2f}M", str(s["epochs"]), s["stop_reason"],
                     f"{s['seconds'] / 60:.1f}", _fmt(s["best_valid_ppl"]), f"**{_json(d / 'test.json')['perplexity']:.2f}**",
                     _fmt(_json(d / "test-open.json")["perplexity"]), _machine(config),
                     f"{PAPER_TABLE2[kind][0][0]}M", _fmt(PAPER_TABLE2[kind][0][1], ".1f")])
    if not rows:
        return ("No row has a record yet: each waits for a GPU slot (`docs/records/table2-paper/` is empty).\n")
    return _table(["row", "params", "epochs", "stopped", "minutes", "valid ppl", "test ppl", "test, open vocabulary",
                   "machine", "paper's params", "paper's test ppl"], rows)


def gpu_window(records: Path) -> str:
    d = records / "gpu-table2-h200"
    rows = [[r["output"], f"{r['params_M']:.2f}M", str(r["epochs"]), f"{r['minutes']:.1f}", _fmt(r["valid_ppl"]),
             _fmt(r["test_ppl"]), _fmt(r["paper_test_ppl"], ".1f")]
            for r in pq.read_table(d / "table2.parquet").to_pylist()]
    return _table(["row", "params", "epochs", "minutes", "valid ppl", "test ppl (not converged)", "paper's test ppl"], rows)


# -- benchmarks ---------------------------------------------------------------------------------------------------
def encoder_cpu(records: Path) -> str:
    rows = []
    for path in sorted((records / "benchmarks").glob("encoder-cpu-*.json")):
        b = _json(path)
        st = b["settings"]
        for name, r in b["results"].items():
            rows.append([f"{st['emb']} / {st['hidden']}", name, f"{r['parameters'] / 1e6:.2f}M",
                         _fmt(r["step_time_vs_tied"], ".2f") + "×", f"{st['threads']}"])
    return _table(["emb / hidden", "model", "params", "step time against tied (same run)", "threads"], rows)


def amp_cpu(records: Path) -> str:
    """Each kind in float32 and under bfloat16 autocast in one run (train_throughput.py --also-amp)."""
    rows = []
    for path in sorted((records / "benchmarks").glob("amp-cpu-*.json")):
        b = _json(path)
        st, res = b["settings"], b["results"]
        for name, r in res.items():
            if name.endswith("+amp"):
                continue
            amp = res[f"{name}+amp"]
            rows.append([name, f"{r['parameters'] / 1e6:.2f}M", _fmt(r["step_time_vs_tied"], ".2f") + "×",
                         _fmt(amp["step_time_vs_tied"], ".2f") + "×", _fmt(amp["step_time_vs_float32"], ".2f") + "×",
                         f"{st['threads']}"])
    return _table(["model", "params", "float32: step against tied", "bfloat16: step against tied",
                   "bfloat16 step against float32's", "threads"], rows)


def table10_cpu(records: Path) -> str:
    """Every output layer's step against tied's at the paper's size, one column per thread count (one run each)."""
    runs = [_json(path) for path in sorted((records / "benchmarks").glob("table10-cpu-*.json"))]
    if not runs:
        return _no_record("table10-cpu-*.json")
    runs.sort(key=lambda b: b["settings"]["threads"])
    names = list(dict.fromkeys(name for b in runs for name in b["results"]))
    params = {name: r["parameters"] for b in runs[::-1] for name, r in b["results"].items()}
    rows = [[name, f"{params[name] / 1e6:.2f}M",
             *[_fmt(b["results"][name]["step_time_vs_tied"], ".2f") + "×" if name in b["results"] else "–" for b in runs]]
            for name in names]
    threads = [b["settings"]["threads"] for b in runs]
    return _table(["kind", "params", *[f"step against tied, {t} thread{'' if t == 1 else 's'}" for t in threads]], rows)


def eval_cpu(records: Path) -> str:
    """`groc eval`'s time with each cache against the static model's, one column per thread count (Table 4)."""
    runs = sorted((_json(path) for path in (records / "benchmarks").glob("eval-cpu-*.json")),
                  key=lambda b: b["settings"]["threads"])
    if not runs:
        return _no_record("eval-cpu-*.json")
    names = list(runs[0]["results"])
    rows = [[name, *[_fmt(b["results"][name]["time_vs_static"], ".2f") + "×" for b in runs]] for name in names]
    header = ["cache", *[f"time against static, {_machine(b)}" for b in runs]]
    return _table(header, rows)

def cache_cpu(records: Path) -> str:
    """Each cache alone on synthetic states against a softmax over 50,000 words: the bound on eval's slowdown."""
    b = _benchmark(records, "cache-cpu.json")
    if b is None:
        return _no_record("cache-cpu.json")
    a = b["args"]
    what = {"unigram": "unigram", "local": f"local, window {a['cache_size']:,}, {len(a['thetas'])} values of θ at once",
            "unbounded": f"unbounded, {a['index']}, nprobe {a['nprobe']}, k {a['knn']:,}"}
    rows = [[what.get(kind, kind), str(c["dim"]), _fmt(c["max_eval_slowdown"], ".2f") + "×",
             _fmt(100 * c["fraction_target_in_cache"], ".1f") + "%"] for kind, c in b["caches"].items()]
    return _table([f"cache ({_machine({'environment': b['machine']})})", "state size",
                   f"eval's time against static, at most (softmax over {a['softmax_vocab']:,} words)",
                   "targets in the cache"], rows)

def knn_cpu(records: Path) -> str:
    """Exact nearest neighbours in torch against FAISS's Flat, one row per datastore size, and the cache on a stream."""
    b = _benchmark(records, "knn-cpu.json")
    if b is None:
        return _no_record("knn-cpu.json")
    machine = _machine({"environment": b["machine"]})
    rows = [[f"search, {r['states']:,} states", _fmt(r["torch_vs_faiss"], ".2f") + "×",
             _fmt(100 * r["same_neighbour_sets"], ".3f") + "%",
             f"{r['max_relative_distance_difference']:.1e} of the largest distance"]
            for r in b["search"]]
    if b.get("stream"):
        s = b["stream"]
        rows.append([f"unbounded cache (Flat), {s['positions']:,} positions", _fmt(s["torch_vs_faiss"], ".2f") + "×",
                     f"{s['positions_differing']} positions differ", f"{s['max_logp_difference']:.2f} in log-probability"])
    return _table([f"k = {b['args']['knn']:,}, d = {b['args']['dim']}, {machine}", "torch's time against FAISS's",
                   "FAISS's neighbours torch finds", "largest difference"], rows)

def threads_cpu(records: Path) -> str:
    """`groc train`'s speed with each thread setting against one thread, per scenario and kind (benchmarks/threads.py)."""
    b = _benchmark(records, "threads-cpu.json")
    if b is None:
        return _no_record("threads-cpu.json")
    settings = list(dict.fromkeys(r["threads"] for r in b["rows"]))
    cells = {(r["scenario"], r["kind"], r["threads"]): r for r in b["rows"]}
    rows = []
    for scenario, kind in dict.fromkeys((r["scenario"], r["kind"]) for r in b["rows"]):
        row = [scenario, kind]
        for t in settings:
            r = cells.get((scenario, kind, t))
            chose = ""
            if r and t == "auto":
                chose = " (chose " + " or ".join(sorted({"→".join(map(str, c)) for c in r["chose"]})) + ")"
            row.append(_fmt(r["vs_one_thread"], ".2f") + "×" + chose if r else "–")
        rows.append(row)
    return _table([f"scenario ({b['machine']} ({_vector(b.get('cpu_flags'))}), {b['cpus']} cores)", "kind",
                   *[f"--threads {t}: speed against 1" for t in settings]], rows)

def tools_cpu(records: Path) -> str:
    """Tokenization's processes, the peak memory of preparation and of one long line and split, and start-up, one row a
    record that exists."""
    rows = []
    if b := _benchmark(records, "tokenize-cpu.json"):
        same = "byte-identical output" if b["identical_output"] else "**different output**"
        rows.append([f"`groc tokenize -j 2` against `-j 1`, {b['whitespace_tokens'] / 1e6:.1f}M tokens of "
                     f"{Path(b['source']).name}", f"{b['speedup']:.2f}× faster, {same}", "`tokenize-cpu.json`"])
    if b := _benchmark(records, "prepare-cpu.json"):
        peaks = "; ".join(f"{r['tokens'] / 1e6:,.1f}M tokens: {r['peak_rss_mb']:,.1f} MB" for r in b["runs"])
        rows.append(["`groc prepare`, peak resident memory", f"{peaks} (imports alone: {b['imports_rss_mb']:,.1f} MB)",
                     "`prepare-cpu.json`"])
    lines = [b for name in ("line-memory-cpu-small.json", "line-memory-cpu.json") if (b := _benchmark(records, name))]
    if lines:
        scored = "; ".join(f"{b['score_line']['chars'] / 1e6:.1f}M characters ({b['score_line']['tokens'] / 1e3:,.0f}K "
                           f"tokens): {b['score_line']['peak_rss_mb']:,.0f} MB" for b in lines)
        rows.append(["`groc score` of one line, peak resident memory", scored, "`line-memory-cpu*.json`"])
        evals = "; ".join(f"{b['eval_split']['tokens'] / 1e6:.1f}M tokens: {b['eval_split']['cache_none']['peak_rss_mb']:,.0f} "
                          f"MB, local cache {b['eval_split']['cache_local']['peak_rss_mb']:,.0f} MB" for b in lines)
        rows.append(["`groc eval --per-token` of one split, peak resident memory", evals, "`line-memory-cpu*.json`"])
    if b := _benchmark(records, "startup-cpu.json"):
        times = "; ".join(f"`{r['command']}` {r['vs_import_torch']:.2f}×" for r in b["rows"])
        rows.append(["start-up against `python -c \"import torch\"`", times, "`startup-cpu.json`"])
    if not rows:
        return _no_record("{tokenize,prepare,line-memory,startup}-cpu.json")
    return _table(["what", "figure", "record (`docs/records/benchmarks/`)"], rows)

def table1(records: Path) -> str:
    rows = [[r["dataset"], f"{r['vocab']:,}", f"{r['train_tokens']:,}", _fmt(r["relations_cov"], ".1f"),
             _fmt(r["definitions_cov"], ".1f"), _fmt(r["paper_relations_cov"], ".0f"), _fmt(r["paper_definitions_cov"], ".0f")]
            for r in pq.read_table(records / "table1" / "table1.parquet").to_pylist()]
    return _table(["dataset", "vocabulary", "train tokens", "relations %", "definitions %", "paper: relations %",
                   "paper: definitions %"], rows)


def h200_step(records: Path) -> str:
    d = records / "gpu-table2-h200" / "benchmarks"
    runs = {name: _json(d / f"{name}.json") for name in ("fp32", "amp", "small")}
    kinds = list(runs["fp32"]["results"])
    rows = []
    for kind in kinds:
        cells = [kind]
        for name in ("fp32", "amp", "small"):
            r = runs[name]["results"].get(kind)
            cells += [_fmt(1000 * r["seconds_per_step"], ".1f"), _fmt(r["step_time_vs_tied"], ".2f") + "×"] if r else ["–", "–"]
        rows.append(cells)
    return _table(["kind", "fp32.json: ms a step", "vs tied", "amp.json: ms a step", "vs tied",
                   "small.json (2 × 200, BPTT 20): ms", "vs tied"], rows)


# -- Press & Wolf's Table 6 on CPU ----------------------------------------------------------------------------------
def press_wolf(records: Path) -> str:
    paper = recipe("press-wolf")
    published = paper.PRESS_WOLF_ROWS
    rows = []
    for row, d in _rows(records / "press-wolf", "", published):
        s, config = _json(d / "summary.json"), _json(d / "config.json")
        label, _, _, test, _ = published[row]
        rows.append([label, f"{s['parameters'] / 1e6:.2f}M", str(s["epochs"]), _fmt(s["final"]["train_ppl"]),
                     _fmt(s["final"]["valid_ppl"]), f"**{_json(d / 'test.json')['perplexity']:.2f}**",
                     f"Zaremba et al. {test}" if test else paper.PRESS_WOLF_DIRECTION[row],
                     f"{s['seconds'] / 60:,.0f}", _machine(config)])
    return _table(["row", "params", "epochs", "train ppl (last epoch)", "valid ppl (last epoch)", "test ppl",
                   "published", "minutes", "machine"], rows)


BLOCKS = {"table2-cpu": table2_cpu, "figure3-cpu": figure3_cpu, "ranks-cpu": ranks_cpu, "converge": converge,
          "converge-bins": converge_bins, "converge-amp": converge_amp, "table2-paper": table2_paper, "gpu-window": gpu_window,
          "encoder-cpu": encoder_cpu, "amp-cpu": amp_cpu, "h200-step": h200_step, "table1": table1,
          "press-wolf": press_wolf, "table10-cpu": table10_cpu, "eval-cpu": eval_cpu, "cache-cpu": cache_cpu,
          "knn-cpu": knn_cpu, "threads-cpu": threads_cpu, "tools-cpu": tools_cpu}


# -- figures ------------------------------------------------------------------------------------------------------
def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _curves(runs: list[tuple[str, Path]], title: str):
    data = {}
    for label, d in runs:
        m = pq.read_table(d / "metrics.parquet", columns=["epoch", "valid_ppl"]).to_pydict()
        data[label] = [[int(e), round(float(v), 4)] for e, v in zip(m["epoch"], m["valid_ppl"]) if v is not None]

    def draw():
        from matplotlib.ticker import NullFormatter, ScalarFormatter

        fig = _figure(9, 5.5)
        ax = fig.add_subplot()
        for label, points in data.items():
            groc = label.lower().startswith("groc")
            ax.plot([p[0] for p in points], [p[1] for p in points], label=label, linewidth=2.4 if groc else 1.3,
                    linestyle="--" if "(A/B)" in label or "," in label and groc and "paper" not in label else "-")
        lowest = min(p[1] for points in data.values() for p in points)
        ax.set_yscale("log")
        ax.set_ylim(lowest * 0.95, lowest * 2.5)
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_yticks([t for t in (50, 60, 70, 80, 90, 100, 110, 120, 140, 160, 180, 200, 250, 300)
                       if lowest * 0.95 <= t <= lowest * 2.5])
        ax.set_xlabel("epoch")
        ax.set_ylabel("validation perplexity (log scale)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=9, ncols=2)
        return fig
    return data, draw


def fig_table2_cpu_valid(records: Path):
    runs = [(CPU_LABELS.get(k, k), d) for k, d in _rows(records / "table2-cpu", "ptb-", CPU_ROWS)]
    return _curves(runs, "Table 2 on PTB, 2 × 200 on CPU: validation perplexity by epoch")


def fig_figure3_cpu(records: Path):
    data = figure3_data(records)
    best = data["best"]

    def draw():
        fig = _figure(9, 4.5)
        ax = fig.add_subplot()
        bins = [b for b in data["bins"] if b["tokens"]]
        x = np.arange(len(bins))
        for i, (key, label) in enumerate((("median_vs_tied", "GroC − tied"), (f"median_vs_{best}", f"GroC − {best}"))):
            ax.bar(x + (i - 0.5) * 0.38, [b[key] for b in bins], width=0.38, label=label)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xticks(x, [f"{b['bin']}\nn={b['tokens']:,}" for b in bins])
        ax.set_xlabel("training frequency of the test word")
        ax.set_ylabel("median loss difference (nats)\nbelow 0: GroC better")
        ax.set_title("Figure 3 on PTB at 2 × 200 (CPU): GroC against tied and the best table model")
        ax.legend()
        return fig
    return data, draw


def fig_converge_valid(records: Path):
    runs = [(CONVERGE_LABELS[m], d) for m, d in _rows(records / "converge", "", ("tied", *CONVERGE_SHORT))]
    if not runs:
        return None
    return _curves(runs, "Converged on Emma (CPU): validation perplexity by epoch")


FIGURES = {"table2-cpu-valid.png": fig_table2_cpu_valid, "figure3-cpu.png": fig_figure3_cpu,
           "converge-valid.png": fig_converge_valid}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build_figures(records: Path, figures: Path, check: bool) -> list[str]:
    """Draw every figure (or, with check, compare with the committed ones); the problems found."""
    import matplotlib

    manifest_path = figures / "figures.json"
    manifest = _json(manifest_path) if manifest_path.is_file() else {}
    problems, new = [], {}
    for name, make in FIGURES.items():
        made = make(records)
        if made is None:
            continue
        data, draw = made
        data_sha = _sha(json.dumps(data, sort_keys=True).encode())
        import io

        buffer = io.BytesIO()
        draw().savefig(buffer, format="png", metadata={"Software": None})
        png = buffer.getvalue()
        entry = {"data_sha256": data_sha, "png_sha256": _sha(png), "matplotlib": matplotlib.__version__}
        new[name] = entry
        if check:
            old = manifest.get(name)
            if old is None or not (figures / name).is_file():
                problems.append(f"docs/figures/{name} is missing")
            elif old["data_sha256"] != data_sha:
                problems.append(f"docs/figures/{name} shows other data than the records hold")
            elif old["matplotlib"] == matplotlib.__version__ and _sha((figures / name).read_bytes()) != entry["png_sha256"]:
                problems.append(f"docs/figures/{name} differs from what the records draw")
        else:
            figures.mkdir(parents=True, exist_ok=True)
            (figures / name).write_bytes(png)
    if not check:
        manifest_path.write_text(json.dumps(new, indent=1, sort_keys=True) + "\n")
    return problems


def build_text(text: str, records: Path, name: str) -> tuple[str, list[str]]:
    """``text`` with every built block rebuilt, and the blocks whose content changed."""
    changed = []

    def replace(match):
        block = match.group(2)
        if block not in BLOCKS:
            raise SystemExit(f"build_report: {name} has a built block '{block}' that no builder makes "
                             f"(known: {', '.join(BLOCKS)})")
        content = BLOCKS[block](records)
        if content != match.group(3):
            changed.append(block)
        return match.group(1) + content + match.group(4)
    return BLOCK.sub(replace, text), changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="recipes/lib/build_report.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=Path, default=ROOT / "docs" / "records")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 naming what differs")
    args = parser.parse_args(argv)
    problems = []
    for path in sorted(args.docs.glob("*.md")):
        text = path.read_text()
        new, changed = build_text(text, args.records, path.name)
        if args.check:
            problems += [f"docs/{path.name}: the block '{b}' is not what the records build" for b in changed]
        elif new != text:
            path.write_text(new)
            print(f"build_report: docs/{path.name}: rebuilt {', '.join(changed)}", file=sys.stderr)
    problems += build_figures(args.records, args.docs / "figures", args.check)
    if problems:
        print(f"build_report: {problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
              + "; run python recipes/lib/build_report.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
