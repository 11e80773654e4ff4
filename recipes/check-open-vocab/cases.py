"""The test cases of this recipe's report (recipes/lib/made_up.py says how they are used): each
builds, in the current directory, the outputs the report reads, then runs the report's command line.
CASES: name -> (builder, its keyword arguments, the report's command line); paths are relative."""

import math
from pathlib import Path

from made_up import ppl, write_json
from report import recipe


def build_check_open_vocab(rng, domains=("news14", "wiki", "books"), non_finite=()):
    for kind in recipe("check-open-vocab").CHECK_OUTPUTS:
        for d in domains:
            for x in recipe("check-open-vocab").CHECK_CACHES:
                value = math.inf if (kind, d, x) in non_finite else ppl(rng)
                write_json(Path(f"check/evals/{kind}-{d}-{x}.json"), {"perplexity": value, "tokens": rng.randrange(9_000, 30_000),
                                                                      "oov_rate": rng.random() / 5, "new_words": rng.randrange(10, 3_000)})


CASES = {
    "check-open-vocab": (build_check_open_vocab, {}, ["check-open-vocab", "--out=out", "--check-dir=check",
                                                      "--domains=news14 wiki books"]),
    "check-open-vocab-non-finite": (build_check_open_vocab, {"non_finite": [("tied", "wiki", "local"), ("groc", "books", "none")]},
                                    ["check-open-vocab", "--out=out", "--check-dir=check", "--domains=news14 wiki books"]),
}
