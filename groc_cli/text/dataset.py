"""Dataset directories: splits as Parquet token ids, a vocabulary table, and a manifest.

Layout (format version 1, documented in docs/formats.md):

    DATASET/
      manifest.json     counts, OOV rates, input checksums, arguments, tool version, checksum
      vocab.parquet     id, word, count_train, count_valid, count_test, in_vocab
      train.parquet     one column `id` (uint16 or uint32, chosen from the number of types)
      valid.parquet     (each split present only if given)
      test.parquet

Ids index `vocab.parquet`, which lists every type seen in any split. The training
vocabulary (`in_vocab`) takes ids 0..V-1, in descending training frequency (ties by
string), so frequency-binned models read cutoffs directly from ids; types outside it
(rare training words cut by `min_count`/`max_vocab`, words only in valid/test) follow.
Splits keep the original ids, so one dataset serves closed-vocabulary evaluation (map
ids >= V to <unk>) and open-vocabulary evaluation (use the words themselves).
"""

from __future__ import annotations

import array
import codecs
import contextlib
import hashlib
import itertools
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..version import __version__
from ..artifacts.atomic import atomic_dir
from ..artifacts.integrity import sha256_file
from ..artifacts.io import (open_parquet, parquet_checksum, parquet_writer, provenance, read_json, read_parquet,
                           write_json, write_parquet)
from ..console import log, progress
from ..errors import DamagedInput, GrocError
from ..formats import DATASET_FORMAT

FORMAT_VERSION = 1
SPLITS = ("train", "valid", "test")
UNK = "<unk>"
EOS = "<eos>"
ROW_GROUP = 1 << 20  # ids per Parquet row group; datasets written before streaming used the same
BATCH_TOKENS = 1 << 18  # tokens mapped to ids at a time: a few MB of strings
UNK_WARNING_SHARE = 0.5  # of the training tokens: past it, most of what a model learns is <unk>


def id_dtype(n: int) -> np.dtype:
    """Smallest unsigned integer type that holds ids 0..n-1 (kNN-LM's int16 ids overflowed: urvashik/knnlm#6)."""
    if n <= np.iinfo(np.uint16).max + 1:
        return np.dtype(np.uint16)
    if n <= np.iinfo(np.uint32).max + 1:
        return np.dtype(np.uint32)
    raise GrocError(f"vocabulary of {n} types is too large")


def parse_budgets(text: str) -> list[int | None]:
    """Parse "2M,2M,10M" (K/M/G suffixes; "rest" takes what is left) into token budgets."""
    budgets: list[int | None] = []
    for part in text.split(","):
        part = part.strip().lower()
        if part in ("rest", "*"):
            budgets.append(None)
            continue
        match = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)", part)
        if not match:
            raise GrocError(f"`split` {text!r}: expected token budgets like 2M,2M,10M (K/M/G suffixes, 'rest')")
        value = float(match.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[match.group(2)]
        if value <= 0:
            raise GrocError(f"`split` {text!r}: budgets must be positive")
        budgets.append(int(value))
    if not 1 <= len(budgets) <= 3:
        raise GrocError(f"`split` {text!r}: give one to three budgets (train[,valid[,test]])")
    if None in budgets[:-1]:
        raise GrocError(f"`split` {text!r}: only the last budget may be 'rest'")
    return budgets


def assign_budgets(lines: Iterable[list[str]], budgets: list[int | None], eos: bool = True) -> Iterator[tuple[str, list[str]]]:
    """Consecutive splits: a split takes whole lines until it holds at least its budget of tokens
    (<eos> included). Yields (split, tokens) per line and stops reading once every budget is met."""
    names = SPLITS[: len(budgets)]
    index, count = 0, 0
    for tokens in lines:
        if index >= len(names):
            break
        yield names[index], tokens
        count += len(tokens) + int(eos)
        budget = budgets[index]
        if budget is not None and count >= budget:
            index, count = index + 1, 0


#: A line that a shuffled split leaves out (past every budget), in ``shuffled_assignment``'s array.
LEFT_OUT = 255


def shuffled_assignment(lengths: Sequence[int], budgets: list[int | None], eos: bool = True, seed: int = 0) -> np.ndarray:
    """Shuffled splits by line: each line's split (its index in SPLITS, or LEFT_OUT) when the lines,
    of ``lengths`` words each, are taken in a random order (numpy's generator seeded with ``seed``)
    and divided as ``assign_budgets`` divides them: a split takes whole lines until it holds at least
    its budget of tokens (<eos> included); lines past every budget are left out."""
    n = len(lengths)
    order = np.random.default_rng(seed).permutation(n)
    ends = np.cumsum(np.asarray(lengths, dtype=np.int64)[order] + int(eos))
    out = np.full(n, LEFT_OUT, dtype=np.uint8)
    start, before = 0, 0
    for k, budget in enumerate(budgets):
        if start >= n:
            break
        # the first line (in the shuffled order) at which the split holds its budget, included
        end = n if budget is None else min(n, int(np.searchsorted(ends, before + budget, side="left")) + 1)
        out[order[start:end]] = k
        before, start = int(ends[end - 1]), end
    return out


def split_by_budget(lines: Iterable[list[str]], budgets: list[int | None], eos: bool = True) -> dict[str, list[list[str]]]:
    """assign_budgets, collected in memory (every split present, possibly empty)."""
    out: dict[str, list[list[str]]] = {name: [] for name in SPLITS[: len(budgets)]}
    for name, tokens in assign_budgets(lines, budgets, eos):
        out[name].append(tokens)
    return out


@dataclass
class SplitStats:
    tokens: int
    lines: int
    types: int
    oov_tokens: int | None = None  # against the training vocabulary, when there is one

    def as_dict(self) -> dict:
        d = {"tokens": self.tokens, "lines": self.lines, "types": self.types}
        if self.oov_tokens is not None:
            d["oov_tokens"] = self.oov_tokens
            d["oov_rate"] = self.oov_tokens / self.tokens
        return d


def build_vocabulary(train_counts: Counter, min_count: int, max_vocab: int | None, eos: bool) -> list[str]:
    """Training vocabulary in descending frequency (ties by string); <unk> (and <eos>) always included."""
    specials = [UNK] + ([EOS] if eos else [])
    if max_vocab is not None and max_vocab <= len(specials):
        raise GrocError(f"`max_vocab` {max_vocab} leaves no room for words besides {' and '.join(specials)}")
    ranked = sorted(train_counts.items(), key=lambda kv: (-kv[1], kv[0]))
    words = [w for w, c in ranked if c >= min_count and w not in specials]
    if max_vocab is not None:
        words = words[: max_vocab - len(specials)]
    return sorted(words + specials, key=lambda w: (-train_counts.get(w, 0), w))


@dataclass
class Scan:
    """What the first pass over a dataset's inputs found: per-split counts, and which lines of
    which input make each split (the second pass reads the inputs again to write ids)."""

    eos: bool
    counts: dict[str, Counter]
    stats: dict[str, SplitStats]
    words: dict[str, int]  # tokens without <eos>
    labels: dict[str, str]  # how messages name each split's input
    # per input: its splits in order, with line counts, and (a shuffled split) each line's split index or LEFT_OUT
    plan: list[tuple[Iterable[list[str]], list[tuple[str, int]], np.ndarray | None]]


PROGRESS_LINES = 8192  # lines between updates of the progress bar (shown when stderr is a terminal)


def _closing(lines: Iterator):
    """Close a generator that stops early (its input file, its tokenizer processes) now, not at garbage collection."""
    return contextlib.closing(lines) if hasattr(lines, "close") else contextlib.nullcontext()


def count_splits(
    split_lines: Mapping[str, Iterable[list[str]]],
    *,
    budgets: list[int | None] | None = None,
    eos: bool = True,
    labels: Mapping[str, str] | None = None,
    shuffle_seed: int | None = None,
) -> Scan:
    """First pass: count every split's words. Each input must be iterable twice, giving the same
    lines (a list, or a re-readable file). With `budgets`, the one input is the "train" one and
    assign_budgets divides it into consecutive splits; with `shuffle_seed` too, shuffled_assignment
    divides its lines taken in a seeded random order (read once more first, for their lengths; memory
    holds about 20 bytes a line), and each split keeps its lines in input order."""
    if budgets is not None and set(split_lines) != {"train"}:
        raise ValueError("budgets divide a single 'train' input")
    labels = dict(labels or {})
    counts: dict[str, Counter] = {}
    n_lines: dict[str, int] = {}
    plan = []
    for source_name, source in split_lines.items():
        label = labels.setdefault(source_name, f"the {source_name} split")
        lines = iter(source)
        assignment = None
        log(f"reading {label}")
        if budgets is None:
            names = [source_name]
            assigned = ((source_name, tokens) for tokens in lines)
        elif shuffle_seed is not None:
            names = list(SPLITS[: len(budgets)])
            with _closing(lines), progress(f"measuring the lines of {label}", total=None, unit="lines") as advance:
                lengths = array.array("I", (len(tokens) for tokens in lines))
            log(f"shuffling {len(lengths):,} lines of {label} (seed {shuffle_seed})")
            assignment = shuffled_assignment(lengths, budgets, eos, shuffle_seed)
            del lengths
            lines = iter(source)
            assigned = ((names[k], tokens) for k, tokens in zip(assignment.tobytes(), lines) if k != LEFT_OUT)
        else:
            names = list(SPLITS[: len(budgets)])
            assigned = assign_budgets(lines, budgets, eos)
        if budgets is not None:  # how messages name each split of the one input (a shuffled one's too)
            for name in names[1:]:
                labels[name] = f"the {name} split of {label}"
            labels[source_name] = f"the train split of {label}"
        for name in names:
            counts[name], n_lines[name] = Counter(), 0
        with _closing(lines), progress(f"counting {label}", total=None, unit="lines") as advance:
            for read, (name, tokens) in enumerate(assigned, 1):
                counts[name].update(tokens)
                n_lines[name] += 1
                if not read % PROGRESS_LINES:
                    advance(PROGRESS_LINES)
        plan.append((source, [(name, n_lines[name]) for name in names], assignment))
    words = {name: sum(c.values()) for name, c in counts.items()}
    stats = {}
    for name, c in counts.items():
        if eos:
            c[EOS] += n_lines[name]
        stats[name] = SplitStats(tokens=words[name] + n_lines[name] * int(eos), lines=n_lines[name], types=len(c))
    # The checksum takes the splits in SPLITS order, and the second pass computes it as it goes.
    plan.sort(key=lambda entry: SPLITS.index(entry[1][0][0]))
    return Scan(eos=eos, counts=counts, stats=stats, words=words, labels=labels, plan=plan)


def _checksum_start(vocab_words: list[str], in_vocab: int):
    """The dataset checksum covers what a model sees (ids and words), not paths or timestamps;
    each split's name and ids (as uint32) follow, in SPLITS order."""
    digest = hashlib.sha256()
    digest.update(f"groc-dataset-v{FORMAT_VERSION}\n{in_vocab}\n".encode())
    for word in vocab_words:
        digest.update(word.encode() + b"\n")
    return digest


def content_checksum(vocab_words: list[str], arrays: dict[str, np.ndarray], in_vocab: int) -> str:
    """The checksum `prepare` records, computed from words and whole id arrays (`verify`)."""
    digest = _checksum_start(vocab_words, in_vocab)
    for name in SPLITS:
        if name in arrays:
            digest.update(name.encode())
            digest.update(arrays[name].astype(np.uint32).tobytes())
    return digest.hexdigest()


def _batch_ids(batch: list[str], index: dict[str, int], name: str) -> np.ndarray:
    """The ids (uint32) of a batch of words of the second reading; a word the first reading did not
    count means the input `name` changed in between."""
    try:
        return np.fromiter(map(index.__getitem__, batch), dtype=np.uint32, count=len(batch))
    except KeyError as exc:
        raise _changed(name, f"the word {exc.args[0]!r} is new") from None


class _IdWriter:
    """The second pass's writing: each split's ids, mapped from its words by ``index``, appended as raw
    ``dtype`` to a scratch file of its own in ``tmp`` (kept in ``files`` until ``scratch`` closes), with
    its token count and the count of tokens outside the vocabulary's first ``in_vocab`` ids."""

    def __init__(self, scan: Scan, index: dict[str, int], in_vocab: int, tmp: Path, scratch: contextlib.ExitStack):
        self.scan, self.index, self.in_vocab, self.tmp, self.scratch = scan, index, in_vocab, tmp, scratch
        self.dtype = id_dtype(len(index))
        self.files: dict[str, BinaryIO] = {}

    def open(self, name: str) -> None:
        self.files[name] = self.scratch.enter_context(tempfile.TemporaryFile(dir=self.tmp, buffering=1 << 20))

    def write(self, batch: list[str], name: str, counts: list[int]) -> np.ndarray:
        """Append ``batch``'s ids to split ``name``'s file, add its tokens and out-of-vocabulary tokens to
        ``counts``, empty the batch; the ids (uint32)."""
        ids = _batch_ids(batch, self.index, self.scan.labels[name])
        self.files[name].write(ids.astype(self.dtype).tobytes())
        counts[0] += len(ids)
        counts[1] += int(np.count_nonzero(ids >= self.in_vocab))
        batch.clear()
        return ids

    def consecutive(self, lines: Iterator[list[str]], name: str, n_lines: int, digest) -> tuple[int, int]:
        """Split ``name``: the next ``n_lines`` lines, their ids added to ``digest`` as they are written;
        (tokens, tokens >= in_vocab)."""
        self.open(name)
        counts, read = [0, 0], 0
        batch: list[str] = []
        with progress(f"writing {self.scan.labels[name]}", total=n_lines, unit="lines") as advance:
            for line in itertools.islice(lines, n_lines):
                batch += line
                if self.scan.eos:
                    batch.append(EOS)
                read += 1
                if len(batch) >= BATCH_TOKENS:
                    digest.update(self.write(batch, name, counts).tobytes())
                if not read % PROGRESS_LINES:
                    advance(PROGRESS_LINES)
            digest.update(self.write(batch, name, counts).tobytes())
        if read < n_lines:
            raise _changed(self.scan.labels[name], f"{read:,} lines, {n_lines:,} before")
        return counts[0], counts[1]

    def shuffled(self, lines: Iterator[list[str]], assignment: np.ndarray, names: list[str]) -> dict[str, tuple[int, int]]:
        """A shuffled split's lines: each line's ids, in input order, appended to the file of the split
        ``assignment`` gives it (lines LEFT_OUT skipped); {split: (tokens, tokens >= in_vocab)}."""
        for name in names:
            self.open(name)
        batches: dict[str, list[str]] = {name: [] for name in names}
        counts = {name: [0, 0] for name in names}
        read = 0
        with progress("writing the shuffled splits", total=len(assignment), unit="lines") as advance:
            for k, line in zip(assignment.tobytes(), lines):
                read += 1
                if not read % PROGRESS_LINES:
                    advance(PROGRESS_LINES)
                if k == LEFT_OUT:
                    continue
                batch = batches[names[k]]
                batch += line
                if self.scan.eos:
                    batch.append(EOS)
                if len(batch) >= BATCH_TOKENS:
                    self.write(batch, names[k], counts[names[k]])
        for name in names:
            self.write(batches[name], name, counts[name])
        if read < len(assignment):
            raise _changed(self.scan.labels[names[0]], f"{read:,} lines, {len(assignment):,} before")
        return {name: (c[0], c[1]) for name, c in counts.items()}

    def chunks(self, name: str) -> Iterator[np.ndarray]:
        """Split ``name``'s written ids, read back from its scratch file a row group at a time."""
        raw = self.files[name]
        raw.seek(0)
        while chunk := raw.read(ROW_GROUP * self.dtype.itemsize):
            yield np.frombuffer(chunk, dtype=self.dtype)

    def digest_file(self, name: str, digest) -> None:
        """Add split ``name``'s written ids (as uint32) to ``digest``, as ``consecutive`` does while writing."""
        for ids in self.chunks(name):
            digest.update(ids.astype(np.uint32).tobytes())


def _changed(name: str, detail: str) -> GrocError:
    return GrocError(f"{name} changed between groc's two readings of it ({detail}); run groc prepare again")


def _check_content(scan: Scan, vocab: list[str], min_count: int, max_vocab: int | None) -> None:
    """Refuse a dataset no model can learn from, before writing it; warn when most training
    tokens would be <unk>."""
    for name, words in scan.words.items():
        if words == 0:
            blank = ", only blank lines" if scan.stats[name].lines else ""
            raise GrocError(f"{scan.labels[name]} has no words{blank}; give a text with words in it")
    if "train" not in scan.counts:
        return
    train, specials = scan.counts["train"], (UNK, EOS)
    real = [(count, word) for word, count in train.items() if word not in specials]
    if not real:
        raise GrocError(f"{scan.labels['train']} has no words besides {' and '.join(specials)}; give a text with words in it")
    if all(word in specials for word in vocab):
        count, word = max(real)
        raise GrocError(f"`min_count` {min_count} keeps no training word besides {' and '.join(w for w in specials if w in vocab)} (the most "
                        f"frequent, {word!r}, occurs {count:,} times); lower `min_count`")
    known = set(vocab)
    unk = train.get(UNK, 0) + sum(count for word, count in train.items() if word not in known)
    share = unk / scan.stats["train"].tokens
    if share > UNK_WARNING_SHARE:
        fixes = [f"lower `min_count` (now {min_count})"] if min_count > 1 else []
        if max_vocab is not None:
            fixes.append(f"raise `max_vocab` (now {max_vocab:,})")
        why = f"; {' or '.join(fixes)} to keep more words" if fixes else " in the input itself"
        log(f"warning: {100 * share:.1f}% of the training tokens are <unk>{why}")


def write_dataset(
    scan: Scan,
    out_dir: Path,
    *,
    min_count: int = 1,
    max_vocab: int | None = None,
    inputs: dict[str, dict] | None = None,
    arguments: dict | None = None,
) -> dict:
    """Second pass: build the vocabulary from the counts, write each split's ids, and return the manifest.

    Memory holds the counts and one batch of lines. The ids go to an unnamed scratch file first:
    the checksum that every Parquet file carries in its schema is known only once all ids are."""
    train_counts = scan.counts.get("train", Counter())
    vocab = build_vocabulary(train_counts, min_count, max_vocab, scan.eos) if train_counts else []
    _check_content(scan, vocab, min_count, max_vocab)
    words = _all_words(scan.counts, vocab)
    digest = _checksum_start(words, len(vocab))
    with atomic_dir(out_dir) as tmp, contextlib.ExitStack() as scratch:
        writer = _IdWriter(scan, {w: i for i, w in enumerate(words)}, len(vocab), tmp, scratch)
        _write_splits(scan, writer, digest)
        manifest = {
            "format": DATASET_FORMAT,
            "format_version": FORMAT_VERSION,
            "groc_version": __version__,
            "checksum": digest.hexdigest(),
            "eos": scan.eos,
            "vocab_size": len(vocab),
            "types_total": len(words),
            "id_dtype": str(writer.dtype),
            "unk": UNK if vocab else None,
            "splits": {name: stats.as_dict() for name, stats in scan.stats.items()},
            "inputs": inputs or {},
            "arguments": arguments or {},
        }
        _write_tables(scan.counts, words, writer, tmp, manifest["checksum"])
        write_json(manifest, tmp / "manifest.json")
    return manifest


def _all_words(counts: Mapping[str, Counter], vocab: list[str]) -> list[str]:
    """Every word of every split: the vocabulary's, then the rest by falling count (ties by string)."""
    total: Counter = Counter()
    for c in counts.values():
        total.update(c)
    known = set(vocab)
    return vocab + sorted((w for w in total if w not in known), key=lambda w: (-total[w], w))


def _write_splits(scan: Scan, writer: _IdWriter, digest) -> None:
    """Each split's ids to its scratch file, in SPLITS order for ``digest``; each split's count checked
    against the first reading's, and its out-of-vocabulary tokens recorded (a dataset with a vocabulary)."""
    def written(name: str, tokens: int, oov: int) -> None:
        if tokens != scan.stats[name].tokens:
            raise _changed(scan.labels[name], f"{tokens:,} tokens, {scan.stats[name].tokens:,} before")
        if scan.counts.get("train"):
            scan.stats[name].oov_tokens = oov

    for source, segments, assignment in scan.plan:
        lines = iter(source)
        with _closing(lines):
            if assignment is not None:
                for name, (tokens, oov) in writer.shuffled(lines, assignment, [n for n, _ in segments]).items():
                    written(name, tokens, oov)
                for name, _ in segments:  # the checksum takes each split's ids in turn, as consecutive ones give them
                    digest.update(name.encode())
                    writer.digest_file(name, digest)
                continue
            for name, n_lines in segments:
                log(f"writing the {name} split")
                digest.update(name.encode())
                written(name, *writer.consecutive(lines, name, n_lines, digest))


def _write_tables(counts: Mapping[str, Counter], words: list[str], writer: _IdWriter, tmp: Path, checksum: str) -> None:
    """vocab.parquet (every word, its id, its count in each split, in_vocab) and each split's ids, as
    Parquet files that carry the dataset's ``checksum``."""
    meta = provenance("prepare", checksum=checksum, format_version=FORMAT_VERSION)
    vocab_table = pa.table(
        {
            "id": pa.array(np.arange(len(words), dtype=np.uint32)),
            "word": pa.array(words, type=pa.string()),
            **{
                f"count_{name}": pa.array([counts[name].get(w, 0) if name in counts else 0 for w in words], type=pa.int64())
                for name in SPLITS
            },
            "in_vocab": pa.array(np.arange(len(words)) < writer.in_vocab),
        }
    )
    write_parquet(vocab_table, tmp / "vocab.parquet", meta)
    del vocab_table
    schema = pa.schema([("id", pa.from_numpy_dtype(writer.dtype))])
    for name in writer.files:
        with parquet_writer(tmp / f"{name}.parquet", schema, meta) as out:
            for ids in writer.chunks(name):
                out.write_table(pa.table({"id": pa.array(ids)}), row_group_size=ROW_GROUP)


def prepare_dataset(
    split_lines: Mapping[str, Iterable[list[str]]],
    out_dir: Path,
    *,
    eos: bool = True,
    min_count: int = 1,
    max_vocab: int | None = None,
    inputs: dict[str, dict] | None = None,
    arguments: dict | None = None,
) -> dict:
    """Write a dataset directory from tokenized lines per split (each iterable twice); return the manifest."""
    scan = count_splits(split_lines, eos=eos)
    return write_dataset(scan, out_dir, min_count=min_count, max_vocab=max_vocab, inputs=inputs, arguments=arguments)


#: What a dataset's vocab.parquet holds, by column: the type tests that `open_dataset` applies.
def model_index(model_words: Sequence[str]) -> tuple[dict[str, int], int]:
    """A model's vocabulary as word -> id, and the id of its <unk>, which stands for every word
    outside it."""
    index = {w: i for i, w in enumerate(model_words)}
    if UNK not in index:
        raise GrocError("the model's vocabulary has no <unk>; it cannot score words outside it")
    return index, index[UNK]


def word_ids(index: Mapping[str, int], words: Sequence[str], missing: int) -> np.ndarray:
    """Words (a dataset's vocabulary, a line's tokens) as a model's ids: each word's id in ``index``
    (``model_index``'s), else ``missing``: the model's <unk>, or -1 to tell words outside it apart."""
    return np.fromiter((index.get(w, missing) for w in words), dtype=np.int64, count=len(words))


VOCAB_COLUMNS = {"id": pa.types.is_integer, "word": pa.types.is_string, "in_vocab": pa.types.is_boolean,
                 **{f"count_{name}": pa.types.is_integer for name in SPLITS}}


@dataclass
class Dataset:
    """A prepared dataset directory, validated on open."""

    path: Path
    manifest: dict
    words: list[str] = field(repr=False)
    counts: dict[str, np.ndarray] = field(repr=False)

    @property
    def vocab_size(self) -> int:
        return int(self.manifest["vocab_size"])

    @property
    def vocab(self) -> list[str]:
        """The training vocabulary (ids 0..V-1)."""
        return self.words[: self.vocab_size]

    @property
    def checksum(self) -> str:
        return self.manifest["checksum"]

    @property
    def rebuild(self) -> str:
        return _rebuild(self.path)

    def has_split(self, name: str) -> bool:
        return name in self.manifest["splits"]

    def split_file(self, split: str) -> Path:
        return self.path / f"{split}.parquet"

    def id_columns(self) -> dict:
        """A split's one column, of the integer type the manifest records (chosen from the vocabulary size)."""
        return {"id": lambda kind: str(kind) == self.manifest["id_dtype"]}

    def ids(self, split: str) -> np.ndarray:
        if not self.has_split(split):
            have = ", ".join(self.manifest["splits"]) or "none"
            raise GrocError(f"dataset {self.path} has no {split} split (it has: {have}); prepare it with --{split}")
        file = self.split_file(split)
        ids = read_parquet(file, self.id_columns(), self.rebuild).column("id").to_numpy()
        # An id past the vocabulary would index out of every table built from it (a traceback at best).
        largest = int(ids.max()) if ids.size else -1
        if largest >= len(self.words):
            raise DamagedInput(file, f"holds token id {largest:,}, beyond the {len(self.words):,} types of vocab.parquet",
                               self.rebuild)
        return ids


def _rebuild(path: Path) -> str:
    return f"rebuild the dataset with 'groc prepare ... -o {path} --force'"


def _manifest_problem(manifest: dict) -> str | None:
    """What a manifest lacks that later stages read, if anything."""
    for key, kind in (("checksum", str), ("vocab_size", int), ("types_total", int), ("id_dtype", str), ("splits", dict)):
        if not isinstance(manifest.get(key), kind):
            return f"has no valid {key!r}"
    for name, stats in manifest["splits"].items():
        counted = isinstance(stats, dict) and all(isinstance(stats.get(k), int) for k in ("tokens", "types"))
        if name not in SPLITS or not counted:
            return f"has no valid record of the {name!r} split"
    return None


def _check_recorded(file: Path, schema: pa.Schema, rows: int, manifest: dict, recorded: int, unit: str, rebuild: str) -> None:
    """A dataset file has the size the manifest records and carries the manifest's checksum in its
    provenance: a file from another preparation (or not from groc) is refused by name."""
    if rows != recorded:
        raise DamagedInput(file, f"has {rows:,} {unit} but manifest.json records {recorded:,}", rebuild)
    if parquet_checksum(schema) != manifest["checksum"]:
        raise DamagedInput(file, "belongs to another dataset (its recorded checksum is not manifest.json's)", rebuild)


def open_dataset(path: Path, verify: bool = False) -> Dataset:
    """Open a dataset directory and check it before any work. Always, as it is cheap: every file is
    readable Parquet with groc's columns, has the size the manifest records and carries its
    checksum, and the vocabulary's per-split counts add up to the recorded tokens and types. With
    `verify`, every split is read: its tokens must be those the vocabulary counts, and
    the words and ids together must give the manifest's content checksum."""
    path = Path(path)
    if not path.is_dir():
        raise GrocError(f"dataset {path}: not a directory; create it with 'groc prepare ... -o {path}'")
    rebuild = _rebuild(path)
    manifest = read_json(path / "manifest.json", "dataset manifest", rebuild)
    if manifest.get("format") != DATASET_FORMAT:
        raise GrocError(f"{path} is not a groc dataset directory (manifest format {manifest.get('format')!r})")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise GrocError(f"dataset {path} has format version {manifest.get('format_version')}, this groc reads {FORMAT_VERSION}; re-run groc prepare")
    problem = _manifest_problem(manifest)
    if problem:
        raise DamagedInput(path / "manifest.json", problem, rebuild)
    vocab_file = path / "vocab.parquet"
    table = read_parquet(vocab_file, VOCAB_COLUMNS, rebuild)
    _check_recorded(vocab_file, table.schema, table.num_rows, manifest, manifest["types_total"], "types", rebuild)
    words = table.column("word").to_pylist()
    counts = {name: table.column(f"count_{name}").to_numpy() for name in SPLITS}
    in_vocab = table.column("in_vocab").to_numpy(zero_copy_only=False)
    if not np.array_equal(table.column("id").to_numpy(), np.arange(len(words))) or None in words:
        raise DamagedInput(vocab_file, "does not list the types in id order, each with a word", rebuild)
    if in_vocab.sum() != manifest["vocab_size"] or not in_vocab[: manifest["vocab_size"]].all():
        raise DamagedInput(vocab_file, f"marks {int(in_vocab.sum()):,} words in_vocab, not the first "
                           f"{manifest['vocab_size']:,} that manifest.json records as the training vocabulary", rebuild)
    dataset = Dataset(path=path, manifest=manifest, words=words, counts=counts)
    for name, stats in manifest["splits"].items():
        file = dataset.split_file(name)
        handle = open_parquet(file, dataset.id_columns(), rebuild)
        _check_recorded(file, handle.schema_arrow, handle.metadata.num_rows, manifest, stats["tokens"], "tokens", rebuild)
        tokens, types = int(counts[name].sum()), int(np.count_nonzero(counts[name]))
        if (tokens, types) != (stats["tokens"], stats["types"]):
            raise DamagedInput(vocab_file, f"counts {tokens:,} tokens of {types:,} types in the {name} split, but "
                               f"manifest.json records {stats['tokens']:,} of {stats['types']:,}", rebuild)
    if verify:
        _verify_content(dataset)
    return dataset


def _verify_content(dataset: Dataset) -> None:
    """`verify`: each split's ids are the tokens the vocabulary counts for it (which names a damaged
    split), then words and ids together give the manifest's checksum (which also covers the
    words themselves and the order of the ids, that no count shows)."""
    arrays = {name: dataset.ids(name) for name in dataset.manifest["splits"]}
    for name, ids in arrays.items():
        if not np.array_equal(np.bincount(ids, minlength=len(dataset.words)), dataset.counts[name]):
            raise DamagedInput(dataset.split_file(name), "does not hold the tokens that vocab.parquet counts for it "
                               "(`verify`)", dataset.rebuild)
    if content_checksum(dataset.words, arrays, dataset.vocab_size) != dataset.checksum:
        raise DamagedInput(dataset.path / "vocab.parquet", "(its words) or the order of the splits' ids no longer give "
                           "manifest.json's checksum (`verify`)", dataset.rebuild)


def vocab_for_lexicon(path: Path) -> tuple[list[str], list[str]]:
    """(words to list, words to report coverage on): for a dataset directory every type of
    every split (open-vocabulary evaluation needs the new words too) and its training
    vocabulary; otherwise the words ``read_vocab_words`` reads, both times."""
    if Path(path).is_dir() and run_vocab_file(path) is None:
        ds = open_dataset(path)
        return ds.words, ds.vocab or ds.words
    words = read_vocab_words(path)
    return words, words


def run_vocab_file(path: Path) -> Path | None:
    """The vocab.parquet of a run directory from 'groc train' or 'groc finetune' (config.json and
    vocab.parquet, no dataset manifest); None for any other path."""
    path = Path(path)
    if (path / "manifest.json").exists() or not (path / "config.json").is_file():
        return None
    return path / "vocab.parquet" if (path / "vocab.parquet").is_file() else None


def read_vocab_words(path: Path) -> list[str]:
    """Words of a vocabulary given as a dataset directory (its training vocabulary; a dataset prepared
    without a training split has none, and gives every word of its splits), a run directory (the
    model's words), a vocab.parquet, or a text file (one word per line, optional count)."""
    path = Path(path)
    if path.is_dir():
        run_vocab = run_vocab_file(path)
        if run_vocab is None:
            ds = open_dataset(path)
            return ds.vocab or ds.words
        path = run_vocab
    if not path.exists():
        raise GrocError(f"`vocab` {path}: no such file or directory")
    if path.suffix == ".parquet":
        try:
            schema = pq.read_schema(path)
        except Exception:
            raise GrocError(f"`vocab` {path} is not a readable Parquet file") from None
        if "word" not in schema.names:
            raise GrocError(f"`vocab` {path}: Parquet file has no 'word' column (columns: {', '.join(schema.names)}); give a dataset's vocab.parquet")
        table = pq.read_table(path)
        if "in_vocab" in table.column_names:
            mask = table.column("in_vocab").to_numpy(zero_copy_only=False)
            return [w for w, keep in zip(table.column("word").to_pylist(), mask) if keep]
        return table.column("word").to_pylist()
    with open(path, "rb") as handle:  # read once: a pipe given by name (`<(cut -f1 counts.tsv)`) cannot be read twice
        data = handle.read()
    head = data[:8192]
    if not head:
        raise GrocError(f"`vocab` {path} is empty")
    if b"\x00" in head or head.startswith(b"PAR1"):
        raise GrocError(f"`vocab` {path} is binary; give a dataset directory, a vocab.parquet or a text file with one word per line")
    words = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if number == 1:  # a byte-order mark (Windows editors write one) is not part of the first word
            raw = raw.removeprefix(codecs.BOM_UTF8)
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise GrocError(f"`vocab` {path} line {number}: invalid UTF-8") from None
        if not line:
            continue
        parts = line.split()
        if len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
            raise GrocError(f"`vocab` {path} line {number}: expected 'word' or 'word count', got {line[:60]!r}")
        words.append(parts[0])
    if not words:
        raise GrocError(f"`vocab` {path} has no words")
    return words


def file_record(path: Path) -> dict:
    return {"path": str(path), "bytes": Path(path).stat().st_size, "sha256": sha256_file(path)}
