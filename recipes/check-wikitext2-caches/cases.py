"""The test cases of this recipe's report (recipes/lib/made_up.py says how they are used): each
builds, in the current directory, the outputs the report reads, then runs the report's command line.
CASES: name -> (builder, its keyword arguments, the report's command line); paths are relative."""

from pathlib import Path

from made_up import ppl, write_json


def build_check_wikitext2_caches(rng):
    write_json(Path("out/local-grid.json"), {"model_perplexity": ppl(rng),
                                             "best": {"theta": 0.3, "cache_weight": 0.1, "perplexity": ppl(rng)}})
    write_json(Path("out/unbounded-grid.json"), {"model_perplexity": ppl(rng), "best": {
        "knn": 1024, "bandwidth_scale": 0.5, "cache_weight": 0.2, "perplexity": ppl(rng)}})
    for name in ("static", "local", "unbounded"):
        write_json(Path(f"out/test-{name}.json"), {"perplexity": ppl(rng)})


CASES = {
    "check-wikitext2-caches": (build_check_wikitext2_caches, {}, ["check-wikitext2-caches", "--out=out"]),
    "grid-best": (build_check_wikitext2_caches, {}, ["grid-best", "--grid=out/unbounded-grid.json", "--key=bandwidth_scale"]),
}
