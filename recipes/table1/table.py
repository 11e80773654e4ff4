"""Table 1: dataset statistics and WordNet coverage, beside the paper's (recipes/table1/run.sh)."""

from __future__ import annotations

from pathlib import Path

from report import Table, coverage, load, report


# Table 1: (name, |V|, training tokens, relations %, definitions %) per dataset.
PAPER_TABLE1 = {"ptb": ("penn", 10_000, 929_000, 78, 86), "wt2": ("wikitext2", 33_000, 2_000_000, 73, 76)}


@report
def table1(out: Path, work: Path) -> None:
    """Table 1: dataset statistics and WordNet coverage (table1.sh)."""
    t = Table("table1", "Table 1: dataset statistics and WordNet coverage (ours beside the paper's)",
              ["dataset", "genre", "vocab", "train_tokens", "relations_cov", "definitions_cov",
               "paper_vocab", "paper_tokens", "paper_relations_cov", "paper_definitions_cov"])
    for key, genre in (("ptb", "news"), ("wt2", "Wikipedia")):
        m = load(work / key / "manifest.json")
        name, pv, pt, pr, pd = PAPER_TABLE1[key]
        t.add(dataset=name, genre=genre, vocab=m["vocab_size"], train_tokens=m["splits"]["train"]["tokens"],
              **coverage(work / f"{key}.lexicon.parquet"),
              paper_vocab=pv, paper_tokens=pt, paper_relations_cov=pr, paper_definitions_cov=pd)
    t.write(out, notes=["Coverage: % of the training vocabulary with at least one WordNet relation (synonym or hyponym, "
                        "single words) / a definition; see docs/lexicon.md for why PTB and WikiText-2 differ from the paper."])
