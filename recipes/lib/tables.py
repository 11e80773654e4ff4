"""The recipes' result tables, one function per recipe, each built from finished outputs only
(``report.load`` stops with exit status 2 at a missing one).

The recipes call them through ``report`` (recipes/lib/steps.sh) once their stages are done:

    python recipes/lib/tables.py table2 --out=results/table2 --work=results/work --scale=small --datasets="ptb wt2"

Each function's parameters are its command's options (``--name=VALUE``; a list is one
space-separated value), so a recipe's table can be rebuilt, or tested, from its outputs alone.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import typing
from pathlib import Path

import pyarrow.parquet as pq

from groc_cli import plots
from groc_cli.artifacts import read_metadata
from groc_cli.environment import describe as describe_environment
from report import Table, load, summary

DATASET_NAMES = {"ptb": "penn", "wt2": "wikitext2"}  # the paper's names


def _coverage(lexicon: Path) -> dict:
    """A lexicon's WordNet coverage of its vocabulary, in % (Table 1's and Table 4's columns)."""
    cov = read_metadata(lexicon)["coverage"]
    return {"relations_cov": round(100 * cov["relations_coverage"], 1),
            "definitions_cov": round(100 * cov["definition_coverage"], 1)}


# Table 1: (name, |V|, training tokens, relations %, definitions %) per dataset.
PAPER_TABLE1 = {"ptb": ("penn", 10_000, 929_000, 78, 86), "wt2": ("wikitext2", 33_000, 2_000_000, 73, 76)}


def table1(out: Path, work: Path) -> None:
    """Table 1: dataset statistics and WordNet coverage (table1.sh)."""
    t = Table("table1", "Table 1: dataset statistics and WordNet coverage (ours beside the paper's)",
              ["dataset", "genre", "vocab", "train_tokens", "relations_cov", "definitions_cov",
               "paper_vocab", "paper_tokens", "paper_relations_cov", "paper_definitions_cov"])
    for key, genre in (("ptb", "news"), ("wt2", "Wikipedia")):
        m = load(work / key / "manifest.json")
        name, pv, pt, pr, pd = PAPER_TABLE1[key]
        t.add(dataset=name, genre=genre, vocab=m["vocab_size"], train_tokens=m["splits"]["train"]["tokens"],
              **_coverage(work / f"{key}.lexicon.parquet"),
              paper_vocab=pv, paper_tokens=pt, paper_relations_cov=pr, paper_definitions_cov=pd)
    t.write(out, notes=["Coverage: % of the training vocabulary with at least one WordNet relation (synonym or hyponym, "
                        "single words) / a definition; see docs/lexicon.md for why PTB and WikiText-2 differ from the paper."])


# Table 2: (|Θ| in millions, test perplexity) for penn, wikitext2
PAPER_TABLE2 = {
    "lookup": ((13, 90.8), (23, 108.3)), "convolutional": ((13, 101.6), (23, 116.6)), "tied": ((10, 86.2), (15, 97.3)),
    "bilinear": ((10, 83.7), (15, 95.9)), "deep-residual": ((10, 80.5), (15, 94.7)), "adaptive": ((8, 79.3), (9, 90.7)),
    "groc": ((9, 69.5), (9, 82.5))}


def table2(out: Path, work: Path, scale: str, datasets: list[str]) -> None:
    """Table 2: perplexity and |Θ| per output layer (table2.sh)."""
    t = Table("table2", f"Table 2: perplexity per output layer, closed vocabulary (SCALE={scale})",
              ["dataset", "output", "params_M", "valid_ppl", "test_ppl", "tokens_per_s", "paper_params_M", "paper_test_ppl"],
              {"params_M": ".2f", "tokens_per_s": ".0f"})
    for ds in datasets:
        for kind in PAPER_TABLE2:
            s = summary(work / "runs" / scale / f"{ds}-{kind}")
            e = load(work / "evals" / scale / f"{ds}-{kind}.test.json")
            p = PAPER_TABLE2[kind][0 if ds == "ptb" else 1]
            t.add(dataset=DATASET_NAMES[ds], output=kind, params_M=s["parameters"] / 1e6,
                  valid_ppl=s["best_valid_ppl"] if "best_valid_ppl" in s else s["final"]["valid_ppl"], test_ppl=e["perplexity"],
                  tokens_per_s=s["final"]["tokens_per_s"], paper_params_M=p[0], paper_test_ppl=p[1])
    notes = [f"Runs: {work}/runs/{scale}/<dataset>-<output>; commands in commands.log."]
    if scale == "paper":
        notes.append("SCALE=paper: appendix B.1 (2x1024 LSTM, emb 300 PTB / 256 WikiText-2, dropout 0.65, Adam 1e-3, "
                     "clip 0.1, lr x0.1 after 4 epochs without improvement, early stop after 8, at most 40 epochs), "
                     "float32 unless the runs' config.json says amp. A run stopped by MINUTES says so in its "
                     "summary.json (stop_reason max-minutes).")
    if scale == "small":
        notes.append("SCALE=small: 128-d embeddings, one 256-unit and one 128-unit LSTM layer, dropout 0.3, "
                     "400K training tokens (under half a PTB epoch), CPU. The paper trains 2x1024 to convergence on a GPU; "
                     "compare the ranking, not the values.")
    t.write(out, notes=notes)


def gpu_table2(out: Path, state: Path) -> None:
    """Table 2 from one GPU window (gpu-table2.sh): every started run, however it ended, with the
    prefix regularization and precision its config.json records."""
    from window import _json, runs  # recipes/lib/window.py: the window's runs and how each ended

    start = _json(state / "start.json")
    ds = start["dataset"]
    t = Table("table2", f"Table 2 in one window: {DATASET_NAMES[ds]}, SCALE={start['scale']}, MINUTES={start['minutes']} "
              f"({start['device']})",
              ["dataset", "output", "ended", "epochs", "best_epoch", "minutes", "params_M", "valid_ppl", "test_ppl",
               "emb_dropout", "layer_dropout", "dropout", "out_dropout", "precision", "paper_params_M",
               "paper_test_ppl"],
              {"params_M": ".2f", "minutes": ".1f", "epochs": "d", "best_epoch": "d", "emb_dropout": ".2f",
               "layer_dropout": ".2f", "dropout": ".2f", "out_dropout": ".2f"})
    for r in runs(state):
        model = (r["config"] or {}).get("model", {})
        train = (r["config"] or {}).get("train", {})
        ended = r["state"] if r["state"] in ("training", "died") else f"{r['state']}: {r['detail'].split(' (')[0]}"
        p = PAPER_TABLE2[r["kind"]][0 if ds == "ptb" else 1]
        t.add(dataset=DATASET_NAMES[ds], output=r["kind"], ended=ended, epochs=r["epochs"], best_epoch=r["best_epoch"],
              minutes=r["minutes"], params_M=r["config"]["parameters"] / 1e6 if r["config"] else None,
              valid_ppl=r["best_valid_ppl"], test_ppl=(r["evaluation"] or {}).get("perplexity"),
              emb_dropout=model.get("emb_dropout"),
              layer_dropout=model.get("layer_dropout") if model.get("layer_dropout") is not None else model.get("dropout"),
              dropout=model.get("dropout"), out_dropout=model.get("out_dropout"),
              precision=("bfloat16 autocast" if train.get("amp") else "float32") if train else None,
              paper_params_M=p[0], paper_test_ppl=p[1])
    t.write(out, notes=[
        "ended: finished by early-stopping (converged: 8 epochs without validation improvement), max-minutes (the "
        "window's MINUTES, not converged) or max-epochs; stopped: interrupted or killed, its best checkpoint "
        "evaluated; died: failed (runs.json has its log). Only early-stopping rows are the paper's measurement.",
        "test_ppl: the best checkpoint (lowest validation perplexity) on the test split, closed vocabulary.",
        f"Settings: recipes/configs/{DATASET_NAMES[ds]}/<output>.toml (appendix B.1 + Table 8); the regularization "
        "columns are each run's own config.json (emb_dropout on the input embeddings, layer_dropout between the LSTM "
        "layers, dropout after the last, out_dropout on the output embeddings).",
        f"Runs started {start['started']}; commands in commands.log, machine in environment.json."])


# Table 3: (dev, test) on penn and wikitext2
PAPER_TABLE3 = {"groc": ((75.0, 71.4), (87.0, 82.5)), "groc-norel": ((77.1, 72.7), (90.2, 85.3)),
                "groc-nodef": ((75.6, 72.0), (88.6, 84.3)), "groc-surf": ((79.8, 75.8), (94.3, 89.8)),
                "groc-d0": ((72.5, 69.5), (88.7, 84.1)), "groc-d0-norel": ((74.2, 70.8), (93.0, 88.0)),
                "groc-d0-nodef": ((74.4, 71.1), (87.6, 83.1)), "groc-d0-surf": ((76.3, 73.2), (94.5, 89.5))}
TABLE3_LABELS = {"groc": "GroC + out", "groc-norel": "  - relations", "groc-nodef": "  - definitions",
                 "groc-surf": "  - both", "groc-d0": "GroC", "groc-d0-norel": "  - relations",
                 "groc-d0-nodef": "  - definitions", "groc-d0-surf": "  - both"}


def table3(out: Path, work: Path, scale: str, datasets: list[str]) -> None:
    """Table 3: GroC ablations (table3.sh)."""
    t = Table("table3", f"Table 3: GroC ablations (SCALE={scale})",
              ["dataset", "model", "params_M", "valid_ppl", "test_ppl", "paper_valid", "paper_test"], {"params_M": ".2f"})
    for ds in datasets:
        for name, (p_ptb, p_wt2) in PAPER_TABLE3.items():
            s = summary(work / "runs" / scale / f"{ds}-{name}")
            e = load(work / "evals" / scale / f"{ds}-{name}.test.json")
            p = p_ptb if ds == "ptb" else p_wt2
            t.add(dataset=DATASET_NAMES[ds], model=TABLE3_LABELS[name], params_M=s["parameters"] / 1e6,
                  valid_ppl=s["best_valid_ppl"], test_ppl=e["perplexity"], paper_valid=p[0], paper_test=p[1])
    notes = ["+ out: depth-1 residual output network (--out-depth 1, groc's default); the others use --out-depth 0.",
             "- relations: --no-relations; - definitions: --no-definitions; - both: surface (character) forms only."]
    if scale == "small":
        notes.append("SCALE=small: the small configuration of table2.sh (128/256 units, 400K training tokens, CPU); "
                     "the paper's models are 2x1024 trained to convergence.")
    t.write(out, notes=notes)


# Table 4 (penn test): coverage 0,16,32,48,64,82% = keep 0,0.2,...,1 of the covered words
PAPER_TABLE4_INFERENCE = {0.0: 187.8, 0.2: 159.3, 0.4: 128.5, 0.6: 102.6, 0.8: 83.5, 1.0: 69.5}
PAPER_TABLE4_TRAIN = {0.0: 72.4, 0.2: 70.0, 0.4: 70.4, 0.6: 69.6, 0.8: 70.7, 1.0: 69.5}


def table4(out: Path, work: Path, scale: str, fractions: list[str], train_fractions: list[str]) -> None:
    """Table 4: GroC's PTB test perplexity by lexicon coverage (table4.sh). Fractions are as the
    recipe names its files (keep0.2, not keep0.20)."""
    t = Table("table4", f"Table 4: lexicon coverage and GroC's PTB test perplexity (SCALE={scale})",
              ["keep_fraction", "relations_cov", "definitions_cov", "inference_ppl", "train_ppl",
               "paper_inference_ppl", "paper_train_ppl"])
    surf = load(work / "evals" / scale / "ptb-groc-d0-surf.test.json")["perplexity"]
    t.add(keep_fraction="surf.", inference_ppl=surf, paper_inference_ppl=73.1)
    for f in fractions:
        cov = _coverage(work / f"ptb.lexicon.keep{f}.parquet")
        inf = load(work / "evals" / scale / f"table4-inference-{f}.json")["perplexity"]
        tr = load(work / "evals" / scale / f"table4-train-{f}.json")["perplexity"] if f in train_fractions else None
        t.add(keep_fraction=f"{float(f):.1f}", **cov, inference_ppl=inf, train_ppl=tr,
              paper_inference_ppl=PAPER_TABLE4_INFERENCE.get(round(float(f), 1)),
              paper_train_ppl=PAPER_TABLE4_TRAIN.get(round(float(f), 1)))
    notes = ["keep_fraction: share of the WordNet-covered training words that keep their entries (groc lexicon --keep-fraction, "
             "seed 1); coverage columns are the resulting % of the vocabulary. Paper columns: coverage 0/16/32/48/64/82%.",
             "inference: the model trained with the full lexicon, evaluated with the reduced one (groc eval --lexicon); "
             "train: trained from scratch with the reduced lexicon."]
    if scale == "small":
        notes.append("SCALE=small: the small configuration of table2.sh (CPU, 400K training tokens).")
    t.write(out, notes=notes)


# Table 5 of the paper (2007 News Crawl source; near 2008-2011, far web and wiki), for reference:
# the columns are other data, so the paper's rows are printed as a note, not matched by column.
PAPER_TABLE5 = {
    "tied": {"base": [184.3, 199.8, 217.3, 221.6, 229.9, 660.6, 841.1], "unigram": [187.8, 203.6, 221.5, 225.9, 234.3, 577.5, 819.7],
             "local": [181.8, 196.5, 212.0, 217.7, 225.9, 501.7, 406.9], "finetuned": [None, 172.8, 177.9, 180.7, 185.4, 212.7, 242.6]},
    "groc": {"base": [158.6, 171.0, 186.7, 192.5, 200.4, 637.9, 753.9], "unigram": [155.2, 167.3, 183.1, 189.5, 196.4, 533.6, 689.2],
             "local": [152.6, 164.1, 179.0, 185.1, 192.3, 493.0, 408.8], "finetuned": [None, 153.7, 162.2, 167.0, 170.6, 239.5, 216.9]},
}
TABLE5_SETTINGS = (("base", "zero-resource"), ("unigram", "+ unigram cache"), ("local", "+ local cache"),
                   ("unbounded", "+ unbounded cache"), ("finetuned", "low-resource: finetuned"))
TABLE5_FINETUNING = ("news-ft", "web", "wiki", "books")  # the finetuning datasets (FAR_DOMAINS of common.sh)


def table5(out: Path, work: Path, scale: str, tests: list[str], reuters_suffix: str, reuters_min_count: int) -> None:
    """Table 5 (and Table 6's test-set statistics, Figures 4-5's finetuning curves) in miniature (table5.sh)."""
    ev = work / "evals" / scale
    t = Table("table5", f"Table 5 (miniature): open-vocabulary cross-domain perplexity (SCALE={scale})",
              ["setting", "model", *tests])
    oov = Table("table5_data", "Table 6 (miniature): test sets, OOV rate against the Reuters training vocabulary",
                ["domain", "tokens", "vocab_union", "new_words", "oov_pct"], {"oov_pct": ".2f"})
    for d in tests:
        e = load(ev / f"table5{reuters_suffix}-tied-{d}-base.json")
        oov.add(domain=d, tokens=e["tokens"], vocab_union=e["vocab_size"], new_words=e["new_words"], oov_pct=100 * e["oov_rate"])
    for setting, label in TABLE5_SETTINGS:
        for kind in ("tied", "groc"):
            t.add(setting=label, model=kind,
                  **{d: load(ev / f"table5{reuters_suffix}-{kind}-{d}-{setting}.json")["perplexity"] for d in tests})
    curves = {}
    for kind in ("tied", "groc"):
        for ft in TABLE5_FINETUNING:
            rows = pq.read_table(work / "runs" / scale / f"reuters{reuters_suffix}-{kind}-ft-{ft}" / "metrics.parquet").to_pylist()
            curves.setdefault(ft, {})[f"{kind} train"] = [(r["epoch"], r["train_loss"]) for r in rows]
            curves[ft][f"{kind} valid"] = [(r["epoch"], r["valid_loss"]) for r in rows]
    for ft, series in curves.items():
        plots.curves(series, out / f"finetune-{ft}.png", xlabel="finetuning epoch", ylabel="loss (nats)",
                     title=f"Finetuning on {ft}: train and validation loss (Figures 4-5)")
    notes = ["All evaluations use --vocab union (model vocabulary + the test set's words): GroC composes new words from "
             "characters and WordNet; tied is interpolated with the uniform distribution (--uniform-weight 0.01).",
             "Caches as in the paper's C.4: unigram and local weight 0.034 (λ = 0.966), θ = 0.5, window 10,000; GroC's new words "
             "down-weighted by 0.1 before a cache. Unbounded: weight 0.1, k = 1024, Gaussian kernel, index trained on the first "
             "states of each test stream (not tuned here).",
             "Finetuning, 3 epochs: news on the first 50K tokens of WMT 2009-2012 (next 20K: validation), far domains on the first "
             "50K tokens of their own text (next 20K: validation; the rest is the test set above).",
             "Paper (2007 News Crawl -> 2007, 2008-2011, web, wiki; 2M training tokens, 2x1024 LSTM): " +
             "; ".join(f"{k} {s}: {v}" for k, r in PAPER_TABLE5.items() for s, v in r.items()),
             "Finetuning curves: finetune-<domain>.png."]
    unk = (f"Reuters prepared with --min-count {reuters_min_count} (REUTERS_MIN_COUNT), so <unk> is trained"
           if reuters_min_count > 1 else
           "Reuters prepared with --min-count 1 (REUTERS_MIN_COUNT=1): every training word is in the vocabulary and tied's "
           "<unk> input row is never trained, which derails it on text with many new words")
    if scale == "small":
        notes.append(f"SCALE=small: 128/256-unit LSTM, 400K Reuters training tokens, CPU; {unk}.")
    else:
        notes.append(f"SCALE=paper: appendix B.1 model (2x1024 LSTM, emb 300, dropout 0.65) on 1.1M Reuters tokens; {unk}; "
                     "training bounded by MINUTES if set (the source runs' summary.json has the stop reason); unbounded "
                     "index as in commands.log.")
    oov.write(out)
    t.write(out, notes=notes)


# Table 10: seconds per epoch on penn and wikitext-2 (GeForce RTX 2080 Ti). The paper's
# "- p% updates" rows are listed as printed (their time falls as p rises, so p there reads
# as the share of *frozen* steps; we map row "- p% updates" to --update-prob 1 - p).
PAPER_TABLE10 = {
    "lookup": (19.5, 59.5), "convolutional": (201.2, 1301.9), "tied": (18.6, 53.6), "bilinear": (35.0, 120.1),
    "deep-residual": (61.2, 114.5), "adaptive": (27.2, 77.6), "groc": (259.8, 1813.5),
    "groc@update_prob=0.9": (236.3, 1627.7), "groc@update_prob=0.7": (173.5, 1262.9),
    "groc@update_prob=0.5": (131.5, 936.4), "groc@update_prob=0.3": (95.2, 669.0), "groc@update_prob=0.1": (46.0, 299.0)}


def table10(out: Path, work: Path, scale: str, datasets: list[str]) -> None:
    """Table 10: training step time per output layer (table10.sh, from benchmarks/train_throughput.py)."""
    t = Table("table10", f"Table 10: training step time per output layer (SCALE={scale})",
              ["dataset", "method", "params_M", "median_s_per_step", "mean_s_per_step", "median_vs_tied", "mean_vs_tied",
               "paper_s_per_epoch", "paper_vs_tied"],
              {"params_M": ".2f", "median_s_per_step": ".3f", "mean_s_per_step": ".3f", "median_vs_tied": ".2f",
               "mean_vs_tied": ".2f", "paper_vs_tied": ".2f"})
    device = threads = None
    for ds in datasets:
        bench = load(work / "bench" / scale / f"{ds}-train-throughput.json")
        device, threads = bench["settings"]["device"], bench["settings"]["threads"]
        tied = bench["results"]["tied"]
        col = 0 if ds == "ptb" else 1
        for name, r in bench["results"].items():
            p = PAPER_TABLE10.get(name)
            t.add(dataset=DATASET_NAMES[ds], method=name, params_M=r.get("parameters", 0) / 1e6,
                  median_s_per_step=r["seconds_per_step"], mean_s_per_step=r["mean_seconds_per_step"],
                  median_vs_tied=r["step_time_vs_tied"], mean_vs_tied=r["mean_seconds_per_step"] / tied["mean_seconds_per_step"],
                  paper_s_per_epoch=p[col] if p else None, paper_vs_tied=p[col] / PAPER_TABLE10["tied"][col] if p else None)
    notes = [f"Step times over the timed steps on {device} ({threads} thread(s)); ratios within one process "
             "(benchmarks/train_throughput.py). With --update-prob p the steps are bimodal (full or frozen output side), so "
             "the mean, not the median, gives the throughput of a run.",
             "Paper rows '- p% updates' are matched to --update-prob 1-p (see the script's comment)."]
    if scale == "small":
        notes.append("SCALE=small: 128-d embeddings, 256-unit LSTM; the paper's 2x1024 figures are in docs/benchmarks.md.")
    t.write(out, notes=notes)


def figure3(out: Path, scale: str, datasets: list[str], baselines: list[str]) -> None:
    """Figure 3 as a table: median loss difference per training-frequency bin (figure3.sh, from groc compare)."""
    rows = {(ds, base): load(out / f"{ds}-{base}-vs-groc.json") for ds in datasets for base in baselines}
    bins = [b["bin"] for b in next(iter(rows.values()))["bins"]]
    t = Table("figure3", f"Figure 3: median loss difference, GroC minus baseline, per training-frequency bin (SCALE={scale})",
              ["dataset", "baseline", *bins, "overall"], {b: "+.3f" for b in [*bins, "overall"]})
    for (ds, base), r in rows.items():
        t.add(dataset=DATASET_NAMES[ds], baseline=base,
              **{b["bin"]: b["median_diff"] for b in r["bins"]}, overall=r["overall"]["median_diff"])
    t.write(out, notes=["Nats per word, loss(GroC) - loss(baseline): negative = GroC better on the words of that bin "
                        "(the paper plots the same quantity per baseline).",
                        "Plots: <dataset>-<baseline>-vs-groc.png (groc compare --plot)."])


def figure6(out: Path, scale: str) -> None:
    """Figures 6-7: local-cache grids as heatmaps, and the best cell of each (figure6.sh, from groc eval --grid)."""
    t = Table("figure6", f"Figures 6-7: best local-cache setting of a 5 x 5 grid (SCALE={scale})",
              ["figure", "data", "model_ppl", "best_theta", "best_cache_weight", "best_lambda_groc_paper", "best_ppl",
               "paper_best"], {"best_theta": ".2f", "best_cache_weight": ".3f", "best_lambda_groc_paper": ".3f"})
    for fig, data, paper in (("figure6", "WMT news 2013 (union vocabulary), Reuters tied model", "θ 0.5, λ 0.966"),
                             ("figure7", "PTB valid, PTB tied model", "see Grave et al. 2017c, Fig. 2a")):
        r = load(out / f"{fig}-grid.json")
        plots.heatmap(r["grid"], "theta", "cache_weight", "perplexity", out / f"{fig}.png",
                      title=f"{data}:\nperplexity by θ and cache weight (window 5,000)")
        b = r["best"]
        t.add(figure=fig, data=data, model_ppl=r["model_perplexity"], best_theta=b["theta"], best_cache_weight=b["cache_weight"],
              best_lambda_groc_paper=1 - b["cache_weight"], best_ppl=b["perplexity"], paper_best=paper)
    t.write(out, notes=["Each grid is one pass over dumped states (groc eval --grid); every cell is in <figure>-grid.parquet.",
                        "cache_weight is the cache's share; the GroC paper's λ is 1 minus it (Grave et al. 2017c's λ is the share)."])


CHECK_OUTPUTS = ("lookup", "convolutional", "tied", "bilinear", "deep-residual", "adaptive", "groc")
CHECK_CACHES = ("none", "unigram", "local", "unbounded")


def check_open_vocab(out: Path, check_dir: Path, domains: list[str]) -> None:
    """Every output layer's open-vocabulary perplexity with each cache (check-open-vocab.sh, evaluations
    in CHECK_DIR/evals); exit status 1 if any is not finite."""
    t = Table("check-open-vocab", "Open-vocabulary perplexity of every output layer trained on Reuters (tiny models)",
              ["output", "domain", "tokens", "oov_pct", "new_words", *CHECK_CACHES, "all_finite"], {"oov_pct": ".1f"})
    bad = []
    for kind in CHECK_OUTPUTS:
        for d in domains:
            e = {x: load(check_dir / "evals" / f"{kind}-{d}-{x}.json") for x in CHECK_CACHES}
            finite = all(math.isfinite(v["perplexity"]) for v in e.values())
            bad += [] if finite else [f"{kind}/{d}"]
            t.add(output=kind, domain=d, tokens=e["none"]["tokens"], oov_pct=100 * e["none"]["oov_rate"],
                  new_words=e["none"]["new_words"], **{x: e[x]["perplexity"] for x in CHECK_CACHES}, all_finite=finite)
    t.write(out, notes=["--vocab union; table models interpolated with 1% uniform; GroC's new words down-weighted by 0.1 "
                        "before a cache. Caches: unigram/local weight 0.05 (θ 0.5, window 10,000), unbounded weight 0.1, "
                        "IVF64,PQ16, k 256. Tiny models: 64/128 units, 60K Reuters training tokens."])
    if bad:
        print(f"check-open-vocab: non-finite perplexity for {', '.join(bad)}", file=sys.stderr)
        raise SystemExit(1)


def check_wikitext2_caches(out: Path) -> None:
    """WikiText-2 with no cache, the local and the unbounded cache, tuned on valid (check-wikitext2-caches.sh)."""
    t = Table("check-wikitext2-caches", "WikiText-2: the local and unbounded caches over a small tied model",
              ["cache", "settings (tuned on valid)", "valid_ppl", "test_ppl"])
    static = load(out / "test-static.json")
    lg, ug = load(out / "local-grid.json"), load(out / "unbounded-grid.json")
    t.add(cache="none", **{"settings (tuned on valid)": "", "valid_ppl": lg["model_perplexity"], "test_ppl": static["perplexity"]})
    b = lg["best"]
    t.add(cache="local", **{"settings (tuned on valid)": f"window 2000, θ {b['theta']}, weight {b['cache_weight']}",
                            "valid_ppl": b["perplexity"], "test_ppl": load(out / "test-local.json")["perplexity"]})
    b = ug["best"]
    t.add(cache="unbounded", **{"settings (tuned on valid)": f"IVF1024,PQ32 trained on valid states, nprobe 8, k {b['knn']}, "
                                f"bandwidth × {b['bandwidth_scale']}, weight {b['cache_weight']}",
                                "valid_ppl": b["perplexity"], "test_ppl": load(out / "test-unbounded.json")["perplexity"]})
    t.write(out, notes=["Grids: local-grid.parquet, unbounded-grid.parquet (one pass each over the dumped validation states).",
                        "Grave et al. (2017c), WikiText-2 test: 99.3 without cache, 68.9 with a 2,000-position continuous cache."])


def grid_best(grid: Path, key: str) -> None:
    """Print one setting of the best cell of a groc eval --grid summary (check-wikitext2-caches.sh)."""
    print(load(grid)["best"][key])


QUICKSTART_SETS = {"emma": "in-domain (Emma, valid)", "near": "near (Persuasion)", "far": "far (Thursday)"}


def quickstart(out: Path, seconds: int) -> None:
    """The quickstart's table, printed only (quickstart.sh; SECONDS: its running time)."""
    runs = [json.loads((out / k / "summary.json").read_text()) for k in ("tied", "groc")]
    print(f"\nOpen-vocabulary perplexity on the embedded sample (trained on {runs[0]['tokens']:,} tokens of Emma, "
          f"one epoch; |Θ| tied {runs[0]['parameters']:,}, GroC {runs[1]['parameters']:,})\n")
    print(f"{'test set':<26} {'tokens':>7} {'OOV':>6} {'new words':>9} | {'model':<5} {'no cache':>9} {'+local':>8} {'+unbounded':>10}")
    print("-" * 90)
    for d, label in QUICKSTART_SETS.items():
        for kind in ("tied", "groc"):
            e = {n: json.loads((out / "evals" / f"{kind}-{d}-{n}.json").read_text()) for n in ("base", "local", "unbounded")}
            b = e["base"]
            print(f"{label if kind == 'tied' else '':<26} {b['tokens'] if kind == 'tied' else '':>7} "
                  f"{format(b['oov_rate'], '.1%') if kind == 'tied' else '':>6} {b['new_words'] if kind == 'tied' else '':>9} | "
                  f"{kind:<5} {b['perplexity']:>9.1f} {e['local']['perplexity']:>8.1f} {e['unbounded']['perplexity']:>10.1f}")
    print("\nOpen vocabulary: every test word is scored. GroC composes unseen words from characters and WordNet;")
    print("tied gives them a 1% uniform share. Caches: weight 0.1 (local: θ 0.5, window 2,000; unbounded: exact kNN, k 256);")
    print(f"GroC's new words down-weighted by 0.1 before a cache (paper 5.1). Outputs in {out}/; {seconds} s.")
    # The last digits depend on the CPU's vector extensions and the thread count (issue 31): say where it ran.
    recorded = {json.dumps(json.loads((out / "evals" / f"{kind}-{d}-{n}.json").read_text()).get("environment"),
                           sort_keys=True)
                for kind in ("tied", "groc") for d in QUICKSTART_SETS for n in ("base", "local", "unbounded")}
    # Tied's evaluations read no lexicon, so only GroC's record WordNet: one line per machine, not per model.
    found = [json.loads(r) for r in sorted(recorded)]
    wordnet = next((m["wordnet"] for m in found if m and m.get("wordnet")), None)
    machines = []
    for m in found:
        m = m and {**{k: v for k, v in m.items() if k != "wordnet"}, **({"wordnet": wordnet} if wordnet else {})}
        if m not in machines:
            machines.append(m)
    if machines == [None]:
        print("Machine: not recorded (evaluations written before groc recorded its environment).")
    for env in machines:
        print(f"Machine: {describe_environment(env) if env else 'not recorded in some evaluations'}")


CONVERGE_MODELS = {"tied": "tied", "groc": "GroC, authors' char-CNN init", "groc-uniform": "GroC, B.1 uniform init",
                   "tied-awd": "tied, authors' prefix dropouts", "groc-add": "GroC, forms added (authors' combine)",
                   "groc-charcnn": "GroC, authors' 1,024-filter selu char-CNN",
                   "groc-sparse": "GroC, sparse updates (update_prob 0.3)"}


def converge(out: Path, models: list[str], seconds: int) -> None:
    """Tied and GroC trained to convergence on the embedded sample (converge.sh)."""
    t = Table("converge", "Converged on CPU: Emma (160K training tokens), perplexity closed and open vocabulary",
              ["model", "params", "epochs", "stopped", "minutes", "valid", "test_closed", "test_open", "near_open",
               "far_open"], {"params": ",", "epochs": "d", "minutes": ".0f"})
    for m in models:
        s = load(out / "runs" / m / "summary.json")
        ev = {k: load(out / "evals" / f"{m}-{k}.json")["perplexity"] for k in ("emma-closed", "emma-open", "near-open", "far-open")}
        t.add(model=CONVERGE_MODELS[m], params=s["parameters"], epochs=s["epochs"], stopped=s["stop_reason"],
              minutes=s["seconds"] / 60, valid=s["best_valid_ppl"], test_closed=ev["emma-closed"],
              test_open=ev["emma-open"], near_open=ev["near-open"], far_open=ev["far-open"])
    notes = ["stopped: early-stopping = 8 epochs without validation improvement (converged); max-minutes = the "
             "MINUTES safeguard, max-epochs = EPOCHS (not converged).",
             "closed: the model's vocabulary (<unk> for words seen once); open: --vocab union, every test word scored "
             "(tied gives unseen words a uniform share, GroC composes them).",
             f"Outputs in {out}/; {seconds} s in all."]
    for m in models:
        path = out / "evals" / f"compare-tied-{m}.json"
        if m != "tied" and path.exists():
            r = load(path)
            bins = ", ".join(f"{b['bin']}: {b['median_diff']:+.3f}" for b in r["bins"] if b["median_diff"] is not None)
            notes.append(f"{CONVERGE_MODELS[m]} minus tied, median loss per training-frequency bin (nats, Emma test, "
                         f"groc compare): {bins}; overall {r['overall']['median_diff']:+.3f}.")
    t.write(out, notes=notes)


TABLE2_CPU_LABELS = {"tied-hidden": "tied, hidden-unit dropout only (A/B)"}


def table2_cpu(out: Path, work: Path, kinds: list[str]) -> None:
    """Table 2 on PTB with every output layer trained to convergence on CPU (table2-cpu.sh)."""
    t = Table("table2-cpu", "Table 2 on PTB, 2 x 200 prefix, every output layer trained to early stopping on CPU",
              ["output", "params", "epochs", "stopped", "minutes", "valid_ppl", "test_ppl", "test_open_ppl",
               "paper_test_ppl"], {"params": ",", "epochs": "d", "minutes": ".0f"})
    ev = work / "evals" / "cpu"
    tests = {}
    for kind in kinds:
        s = summary(work / "runs" / "cpu" / f"ptb-{kind}")
        tests[kind] = load(ev / f"ptb-{kind}.test.json")["perplexity"]
        t.add(output=TABLE2_CPU_LABELS.get(kind, kind), params=s["parameters"], epochs=s["epochs"],
              stopped=s["stop_reason"], minutes=s["seconds"] / 60, valid_ppl=s["best_valid_ppl"], test_ppl=tests[kind],
              test_open_ppl=load(ev / f"ptb-{kind}.test-open.json")["perplexity"],
              paper_test_ppl=PAPER_TABLE2[kind][0][1] if kind in PAPER_TABLE2 else None)
    notes = ["Prefix: 2 LSTM layers, emb 200, 200 units, one dropout rate on the input embeddings, between the layers "
             "and after the last (tied-hidden: none on the inputs); each layer's Table 8 settings from "
             "recipes/configs/penn/; Adam 1e-3, batch 20, BPTT 35, clip 0.1, x0.1 after 4 epochs without validation "
             "improvement, stopped after 8 (stopped: early-stopping = converged; max-epochs = the EPOCHS safeguard).",
             "paper_test_ppl: the paper's 2 x 1024 models (Table 2, penn), for the ranking only.",
             "test_open_ppl: --vocab union (every test type; PTB's test words are all in the vocabulary, so table models "
             "differ from closed by their 1% uniform share)."]
    table_kinds = [k for k in kinds if k not in ("groc", "tied-hidden")]
    if "groc" in kinds:
        best = min(table_kinds, key=lambda k: tests[k]) if table_kinds else None
        for base in dict.fromkeys(k for k in ("tied", best) if k in table_kinds):
            r = load(ev / f"compare-{base}-groc.json")
            bins = ", ".join(f"{b['bin']}: {b['median_diff']:+.3f}" for b in r["bins"] if b["median_diff"] is not None)
            which = "the best table model, " if base == best else ""
            notes.append(f"Figure 3, GroC minus {which}{base}: median loss per training-frequency bin (nats, PTB test, "
                         f"model column): {bins}; overall {r['overall']['median_diff']:+.3f}.")
    t.write(out, notes=notes)


# Press & Wolf's Table 6 is an image in our copy of the paper: only the parameter counts its text gives
# (4.6M, 2.7M tied) and the small model's published perplexities are filled in.
# row: (label, paper parameters in millions, published valid, published test, source)
PRESS_WOLF_ROWS = {
    "untied": ("small (Zaremba et al. 2014)", 4.6, 120.7, 114.5, "Zaremba et al. 2014; TF tutorial: 121.39 / 115.91"),
    "wt": ("small + WT", 2.7, None, None, "Press & Wolf Table 6"),
    "pr": ("small + PR", 4.6, None, None, "Press & Wolf Table 6"),
    "wt-pr": ("small + WT + PR", 2.7, None, None, "Press & Wolf Table 6"),
}


def press_wolf(out: Path, work: Path, rows: list[str]) -> None:
    """Press & Wolf's Table 6: the small PTB model untied, tied (WT), with projection regularization (PR), both."""
    t = Table("press-wolf", "Press & Wolf (2017) Table 6 on CPU: Zaremba et al.'s small PTB model, no dropout",
              ["model", "params", "epochs", "train_ppl", "valid_ppl", "test_ppl", "minutes", "paper_params_M",
               "paper_valid", "paper_test"], {"params": ",", "epochs": "d", "minutes": ".0f", "train_ppl": ".1f"})
    for r in rows:
        s = summary(work / "runs" / "press-wolf" / r)
        e = load(work / "evals" / "press-wolf" / f"{r}.test.json")
        label, params, valid, test, _ = PRESS_WOLF_ROWS[r]
        t.add(model=label, params=s["parameters"], epochs=s["epochs"], train_ppl=s["final"]["train_ppl"],
              valid_ppl=s["final"]["valid_ppl"], test_ppl=e["perplexity"], minutes=s["seconds"] / 60,
              paper_params_M=params, paper_valid=valid, paper_test=test)
    notes = ["2 x 200 LSTM, 200-d embeddings, no dropout, U(-0.1, 0.1), batch 20, BPTT 20, SGD 1.0 (--lr 20 on groc's "
             "per-token mean loss), x0.5 after every epoch from the 6th, 13 epochs, clip 5 (--clip 0.25); PR: "
             "projection_reg 1/5200, their l2_loss(P)/(6.5 B) on a loss summed over T steps.",
             "valid: the last epoch's, 20 streams; test: the last epoch's model on one stream (as the reference code).",
             "Published: the small model's " + PRESS_WOLF_ROWS["untied"][4] + "; the WT and PR rows of Press & Wolf's "
             "Table 6 are an image in our copy of the paper, so only the direction (each below untied, WT + PR "
             "lowest) and the parameter counts of its text are compared."]
    t.write(out, notes=notes)


REPORTS = {f.__name__.replace("_", "-"): f for f in (table1, table2, gpu_table2, table3, table4, table5, table10, figure3, figure6,
                                                       check_open_vocab, check_wikitext2_caches, grid_best, quickstart, converge,
                                                       press_wolf, table2_cpu)}
_OPTION_TYPES = {Path: Path, str: str, int: int, list[str]: str.split}  # a list: one space-separated value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="recipes/lib/tables.py", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="report", required=True, metavar="REPORT")
    for name, function in REPORTS.items():
        sub = commands.add_parser(name, help=function.__doc__.split("\n")[0], description=function.__doc__)
        for param, kind in typing.get_type_hints(function).items():
            if param != "return":
                sub.add_argument(f"--{param.replace('_', '-')}", dest=param, type=_OPTION_TYPES[kind], required=True)
    args = vars(parser.parse_args(argv))
    REPORTS[args.pop("report")](**args)


if __name__ == "__main__":
    main()
