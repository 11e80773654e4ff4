"""Table 4: lexicon coverage and GroC's PTB test perplexity (recipes/table4/run.sh)."""

from __future__ import annotations

from pathlib import Path

from report import Table, coverage, load, report


# Table 4 (penn test): coverage 0,16,32,48,64,82% = keep 0,0.2,...,1 of the covered words
PAPER_TABLE4_INFERENCE = {0.0: 187.8, 0.2: 159.3, 0.4: 128.5, 0.6: 102.6, 0.8: 83.5, 1.0: 69.5}
PAPER_TABLE4_TRAIN = {0.0: 72.4, 0.2: 70.0, 0.4: 70.4, 0.6: 69.6, 0.8: 70.7, 1.0: 69.5}


@report
def table4(out: Path, work: Path, scale: str, fractions: list[str], train_fractions: list[str]) -> None:
    """Table 4: GroC's PTB test perplexity by lexicon coverage (table4.sh). Fractions are as the
    recipe names its files (keep0.2, not keep0.20)."""
    t = Table("table4", f"Table 4: lexicon coverage and GroC's PTB test perplexity (SCALE={scale})",
              ["keep_fraction", "relations_cov", "definitions_cov", "inference_ppl", "train_ppl",
               "paper_inference_ppl", "paper_train_ppl"])
    surf = load(work / "evals" / scale / "ptb-groc-d0-surf.test.json")["perplexity"]
    t.add(keep_fraction="surf.", inference_ppl=surf, paper_inference_ppl=73.1)
    for f in fractions:
        cov = coverage(work / f"ptb.lexicon.keep{f}.parquet")
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
