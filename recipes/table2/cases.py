"""The test cases of this recipe's report (recipes/lib/made_up.py says how they are used): each
builds, in the current directory, the outputs the report reads, then runs the report's command line.
CASES: name -> (builder, its keyword arguments, the report's command line); paths are relative."""

from made_up import build_runs
from report import recipe


def build_table2(rng, scale="small", datasets=("ptb", "wt2")):
    build_runs(rng, scale, datasets, recipe("table2").PAPER_TABLE2, best_valid=False)


CASES = {
    "table2": (build_table2, {}, ["table2", "--out=out", "--work=work", "--scale=small", "--datasets=ptb wt2"]),
    "table2-paper": (build_table2, {"scale": "paper", "datasets": ["wt2"]},
                     ["table2", "--out=out", "--work=work", "--scale=paper", "--datasets=wt2"]),
}
