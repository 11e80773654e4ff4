"""WikiText-2 with the local and unbounded caches tuned on valid (recipes/check-wikitext2-caches/run.sh),
and grid-best, which the script asks for each tuned setting.
"""

from __future__ import annotations

from pathlib import Path

from report import Table, load, report


@report
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


@report
def grid_best(grid: Path, key: str) -> None:
    """Print one setting of the best cell of a groc eval --grid summary (check-wikitext2-caches.sh)."""
    print(load(grid)["best"][key])
