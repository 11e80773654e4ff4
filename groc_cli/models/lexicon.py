"""The part of WordNet that GroC needs: relation words and definition words per word."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Lexicon:
    """Relations (synonyms/hyponyms) and definition tokens keyed by word string."""

    relations: dict[str, list[str]] = field(default_factory=dict)
    definitions: dict[str, list[str]] = field(default_factory=dict)

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
    def from_table(cls, table) -> "Lexicon":
        """A pyarrow table with columns word, relations and definition."""
        words = table.column("word").to_pylist()
        rels = table.column("relations").to_pylist()
        defs = table.column("definition").to_pylist()
        lex = cls()
        for w, r, d in zip(words, rels, defs):
            if w is None:
                continue
            if r:
                lex.relations[w] = [x for x in r if x]
            if d:
                lex.definitions[w] = [x for x in d if x]
        return lex

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
