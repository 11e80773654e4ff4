"""Table 2: perplexity and |Θ| per output layer, beside the paper's (recipes/table2/run.sh). Its paper
numbers serve gpu-table2 and table2-cpu too (``recipe("table2").PAPER_TABLE2``).
"""

from __future__ import annotations

from pathlib import Path

from report import DATASET_NAMES, OUTPUT_LAYERS, Table, load, report, summary


# Table 2: (|Θ| in millions, test perplexity) for penn, wikitext2
PAPER_TABLE2 = {
    "lookup": ((13, 90.8), (23, 108.3)), "convolutional": ((13, 101.6), (23, 116.6)), "tied": ((10, 86.2), (15, 97.3)),
    "bilinear": ((10, 83.7), (15, 95.9)), "deep-residual": ((10, 80.5), (15, 94.7)), "adaptive": ((8, 79.3), (9, 90.7)),
    "groc": ((9, 69.5), (9, 82.5))}


@report
def table2(out: Path, work: Path, scale: str, datasets: list[str]) -> None:
    """Table 2: perplexity and |Θ| per output layer (table2.sh)."""
    t = Table("table2", f"Table 2: perplexity per output layer, closed vocabulary (SCALE={scale})",
              ["dataset", "output", "params_M", "valid_ppl", "test_ppl", "tokens_per_s", "paper_params_M", "paper_test_ppl"],
              {"params_M": ".2f", "tokens_per_s": ".0f"})
    for ds in datasets:
        for kind in OUTPUT_LAYERS:
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
