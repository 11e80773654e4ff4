"""The test cases of this recipe's report (recipes/lib/made_up.py says how they are used): each
builds, in the current directory, the outputs the report reads, then runs the report's command line.
CASES: name -> (builder, its keyword arguments, the report's command line); paths are relative."""

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from made_up import ppl, write_json
from report import recipe


def build_table5(rng, scale="small", suffix="-min2", tests=("news13", "news14", "web", "wiki", "books")):
    for kind in ("tied", "groc"):
        for d in tests:
            for setting, _ in recipe("table5").TABLE5_SETTINGS:
                write_json(Path(f"work/evals/{scale}/table5{suffix}-{kind}-{d}-{setting}.json"),
                           {"perplexity": ppl(rng) * 10, "tokens": rng.randrange(5_000, 300_000),
                           "vocab_size": rng.randrange(5_000, 60_000), "new_words": rng.randrange(100, 20_000),
                           "oov_rate": rng.random() / 5})
        for ft in recipe("table5").TABLE5_FINETUNING:
            run = Path(f"work/runs/{scale}/reuters{suffix}-{kind}-ft-{ft}")
            run.mkdir(parents=True)
            pq.write_table(pa.table({"epoch": [1, 2, 3], "train_loss": [rng.uniform(4, 7) for _ in range(3)],
                                     "valid_loss": [rng.uniform(4, 7) for _ in range(3)]}), run / "metrics.parquet")


CASES = {
    "table5": (build_table5, {}, ["table5", "--out=out", "--work=work", "--scale=small",
                                  "--tests=news13 news14 web wiki books", "--reuters-suffix=-min2", "--reuters-min-count=2"]),
    "table5-min1-paper": (build_table5, {"scale": "paper", "suffix": "", "tests": ["news14", "web"]},
                          ["table5", "--out=out", "--work=work", "--scale=paper", "--tests=news14 web",
                           "--reuters-suffix=", "--reuters-min-count=1"]),
}
