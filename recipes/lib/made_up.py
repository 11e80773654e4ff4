"""Made-up outputs for the recipes' report tests (tests/recipes/test_report.py): what a recipe's
stages would have written, with values that exercise a report's formatting (thousands separators,
rounding, missing and non-finite values). A recipe's own cases.py builds its outputs with these
helpers and declares its cases (``CASES``); the test finds every recipes/*/cases.py, so adding a
recipe, with its cases, edits no test file (docs/extending.md, "Adding a recipe")."""

import json
import random
from pathlib import Path

import pyarrow as pa

from groc_cli.artifacts.io import write_parquet



def write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def lexicon(path: Path, relations: float, definitions: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_parquet(pa.table({"word": ["a"]}), path,
                  {"coverage": {"relations_coverage": relations, "definition_coverage": definitions}})


def ppl(rng: random.Random) -> float:
    return rng.uniform(60, 900)


def build_runs(rng, scale, datasets, names, best_valid=True):
    for ds in datasets:
        for i, name in enumerate(names):
            s = {"parameters": rng.randrange(1_000_000, 30_000_000),
                 "final": {"valid_ppl": ppl(rng), "tokens_per_s": rng.uniform(500, 20_000)}}
            if best_valid or i % 2:  # table2 falls back to final.valid_ppl without best_valid_ppl
                s["best_valid_ppl"] = ppl(rng)
            write_json(Path(f"work/runs/{scale}/{ds}-{name}/summary.json"), s)
            write_json(Path(f"work/evals/{scale}/{ds}-{name}.test.json"), {"perplexity": ppl(rng)})
