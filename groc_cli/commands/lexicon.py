"""groc lexicon: WordNet relations and definitions per word -> lexicon.parquet."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import pyarrow as pa
import typer

from ..artifacts import atomic_path, claim_output, provenance, write_parquet
from ..console import emit_json, log, progress
from ..lexicon.extract import LexiconOptions, all_single_word_lemmas, build_entries, coverage, keep_fraction
from ..lexicon.wordnet import open_wordnet
from ..text.dataset import vocab_for_lexicon
from ..models.lexicon import MAX_ENTRIES
from . import SUMMARIES

EPILOG = """[bold]Examples[/bold]

  groc lexicon --vocab data/ptb -o ptb.lexicon.parquet

  groc lexicon -o wordnet.parquet                       (every single-word WordNet lemma)

  groc lexicon --vocab data/ptb --keep-fraction 0.5 --seed 1 -o ptb.half.parquet
"""


def lexicon(
    output: Path = typer.Option(..., "-o", "--output", help="Lexicon table to write (Parquet)."),
    vocab: Optional[list[Path]] = typer.Option(None, "--vocab", help="Dataset directory (all its types), vocab.parquet or word list; repeat to combine; default: every WordNet lemma."),
    wordnet: str = typer.Option("auto", "--wordnet", help="'auto' (NLTK's data, then Debian's /usr/share/wordnet) or a directory with WordNet's files."),
    max_relations: int = typer.Option(3, "--max-relations", min=0, max=MAX_ENTRIES, help="Most synonyms/hyponyms per word (paper B.1: 3)."),
    max_definition: int = typer.Option(10, "--max-definition", min=0, max=MAX_ENTRIES, help="Most definition tokens per word (paper B.1: 10)."),
    lower: bool = typer.Option(True, "--lower/--keep-case", help="Lowercase relation and definition words, like the corpora."),
    fraction: float = typer.Option(1.0, "--keep-fraction", min=0.0, max=1.0, help="Keep this seeded random share of covered words (paper Table 4)."),
    seed: int = typer.Option(1, "--seed", help="Seed for --keep-fraction."),
    jobs: int = typer.Option(1, "-j", "--jobs", min=1, help="Processes for tokenizing definitions."),
    force: bool = typer.Option(False, "--force", help="Replace OUTPUT if it exists."),
    json_out: bool = typer.Option(False, "--json", help="Print coverage and counts as JSON on stdout."),
) -> None:
    """Extract each word's WordNet relations (synonyms, hyponyms) and definition into a Parquet table."""
    with claim_output(output, force, kind="lexicon table", inputs=tuple(vocab or ())):
        words, report_on = None, None
        if vocab:
            words, report_on = [], []
            for item in vocab:
                listed, training = vocab_for_lexicon(item)
                words.extend(listed)
                report_on.extend(training)
            words, report_on = list(dict.fromkeys(words)), list(dict.fromkeys(report_on))
        start = time.perf_counter()
        source = open_wordnet(wordnet)
        log(f"WordNet {source.version} from {source.description}")
        if words is None:
            words = report_on = all_single_word_lemmas(source.reader)
        options = LexiconOptions(max_relations=max_relations, max_definition=max_definition, lower=lower)
        with progress("lexicon", total=len(words), unit="words") as advance:
            entries = build_entries(source.reader, words, options, jobs=jobs, progress=advance)
        if fraction < 1.0:
            entries = keep_fraction(entries, fraction, seed)
        cov = coverage(entries, report_on)
        table = pa.table(
            {
                "word": pa.array([e.word for e in entries], type=pa.string()),
                "synset": pa.array([e.synset for e in entries], type=pa.string()),
                "relations": pa.array([e.relations for e in entries], type=pa.list_(pa.string())),
                "definition": pa.array([e.definition for e in entries], type=pa.list_(pa.string())),
            }
        )
        meta = provenance(
            "lexicon",
            wordnet=source.description, wordnet_version=source.version,
            arguments={"vocab": [str(v) for v in vocab] if vocab else None, "max_relations": max_relations, "max_definition": max_definition,
                       "lower": lower, "keep_fraction": fraction, "seed": seed},
            coverage=cov,
        )
        with atomic_path(output) as tmp:
            write_parquet(table, tmp, meta)
        seconds = time.perf_counter() - start
        log(
            f"wrote {output}: {len(entries):,} words; of the {cov['vocab_size']:,}-word vocabulary, relations for "
            f"{100 * cov['relations_coverage']:.1f}% and definitions for {100 * cov['definition_coverage']:.1f}% ({seconds:.1f}s)"
        )
        if json_out:
            emit_json({"output": str(output), "words": len(entries), "seconds": round(seconds, 2), **cov})


def register(app: typer.Typer) -> None:
    app.command("lexicon", epilog=EPILOG, help=SUMMARIES["lexicon"])(lexicon)
