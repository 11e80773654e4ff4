"""The test cases of this recipe's report (recipes/lib/made_up.py says how they are used): each
builds, in the current directory, the outputs the report reads, then runs the report's command line.
CASES: name -> (builder, its keyword arguments, the report's command line); paths are relative."""

from pathlib import Path

from made_up import write_json


def build_figure3(rng, datasets=("ptb", "wt2"), baselines=("tied", "adaptive")):
    for ds in datasets:
        for base in baselines:
            write_json(Path(f"out/{ds}-{base}-vs-groc.json"),
                       {"bins": [{"bin": b, "median_diff": rng.uniform(-0.5, 0.5)} for b in ("1-10", "10-100", ">100")],
                       "overall": {"median_diff": rng.uniform(-0.2, 0.2)}})


CASES = {
    "figure3": (build_figure3, {}, ["figure3", "--out=out", "--scale=small", "--datasets=ptb wt2",
                                    "--baselines=tied adaptive"]),
}
