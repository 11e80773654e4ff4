"""The test cases of this recipe's report (recipes/lib/made_up.py says how they are used): each
builds, in the current directory, the outputs the report reads, then runs the report's command line.
CASES: name -> (builder, its keyword arguments, the report's command line); paths are relative."""

from pathlib import Path

from made_up import lexicon, write_json


def build_table1(rng):
    for ds, vocab, tokens in (("ptb", 9_999, 887_521), ("wt2", 33_278, 2_088_628)):
        write_json(Path(f"work/{ds}/manifest.json"), {"vocab_size": vocab, "splits": {"train": {"tokens": tokens}}})
        lexicon(Path(f"work/{ds}.lexicon.parquet"), rng.random(), rng.random())


CASES = {
    "table1": (build_table1, {}, ["table1", "--out=out", "--work=work"]),
}
