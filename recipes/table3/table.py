"""Table 3: GroC ablations, beside the paper's (recipes/table3/run.sh)."""

from __future__ import annotations

from pathlib import Path

from report import DATASET_NAMES, Table, load, report, summary


# Table 3: (dev, test) on penn and wikitext2
PAPER_TABLE3 = {"groc": ((75.0, 71.4), (87.0, 82.5)), "groc-norel": ((77.1, 72.7), (90.2, 85.3)),
                "groc-nodef": ((75.6, 72.0), (88.6, 84.3)), "groc-surf": ((79.8, 75.8), (94.3, 89.8)),
                "groc-d0": ((72.5, 69.5), (88.7, 84.1)), "groc-d0-norel": ((74.2, 70.8), (93.0, 88.0)),
                "groc-d0-nodef": ((74.4, 71.1), (87.6, 83.1)), "groc-d0-surf": ((76.3, 73.2), (94.5, 89.5))}
TABLE3_LABELS = {"groc": "GroC + out", "groc-norel": "  - relations", "groc-nodef": "  - definitions",
                 "groc-surf": "  - both", "groc-d0": "GroC", "groc-d0-norel": "  - relations",
                 "groc-d0-nodef": "  - definitions", "groc-d0-surf": "  - both"}


@report
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
