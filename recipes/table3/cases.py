"""The test cases of this recipe's report (recipes/lib/made_up.py says how they are used): each
builds, in the current directory, the outputs the report reads, then runs the report's command line.
CASES: name -> (builder, its keyword arguments, the report's command line); paths are relative."""

from made_up import build_runs
from report import recipe


def build_table3(rng, scale="small", datasets=("ptb", "wt2")):
    build_runs(rng, scale, datasets, recipe("table3").PAPER_TABLE3)


CASES = {
    "table3": (build_table3, {}, ["table3", "--out=out", "--work=work", "--scale=small", "--datasets=ptb wt2"]),
}
