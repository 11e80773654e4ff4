"""Figures 6-7: local-cache grids as heatmaps and their best cells (recipes/figure6/run.sh)."""

from __future__ import annotations

from pathlib import Path

from groc_cli import plots

from report import Table, load, report


@report
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
