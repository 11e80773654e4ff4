"""The test cases of this recipe's report (recipes/lib/made_up.py says how they are used): each
builds, in the current directory, the outputs the report reads, then runs the report's command line.
CASES: name -> (builder, its keyword arguments, the report's command line); paths are relative."""

from pathlib import Path

from made_up import lexicon, ppl, write_json


def build_table4(rng, scale="small", fractions=("0", "0.2", "0.5", "1"), train_fractions=("0", "1")):
    write_json(Path(f"work/evals/{scale}/ptb-groc-d0-surf.test.json"), {"perplexity": ppl(rng)})
    for f in fractions:
        lexicon(Path(f"work/ptb.lexicon.keep{f}.parquet"), rng.random() * float(f), rng.random() * float(f))
        write_json(Path(f"work/evals/{scale}/table4-inference-{f}.json"), {"perplexity": ppl(rng)})
    for f in train_fractions:
        write_json(Path(f"work/evals/{scale}/table4-train-{f}.json"), {"perplexity": ppl(rng)})


CASES = {
    "table4": (build_table4, {}, ["table4", "--out=out", "--work=work", "--scale=small", "--fractions=0 0.2 0.5 1",
                                  "--train-fractions=0 1"]),
    "table4-no-training": (build_table4, {"scale": "paper", "fractions": ["0.4"], "train_fractions": []},
                           ["table4", "--out=out", "--work=work", "--scale=paper", "--fractions=0.4", "--train-fractions="]),
}
