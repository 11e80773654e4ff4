"""The prepare stage: text files -> a dataset directory (splits as Parquet, vocabulary, manifest).

``run_prepare(PrepareSettings(...), {"train": path}, output)`` is ``groc prepare``; the command
parses its flags into these settings and prints the manifest this returns.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from ..artifacts.locks import claim_output
from ..console import log
from ..errors import GrocError, SettingError
from ..settings import check_fields, setting
from .dataset import SPLITS, count_splits, file_record, parse_budgets, write_dataset
from .io import TokenLines, check_input_file
from .tokenizer import TokenizeOptions


def _utf8_errors(value: str) -> str:
    if value not in ("strict", "replace"):
        raise ValueError(f"{value!r}: expected 'strict' or 'replace'")
    return value


def _budgets(value: str) -> str:
    parse_budgets(value)  # refused here, before any input is read
    return value


@dataclass
class PrepareSettings:
    """How ``groc prepare`` reads its text and builds the vocabulary; the command-line options are
    generated from these fields, and the manifest records them (``arguments``, less ``jobs``)."""

    tokenize: bool = setting(False, "Moses-tokenize raw text first (otherwise split on whitespace as is).",
                             negation=False)
    lower: bool = setting(False, "Lowercase while tokenizing (with `tokenize`).", negation=False)
    split: str | None = setting(None, "With only `train`: consecutive token budgets train,valid,test, e.g. 2M,2M,10M "
                                "('rest' takes the remainder).", check=_budgets)
    shuffle: bool = setting(False, "With `split`: fill the splits with whole lines taken in a random order (seeded by "
                            "`seed`) instead of consecutive blocks; each split keeps its lines in input order, and lines "
                            "past every budget are left out. The input is read once more, and memory holds about 20 "
                            "bytes a line.", negation=False)
    seed: int = setting(0, "With `shuffle`: the seed of the line order (the same seed and input give the same splits).",
                        low=0)
    drop_blank_lines: bool = setting(False, "Leave out blank lines (only whitespace), which otherwise count as lines "
                                     "(an <eos> each, with `eos`).", negation=False)
    eos: bool = setting(True, "Append an <eos> token to every line (PTB/WikiText convention).")
    min_count: int = setting(1, "Training words seen fewer times map to <unk>.", low=1)
    max_vocab: int | None = setting(None, "Keep at most this many types (incl. <unk>, <eos>); rarer map to <unk>.",
                                    low=3)
    jobs: int = setting(1, "Tokenizer processes (with `tokenize`).", short="-j", low=1)
    errors: str = setting("strict", "Invalid UTF-8: 'strict' or 'replace'.", check=_utf8_errors)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.lower and not self.tokenize:
            raise SettingError("`lower` applies while tokenizing; add `tokenize` (or lowercase with 'groc tokenize --lower')")
        if self.shuffle and self.split is None:
            raise SettingError("`shuffle` orders the lines that `split` divides; add `split` (e.g. 90K,5K,rest)")

    def arguments(self) -> dict:
        """The settings the manifest records: those its dataset depends on."""
        return {"tokenize": self.tokenize, "lower": self.lower, "split": self.split, "shuffle": self.shuffle,
                "seed": self.seed if self.shuffle else None, "drop_blank_lines": self.drop_blank_lines, "eos": self.eos,
                "min_count": self.min_count, "max_vocab": self.max_vocab, "errors": self.errors}


class WithoutBlankLines:
    """An input's lines (lists of tokens; iterable more than once, as TokenLines) without its blank ones."""

    def __init__(self, source: Iterable[list[str]]):
        self.source = source

    def __iter__(self) -> Iterator[list[str]]:
        lines = iter(self.source)
        with contextlib.closing(lines) if hasattr(lines, "close") else contextlib.nullcontext():
            for tokens in lines:
                if tokens:
                    yield tokens


def check_sources(sources: dict[str, str], settings: PrepareSettings) -> None:
    """The text of each split given (by split name; '-' is stdin): at least one, stdin once, and
    `split`'s budgets divide a training text given alone."""
    if not sources:
        raise SettingError("give at least one of `train`, `valid`, `test`")
    if sum(1 for p in sources.values() if p == "-") > 1:
        raise GrocError("only one split can be read from stdin ('-')")
    if settings.split is not None and set(sources) != {"train"}:
        raise SettingError("`split` divides the `train` file; do not combine it with `valid` or `test`")


def run_prepare(settings: PrepareSettings, sources: dict[str, str], output: Path, force: bool = False) -> dict:
    """Build the dataset directory ``output`` from ``sources`` (split name -> text file, '-' for
    stdin); return its manifest. A summary line goes to stderr."""
    check_sources(sources, settings)
    sources = {name: sources[name] for name in SPLITS if name in sources}
    budgets = parse_budgets(settings.split) if settings.split else None
    for name, path in sources.items():
        if path != "-":
            check_input_file(Path(path), f"`{name}`")
    files = tuple(path for path in sources.values() if path != "-")
    with claim_output(output, force, kind="dataset directory", inputs=files), contextlib.ExitStack() as stack:
        start = time.perf_counter()
        options = TokenizeOptions(lower=settings.lower)
        # Each input is read twice (count words, then write ids), so memory holds counts, not tokens.
        readers = {
            name: stack.enter_context(TokenLines(path, f"`{name}`", spool_dir=output.parent, tokenize=settings.tokenize,
                                                 options=options, jobs=settings.jobs, errors=settings.errors))
            for name, path in sources.items()
        }
        labels = {name: r.label for name, r in readers.items()}
        lines = {name: WithoutBlankLines(r) for name, r in readers.items()} if settings.drop_blank_lines else readers
        scan = count_splits(lines, budgets=budgets, eos=settings.eos, labels=labels,
                            shuffle_seed=settings.seed if settings.shuffle else None)
        inputs = {name: file_record(Path(path)) if path != "-" else {"path": "-"} for name, path in sources.items()}
        if budgets:
            inputs = {"split_source": inputs["train"]}
            short = [name for name, stats in scan.stats.items() if not stats.lines]
            if short:
                raise SettingError(f"`split` {settings.split}: the input ran out before the {short[0]} split; lower the budgets")
            for (name, stats), budget in zip(scan.stats.items(), budgets):
                if budget is not None and stats.tokens < budget:
                    log(f"warning: the {name} split has {stats.tokens:,} tokens, fewer than its budget of {budget:,} (input ran out)")
        manifest = write_dataset(scan, output, min_count=settings.min_count, max_vocab=settings.max_vocab, inputs=inputs,
                                 arguments=settings.arguments())
        seconds = time.perf_counter() - start
        parts = []
        for name, s in manifest["splits"].items():
            oov = f", OOV {100 * s['oov_rate']:.2f}%" if "oov_rate" in s and name != "train" else ""
            parts.append(f"{name} {s['tokens']:,} tokens{oov}")
        vocab = f"vocabulary {manifest['vocab_size']:,}" if manifest["vocab_size"] else f"no training split, {manifest['types_total']:,} types"
        log(f"wrote {output}: {vocab}; " + "; ".join(parts) + f" ({seconds:.1f}s)")
    return manifest
