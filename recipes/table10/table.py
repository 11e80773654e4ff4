"""Table 10: training step time per output layer (recipes/table10/run.sh)."""

from __future__ import annotations

from pathlib import Path

from report import DATASET_NAMES, Table, load, report


# Table 10: seconds per epoch on penn and wikitext-2 (GeForce RTX 2080 Ti). The paper's
# "- p% updates" rows are listed as printed (their time falls as p rises, so p there reads
# as the share of *frozen* steps; we map row "- p% updates" to --update-prob 1 - p).
PAPER_TABLE10 = {
    "lookup": (19.5, 59.5), "convolutional": (201.2, 1301.9), "tied": (18.6, 53.6), "bilinear": (35.0, 120.1),
    "deep-residual": (61.2, 114.5), "adaptive": (27.2, 77.6), "groc": (259.8, 1813.5),
    "groc@update_prob=0.9": (236.3, 1627.7), "groc@update_prob=0.7": (173.5, 1262.9),
    "groc@update_prob=0.5": (131.5, 936.4), "groc@update_prob=0.3": (95.2, 669.0), "groc@update_prob=0.1": (46.0, 299.0)}


@report
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
