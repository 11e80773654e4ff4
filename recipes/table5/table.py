"""Table 5 (and Table 6's test sets, Figures 4-5's finetuning curves) in miniature (recipes/table5/run.sh)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from groc_cli import plots

from report import Table, load, report


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


@report
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
