#!/usr/bin/env bash
# Table 1: dataset statistics (|V|, training tokens) and WordNet coverage of the training
# vocabulary (relations, definitions) for PTB and WikiText-2.
#   bash recipes/table1.sh            (DATA=../shared/data RESULTS=results; no training, ~1 minute)
# SCALE does not change this table.
NAME=table1
source "$(dirname "$0")/lib/common.sh"
ptb
wikitext2
python - "$OUT" "$WORK" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, "recipes/lib")
from report import Table, load
from groc_cli.artifacts import read_metadata

out, work = map(Path, sys.argv[1:])
paper = {"ptb": ("penn", 10_000, 929_000, 78, 86), "wt2": ("wikitext2", 33_000, 2_000_000, 73, 76)}
t = Table("table1", "Table 1: dataset statistics and WordNet coverage (ours beside the paper's)",
          ["dataset", "genre", "vocab", "train_tokens", "relations_cov", "definitions_cov",
           "paper_vocab", "paper_tokens", "paper_relations_cov", "paper_definitions_cov"])
for key, genre in (("ptb", "news"), ("wt2", "Wikipedia")):
    m = load(work / key / "manifest.json")
    cov = read_metadata(work / f"{key}.lexicon.parquet")["coverage"]
    name, pv, pt, pr, pd = paper[key]
    t.add(dataset=name, genre=genre, vocab=m["vocab_size"], train_tokens=m["splits"]["train"]["tokens"],
          relations_cov=round(100 * cov["relations_coverage"], 1), definitions_cov=round(100 * cov["definition_coverage"], 1),
          paper_vocab=pv, paper_tokens=pt, paper_relations_cov=pr, paper_definitions_cov=pd)
t.write(out, notes=["Coverage: % of the training vocabulary with at least one WordNet relation (synonym or hyponym, "
                    "single words) / a definition; see docs/lexicon.md for why PTB and WikiText-2 differ from the paper."])
PY
