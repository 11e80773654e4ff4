"""The test cases of this recipe's report (recipes/lib/made_up.py says how they are used): each
builds, in the current directory, the outputs the report reads, then runs the report's command line.
CASES: name -> (builder, its keyword arguments, the report's command line); paths are relative."""

from pathlib import Path

from made_up import write_json


def build_table10(rng, scale="small", datasets=("ptb", "wt2")):
    for ds in datasets:
        results = {}
        for name in ("tied", "lookup", "groc", "groc@update_prob=0.5", "groc@update_prob=0.05"):  # the last not in the paper
            results[name] = {"seconds_per_step": rng.uniform(0.01, 2), "mean_seconds_per_step": rng.uniform(0.01, 2),
                             "step_time_vs_tied": rng.uniform(0.5, 9)}
            if name != "lookup":  # a result without its parameter count reads as 0
                results[name]["parameters"] = rng.randrange(100_000, 20_000_000)
        write_json(Path(f"work/bench/{scale}/{ds}-train-throughput.json"),
                   {"settings": {"device": "cpu", "threads": 2}, "results": results})


CASES = {
    "table10": (build_table10, {}, ["table10", "--out=out", "--work=work", "--scale=small", "--datasets=ptb wt2"]),
}
