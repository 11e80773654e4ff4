"""The part of WordNet that GroC needs: relation words and definition words per word."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

#: Most relations or definition words one word may list ('groc lexicon --max-relations/--max-definition').
MAX_ENTRIES = 1000
#: Relations and definition words per word in the paper (B.1: 3 and 10): what 'groc lexicon' lists
#: (``LexiconSettings``) and a GroC model reads (``GroCConfig``) unless told otherwise.
PAPER_RELATIONS = 3
PAPER_DEFINITION_WORDS = 10


@dataclass
class Lexicon:
    """Relations (synonyms/hyponyms) and definition tokens keyed by word string."""

    relations: dict[str, list[str]] = field(default_factory=dict)
    definitions: dict[str, list[str]] = field(default_factory=dict)
    #: Every word the table lists (with or without entries).
    words: set[str] = field(default_factory=set)
    #: The provenance of the table read ('groc lexicon''s arguments), where read from a file.
    meta: dict = field(default_factory=dict)

    @classmethod
    def from_parquet(cls, path: str | Path) -> "Lexicon":
        """Read a table with columns word (string), relations and definition (list<string>)."""
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        missing = {"word", "relations", "definition"} - set(table.column_names)
        if missing:
            raise ValueError(f"{path}: lexicon table lacks column(s) {', '.join(sorted(missing))}")
        return cls.from_table(table)

    @classmethod
    def from_table(cls, table, max_relations: int | None = None, max_definition: int | None = None) -> "Lexicon":
        """A pyarrow table with columns word, relations and definition. A word listed twice with other
        entries, or with more relations or definition words than ``max_*`` (what 'groc lexicon'
        recorded; MAX_ENTRIES where nothing is recorded) is a ValueError: which entry a model
        reads would depend on the row order, and a list's length on nothing groc bounds."""
        limits = {"relations": MAX_ENTRIES if max_relations is None else max_relations,
                  "definition words": MAX_ENTRIES if max_definition is None else max_definition}
        words = table.column("word").to_pylist()
        rels = table.column("relations").to_pylist()
        defs = table.column("definition").to_pylist()
        lex = cls()
        seen: dict[str, tuple] = {}
        for w, r, d in zip(words, rels, defs):
            if w is None:
                continue
            entry = (tuple(r or ()), tuple(d or ()))
            if seen.setdefault(w, entry) != entry:
                raise ValueError(f"lists the word {w!r} twice, with different relations or definitions")
            for what, values in (("relations", r), ("definition words", d)):
                if values and len(values) > limits[what]:
                    raise ValueError(f"lists {len(values):,} {what} for {w!r}, more than the {limits[what]:,} "
                                     "'groc lexicon' writes")
            if r:
                lex.relations[w] = [x for x in r if x]
            if d:
                lex.definitions[w] = [x for x in d if x]
        lex.words = set(seen)
        return lex

    def lists(self, word: str) -> bool:
        """Whether the table has a row for ``word`` or, as ``lookup`` falls back, its lowercased form
        (a row with no entries counts: WordNet has nothing for that word)."""
        return word in self.words or word.lower() in self.words

    def lookup(self, word: str, table: dict[str, list[str]], limit: int) -> list[str]:
        # Fall back to the lowercased form: WordNet is lowercase, WikiText is cased.
        entry = table.get(word)
        if entry is None and word.lower() != word:
            entry = table.get(word.lower())
        return list(entry[:limit]) if entry else []

    def relations_of(self, word: str, limit: int = 3) -> list[str]:
        return self.lookup(word, self.relations, limit)

    def definition_of(self, word: str, limit: int = 10) -> list[str]:
        return self.lookup(word, self.definitions, limit)


def unlisted_warning(layer, words: list[str], what: str, run_dir) -> str | None:
    """The one-line warning for the words of ``words`` (those of ``what``, e.g. "the evaluation vocabulary")
    that output ``layer`` of run ``run_dir`` finds ``unlisted``, with the command that builds a table over the
    run's words and a dataset's; None when every word has a row."""
    unlisted = layer.unlisted(words)
    if not unlisted:
        return None
    examples = ", ".join(repr(w) for w in unlisted[:3])
    return (f"warning: {len(unlisted):,} of the {len(words):,} words of {what} have no row in the lexicon (e.g. "
            f"{examples}): GroC composes them from their characters alone; give `lexicon` a table that lists them "
            f"('groc lexicon --vocab {run_dir} --vocab DATASET -o FILE')")
