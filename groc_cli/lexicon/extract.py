"""Relations and definitions per word, from WordNet (GroC paper 3.1 and appendix B.1).

Choices (documented in docs/lexicon.md):
  * Inflected forms: ``wordnet.synsets(word)`` applies morphy over every part of speech, so
    "dogs" reaches dog.n.01 and "running" reaches run.n.05; lookups are lowercased by
    WordNet itself, so cased vocabularies (WikiText-2) match too.
  * Senses: WordNet lists senses most frequent first (by tagged-corpus counts); the
    definition is the first sense's gloss. Relations are collected sense by sense in that
    order, each sense giving its synonyms (its other lemmas, WordNet's order) and then the
    lemmas of its hyponyms (hyponym synsets sorted by name: NLTK returns them in hash
    order), until ``max_relations`` distinct words are found.
  * Multiword lemmas (``new_york``, ``domestic_dog``) are never relation words: a
    relation must be one token of the corpora. Words that are themselves multiword
    lemmas are only listed when the vocabulary contains them (they cannot be corpus
    tokens after Moses tokenization otherwise).
  * Definitions are Moses-tokenized (no XML escaping) and lowercased like the corpora,
    then cut to ``max_definition`` tokens.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Iterable

from ..models.lexicon import MAX_ENTRIES, PAPER_DEFINITION_WORDS, PAPER_RELATIONS
from ..settings import SEED_MAX, check_fields, setting
from ..text.tokenizer import TokenizeOptions, tokenize_lines

_MARKUP = re.compile(r"^<.*>$")


@dataclass(frozen=True)
class LexiconSettings:
    """What ``groc lexicon`` extracts, and from which WordNet; the command-line options are generated
    from these fields, and the table's provenance records them (``arguments``, less ``wordnet`` and
    ``jobs``: the WordNet read is recorded by its version and place)."""

    wordnet: str = setting("auto", "'auto' (NLTK's data, then Debian's /usr/share/wordnet) or a directory with WordNet's files.")
    max_relations: int = setting(PAPER_RELATIONS, f"Most synonyms/hyponyms per word (paper B.1: {PAPER_RELATIONS}).",
                                 low=0, high=MAX_ENTRIES)
    max_definition: int = setting(PAPER_DEFINITION_WORDS, "Most definition tokens per word (paper B.1: "
                                  f"{PAPER_DEFINITION_WORDS}).", low=0, high=MAX_ENTRIES)
    lower: bool = setting(True, "Lowercase relation and definition words, like the corpora.", negation="keep-case")
    keep_fraction: float = setting(1.0, "Keep this seeded random share of covered words (paper Table 4).", low=0, high=1)
    seed: int = setting(1, "Seed for `keep_fraction`.", low=0, high=SEED_MAX)
    jobs: int = setting(1, "Processes for tokenizing definitions.", short="-j", low=1)

    def __post_init__(self) -> None:
        check_fields(self)

    def arguments(self) -> dict:
        """The settings the table's provenance records (after the `vocab` it was built for)."""
        return {"max_relations": self.max_relations, "max_definition": self.max_definition, "lower": self.lower,
                "keep_fraction": self.keep_fraction, "seed": self.seed}


#: The extraction's options are the stage's settings (``build_entries`` reads max_relations,
#: max_definition and lower).
LexiconOptions = LexiconSettings


@dataclass
class Entry:
    word: str
    synset: str | None
    relations: list[str]
    definition: list[str]


def _clean(lemma: str, lower: bool) -> str | None:
    if "_" in lemma or " " in lemma:
        return None
    return lemma.lower() if lower else lemma


def relations_for(wordnet, synsets, word: str, options: LexiconSettings) -> list[str]:
    # The word's own base forms ("dog" for "dogs") add nothing beyond its surface form.
    own = {word.lower()} | {base for pos in "nvar" if (base := wordnet.morphy(word.lower(), pos))}
    out: list[str] = []
    seen: set[str] = set()
    for synset in synsets:
        candidates = list(synset.lemma_names())
        for hyponym in sorted(synset.hyponyms() + synset.instance_hyponyms(), key=lambda s: s.name()):
            candidates.extend(hyponym.lemma_names())
        for lemma in candidates:
            clean = _clean(lemma, options.lower)
            if clean is None or clean.lower() in own or clean in seen:
                continue
            seen.add(clean)
            out.append(clean)
            if len(out) >= options.max_relations:
                return out
    return out


def build_entries(wordnet, words: Iterable[str], options: LexiconSettings, jobs: int = 1, progress=None) -> list[Entry]:
    """One entry per word (in the given order); words WordNet lacks get empty lists."""
    entries: list[Entry] = []
    glosses: dict[str, str] = {}
    for word in words:
        synsets = [] if _MARKUP.match(word) else wordnet.synsets(word)
        if not synsets:
            entries.append(Entry(word, None, [], []))
        else:
            first = synsets[0]
            glosses.setdefault(first.name(), first.definition())
            entries.append(Entry(word, first.name(), relations_for(wordnet, synsets, word, options), []))
        if progress is not None:
            progress(1)
    names = sorted(glosses)
    tokenized = tokenize_lines((glosses[n] for n in names), TokenizeOptions(lower=options.lower), jobs=jobs)
    definitions = {n: t.split()[: options.max_definition] for n, t in zip(names, tokenized)}
    for entry in entries:
        if entry.synset is not None:
            entry.definition = definitions[entry.synset]
    return entries


def all_single_word_lemmas(wordnet) -> list[str]:
    return sorted(name for name in wordnet.all_lemma_names() if "_" not in name)


def keep_fraction(entries: list[Entry], fraction: float, seed: int) -> list[Entry]:
    """Empty the entries of a seeded random (1 - fraction) share of the covered words.

    Rows stay, so the table still lists the whole vocabulary it was built for."""
    covered = [i for i, e in enumerate(entries) if e.relations or e.definition]
    emptied = set(covered) - set(random.Random(seed).sample(covered, round(len(covered) * fraction)))
    return [Entry(e.word, None, [], []) if i in emptied else e for i, e in enumerate(entries)]


def coverage(entries: Iterable[Entry], vocab: list[str]) -> dict:
    by_word = {e.word: e for e in entries}
    n = len(vocab)
    rel = sum(1 for w in vocab if w in by_word and by_word[w].relations)
    dfn = sum(1 for w in vocab if w in by_word and by_word[w].definition)
    return {
        "vocab_size": n,
        "with_relations": rel,
        "with_definition": dfn,
        "relations_coverage": rel / n if n else 0.0,
        "definition_coverage": dfn / n if n else 0.0,
    }
