"""The lexicon stage: WordNet relations and definitions per word -> a lexicon table (Parquet).

``run_lexicon(LexiconSettings(...), output, vocab=[...])`` is ``groc lexicon``; the command parses
its flags into these settings and prints the record this returns.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

import pyarrow as pa

from ..artifacts.atomic import atomic_path
from ..artifacts.io import provenance, write_parquet
from ..artifacts.locks import claim_output
from ..console import log, progress
from ..text.dataset import vocab_for_lexicon
from .extract import LexiconSettings, all_single_word_lemmas, build_entries, coverage, keep_fraction
from .wordnet import open_wordnet


def run_lexicon(settings: LexiconSettings, output: Path, vocab: Sequence[Path] | None = None,
                force: bool = False) -> dict:
    """Write the lexicon table ``output`` for the words of ``vocab`` (dataset directories,
    vocab.parquet files or word lists, combined; None: every single-word WordNet lemma); return
    the record (output, words, seconds and the coverage). A summary line goes to stderr."""
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
        source = open_wordnet(settings.wordnet)
        log(f"WordNet {source.version} from {source.description}")
        if words is None:
            words = report_on = all_single_word_lemmas(source.reader)
        with progress("lexicon", total=len(words), unit="words") as advance:
            entries = build_entries(source.reader, words, settings, jobs=settings.jobs, progress=advance)
        if settings.keep_fraction < 1.0:
            entries = keep_fraction(entries, settings.keep_fraction, settings.seed)
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
            arguments={"vocab": [str(v) for v in vocab] if vocab else None, **settings.arguments()},
            coverage=cov,
        )
        with atomic_path(output) as tmp:
            write_parquet(table, tmp, meta)
        seconds = time.perf_counter() - start
        log(
            f"wrote {output}: {len(entries):,} words; of the {cov['vocab_size']:,}-word vocabulary, relations for "
            f"{100 * cov['relations_coverage']:.1f}% and definitions for {100 * cov['definition_coverage']:.1f}% ({seconds:.1f}s)"
        )
    return {"output": str(output), "words": len(entries), "seconds": round(seconds, 2), **cov}
