"""The test cases of this recipe's report (recipes/lib/made_up.py says how they are used): each
builds, in the current directory, the outputs the report reads, then runs the report's command line.
CASES: name -> (builder, its keyword arguments, the report's command line); paths are relative."""

from pathlib import Path

from made_up import ppl, write_json


def build_figure6(rng):
    for fig in ("figure6", "figure7"):
        grid = [{"theta": t, "cache_weight": w, "perplexity": ppl(rng)} for t in (0, 0.5, 1) for w in (0.034, 0.1, 0.167)]
        write_json(Path(f"out/{fig}-grid.json"),
                   {"grid": grid, "best": min(grid, key=lambda r: r["perplexity"]), "model_perplexity": ppl(rng)})


CASES = {
    "figure6": (build_figure6, {}, ["figure6", "--out=out", "--scale=small"]),
}
