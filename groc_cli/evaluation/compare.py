"""Loss difference between two evaluations of the same split, by training-frequency bin.

The GroC paper's Figure 3 (Section 4.2, "Word frequency effects") plots, per bin of
training frequency, the *median* over test tokens of the difference in loss between a
baseline and GroC — the median rather than Baevski and Auli's (2019) mean "to reduce the
effect of outliers". Here A is the baseline and B the other run, and the difference is
loss_B − loss_A (nats per word, loss = −log p): negative means B predicts those words better.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..artifacts.atomic import atomic_path
from ..artifacts.destinations import output_kind
from ..artifacts.io import provenance, read_metadata, write_parquet
from ..artifacts.locks import claim_output
from ..console import err, log
from ..errors import GrocError, SettingError, first_line
from ..settings import check_fields, setting

# Lower edges of the frequency bins. The paper's text names "words occurring 1–50 times"
# as a bin and Figure 3 runs from rare to frequent words; we read its intervals as
# half-open [1, 50), [50, 100), [100, 500), [500, 1000), [1000, 5000), [5000, ∞), plus
# unseen words (frequency 0, only possible with an open vocabulary) as their own bin.
DEFAULT_EDGES = (1, 50, 100, 500, 1000, 5000)
COLUMNS = {"final": "final_logp", "model": "model_logp"}
SIGN = "diff = loss_B - loss_A in nats per word (loss = -ln p); negative: B is better"


def parse_bins(text: str) -> tuple[int, ...]:
    """'1,50,100' -> (1, 50, 100): lower edges of the bins, strictly increasing positive integers."""
    hint = f"`bins` {text!r}: give strictly increasing positive training frequencies, e.g. `bins` 1,50,100,500,1000,5000"
    parts = [p.strip() for p in str(text).split(",")]
    try:
        edges = tuple(int(p) for p in parts)
    except ValueError:
        raise GrocError(hint) from None
    if not edges or edges[0] < 1 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise GrocError(hint)
    return edges


def _bins(text: str) -> str:
    parse_bins(text)  # refused here, before either file is read
    return text


def _names(text: str) -> str:
    if len(text.split(",")) != 2:
        # A SettingError, not the ValueError that check_fields prefixes with the name: the message names the
        # setting twice, and the Python API's users read both plainly (str of a SettingError).
        raise SettingError(f"`names` {text!r}: give two names separated by a comma, e.g. `names` tied,groc")
    return text


@dataclass
class CompareSettings:
    """How ``groc compare`` bins and names the two evaluations; the command-line options are
    generated from these fields."""

    bins: str = setting(",".join(map(str, DEFAULT_EDGES)), "Lower edges of the training-frequency bins: [1,50), "
                        "[50,100), ..., [5000,∞) by default; unseen words (frequency 0) always form their own bin.",
                        check=_bins)
    column: str = setting("final", "final: log-probability after any cache (final_logp); model: before it "
                          "(model_logp).", choices=tuple(COLUMNS))
    freq_from: str = setting("a", "Bin by the training frequencies recorded in A (default, the baseline) or in B; "
                             "they differ when the runs were trained on different data.", choices=("a", "b"))
    names: str | None = setting(None, "A,B: names for the table and plot (default: the run directories' names).",
                                check=_names)
    words: int = setting(0, "Also list the N word types whose summed loss difference is largest each way (B worse, "
                         "B better), with their tokens, training frequency and mean Δ: which words make the gap. "
                         "0: none.", low=0)

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def edges(self) -> tuple[int, ...]:
        return parse_bins(self.bins)


@dataclass(frozen=True)
class Bin:
    lo: int
    hi: int | None  # exclusive; None for the open last bin

    @property
    def label(self) -> str:
        if self.hi is None:
            return f"≥{self.lo}"
        if self.hi == self.lo + 1:
            return str(self.lo)
        return f"{self.lo}-{self.hi - 1}"


def make_bins(edges: tuple[int, ...]) -> list[Bin]:
    """Unseen words (0) first, then [1, e0) if e0 > 1, [e0, e1), ..., [e_last, ∞): every frequency has one bin."""
    lows = [0] + ([1] if edges[0] > 1 else []) + list(edges)
    return [Bin(lo, hi) for lo, hi in zip(lows, lows[1:] + [None])]


@dataclass
class PerToken:
    path: Path
    meta: dict
    positions: np.ndarray
    words: pa.Array
    freq: np.ndarray | None
    logp: np.ndarray


def load_per_token(path: Path, column: str, with_freq: bool) -> PerToken:
    """Read only the columns needed from a 'groc eval --per-token' file."""
    path = Path(path)
    if not path.is_file():
        if not path.exists():
            raise GrocError(f"per-token file {path} not found; write one with 'groc eval ... --per-token {path}'")
        raise GrocError(f"per-token file {path} is a {output_kind(path)}; give a file written by "
                        "'groc eval ... --per-token FILE'")
    try:
        schema = pq.read_schema(path)
    except (pa.ArrowInvalid, OSError, ValueError) as exc:
        raise GrocError(f"{path} is not a Parquet file ({exc}); give files written by 'groc eval --per-token'") from None
    try:
        meta = read_metadata(path)
    except (pa.ArrowInvalid, OSError, ValueError) as exc:
        raise GrocError(f"{path} has provenance metadata that groc cannot read ({first_line(exc)}); give files "
                        "written by 'groc eval --per-token'") from None
    wanted = ["position", "word", COLUMNS[column]] + (["train_freq"] if with_freq else [])
    missing = [c for c in wanted if c not in schema.names]
    if missing or meta.get("stage") != "eval":
        what = f"lacks column(s) {', '.join(missing)}" if missing else "has no 'groc eval' provenance"
        raise GrocError(f"{path} {what}: give files written by 'groc eval --per-token'")
    for name in wanted:
        kind, accepts = _COLUMN_TYPES[name.split("_")[-1] if name.endswith("_logp") else name]
        if not accepts(schema.field(name).type):
            raise GrocError(f"{path}: column {name!r} is {schema.field(name).type}, not {kind}; give files written "
                            "by 'groc eval --per-token'")
    try:
        table = pq.read_table(path, columns=wanted)
    except (pa.ArrowException, OSError) as exc:
        raise GrocError(f"{path} is damaged ({first_line(exc)}); give files written by 'groc eval --per-token'") from None
    loaded = PerToken(
        path=path, meta=meta,
        positions=_values(path, table, "position"),
        words=_text(table["word"]),
        freq=_values(path, table, "train_freq") if with_freq else None,
        logp=_values(path, table, COLUMNS[column]),
    )
    _check_values(loaded, COLUMNS[column])
    return loaded


def _text(column: pa.ChunkedArray) -> pa.Array:
    """The words as one plain string array, whichever text type the file stores them with."""
    words = column.combine_chunks()
    return words if words.type == pa.string() else words.cast(pa.string())


def _is_text(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t)


#: Each column compare reads, the type 'groc eval --per-token' writes it with (a narrower integer or
#: float32, as the committed records under docs/records keep them, is the same kind).
_COLUMN_TYPES = {"position": ("an integer", pa.types.is_integer), "word": ("text", _is_text),
                 "train_freq": ("an integer", pa.types.is_integer), "logp": ("a floating-point number", pa.types.is_floating)}


def _values(path: Path, table: pa.Table, name: str) -> np.ndarray:
    """The column as numbers; a missing value (null) is refused, naming the file and the column."""
    col = table[name]
    if col.null_count:
        row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
        raise GrocError(f"{path}: column {name!r} has a missing value (null) at row {row}; give files written by "
                        "'groc eval --per-token'")
    return col.to_numpy()


#: A log-probability above this is not one: log p <= 0, less the rounding of a softmax near p = 1.
LOGP_SLACK = 1e-6


def _check_values(p: PerToken, logp_column: str) -> None:
    """Values no evaluation writes: a NaN, infinite or positive log-probability (a probability that
    is none, or above 1), a negative training frequency or position. Refused, naming the file, the
    column and the first row, before they turn into a median of NaN or a traceback."""
    with np.errstate(invalid="ignore"):
        bad_logp = ~np.isfinite(p.logp) | (p.logp > LOGP_SLACK)
    checks = [(logp_column, p.logp, bad_logp, "log-probabilities must be finite and <= 0"),
              ("position", p.positions, p.positions < 0, "positions are >= 0")]
    if p.freq is not None:
        checks.append(("train_freq", p.freq, p.freq < 0, "training frequencies are >= 0"))
    for name, values, bad, rule in checks:
        rows = np.flatnonzero(bad)
        if len(rows):
            i = int(rows[0])
            value = values[i].item()
            raise GrocError(f"{p.path}: column {name!r} holds {value!r} at row {i} ({len(rows):,} such rows; {rule}); "
                            "give files written by 'groc eval --per-token'")


def check_aligned(a: PerToken, b: PerToken) -> None:
    """Same dataset, same split, same positions and words, row for row; else one line naming the difference."""
    names = f"{a.path} and {b.path}"
    da, db = a.meta.get("dataset_checksum"), b.meta.get("dataset_checksum")
    if da != db:
        raise GrocError(f"{names} evaluate different datasets (dataset_checksum {str(da)[:12]} vs {str(db)[:12]}); "
                        "compare evaluations of the same dataset and split")
    sa, sb = a.meta.get("settings", {}).get("split"), b.meta.get("settings", {}).get("split")
    if sa != sb:
        raise GrocError(f"{names} evaluate different splits ({sa} vs {sb}); compare evaluations of the same split")
    if len(a.positions) != len(b.positions):
        raise GrocError(f"{names} have {len(a.positions)} and {len(b.positions)} rows; "
                        "compare evaluations of the same split")
    bad = np.flatnonzero(a.positions != b.positions)
    if len(bad):
        i = int(bad[0])
        raise GrocError(f"{names} differ at row {i} (position {a.positions[i]} vs {b.positions[i]}); "
                        "compare evaluations of the same split")
    differs = pc.fill_null(pc.not_equal(a.words, b.words), True).to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(differs)
    if len(bad):
        i = int(bad[0])
        raise GrocError(f"{names} differ at position {a.positions[i]} (word {a.words[i].as_py()!r} vs "
                        f"{b.words[i].as_py()!r}); compare evaluations of the same split")


def _row(label: str, lo: int | None, hi: int | None, word_ids: np.ndarray, loss_a: np.ndarray, loss_b: np.ndarray) -> dict:
    n = len(loss_a)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = loss_b - loss_a
        return {
            "bin": label, "lo": lo, "hi": hi, "words": n, "types": int(len(np.unique(word_ids))),
            "median_diff": float(np.median(diff)) if n else None,
            "mean_diff": float(np.mean(diff)) if n else None,
            "ppl_a": float(np.exp(np.mean(loss_a))) if n else None,
            "ppl_b": float(np.exp(np.mean(loss_b))) if n else None,
        }


def bin_table(freq: np.ndarray, word_ids: np.ndarray, logp_a: np.ndarray, logp_b: np.ndarray,
              edges: tuple[int, ...] = DEFAULT_EDGES) -> tuple[list[dict], dict]:
    """Rows per bin (empty bins included, with null statistics) and the overall row."""
    loss_a, loss_b = -np.asarray(logp_a, np.float64), -np.asarray(logp_b, np.float64)
    bins = make_bins(edges)
    which = np.searchsorted([b.lo for b in bins], freq, side="right") - 1
    rows = []
    for k, b in enumerate(bins):
        m = which == k
        rows.append(_row(b.label, b.lo, b.hi, word_ids[m], loss_a[m], loss_b[m]))
    return rows, _row("all", None, None, word_ids, loss_a, loss_b)


def word_table(names: list[str], word_ids: np.ndarray, freq: np.ndarray, logp_a: np.ndarray, logp_b: np.ndarray,
               top: int) -> dict:
    """The ``top`` word types whose losses, summed over their tokens, differ most each way: ``b_worse`` (largest
    positive sums first) and ``b_better`` (largest negative first), each type with its tokens, training frequency,
    summed and mean difference, and ``total_diff``, the sum over every token, that the sums are shares of.
    ``names[i]`` is the word whose tokens have ``word_ids`` i."""
    with np.errstate(invalid="ignore", over="ignore"):
        diff = -np.asarray(logp_b, np.float64) + np.asarray(logp_a, np.float64)
        sums = np.bincount(word_ids, weights=diff)
        total = float(np.sum(diff))
    counts = np.bincount(word_ids, minlength=len(sums))
    type_freq = np.zeros(len(sums), np.int64)
    type_freq[word_ids] = freq
    ranked = np.flatnonzero(~np.isnan(sums))

    def rows(order: np.ndarray) -> list[dict]:
        return [{"word": names[i], "tokens": int(counts[i]), "train_freq": int(type_freq[i]),
                 "sum_diff": float(sums[i]), "mean_diff": float(sums[i] / counts[i])} for i in order[:top]]

    worse = ranked[sums[ranked] > 0]
    better = ranked[sums[ranked] < 0]
    return {"total_diff": total, "b_worse": rows(worse[np.argsort(-sums[worse], kind="stable")]),
            "b_better": rows(better[np.argsort(sums[better], kind="stable")])}


def _describe(p: PerToken) -> dict:
    settings = p.meta.get("settings", {})
    return {"path": str(p.path), "run": p.meta.get("run"), "model_checksum": p.meta.get("model_checksum"),
            "vocab": settings.get("vocab"), "cache": settings.get("cache")}


def compare(path_a: Path, path_b: Path, edges: tuple[int, ...] = DEFAULT_EDGES, column: str = "final",
            freq_from: str = "a", words: int = 0) -> dict:
    """The whole comparison as one JSON-ready dict: inputs, settings, per-bin rows, overall row, and with
    ``words`` > 0 the word types that make the difference (``word_table``)."""
    if column not in COLUMNS:
        raise GrocError(f"`column` {column!r}: choose final (after any cache) or model (before it)")
    if freq_from not in ("a", "b"):
        raise GrocError(f"`freq_from` {freq_from!r}: choose a (the baseline, first file) or b")
    a = load_per_token(path_a, column, with_freq=freq_from == "a")
    b = load_per_token(path_b, column, with_freq=freq_from == "b")
    check_aligned(a, b)
    encoded = pc.dictionary_encode(a.words)
    word_ids = encoded.indices.to_numpy()
    freq = (a if freq_from == "a" else b).freq
    rows, overall = bin_table(freq, word_ids, a.logp, b.logp, edges)
    result = {
        "a": _describe(a), "b": _describe(b),
        "dataset_checksum": a.meta.get("dataset_checksum"), "split": a.meta.get("settings", {}).get("split"),
        "column": COLUMNS[column], "freq_from": freq_from, "edges": list(edges), "sign": SIGN,
        "bins": rows, "overall": overall,
    }
    if words:
        result["words"] = word_table(encoded.dictionary.to_pylist(), word_ids, freq, a.logp, b.logp, words)
    return result


def settings_differ(result: dict, key: str) -> bool:
    return result["a"].get(key) != result["b"].get(key)


def rows_table(rows: list[dict]) -> pa.Table:
    schema = pa.schema([("bin", pa.string()), ("lo", pa.int64()), ("hi", pa.int64()), ("words", pa.int64()),
                        ("types", pa.int64()), ("median_diff", pa.float64()), ("mean_diff", pa.float64()),
                        ("ppl_a", pa.float64()), ("ppl_b", pa.float64())])
    return pa.Table.from_pylist(rows, schema=schema)


def _name(described: dict) -> str:
    return Path(described["run"]).name if described.get("run") else Path(described["path"]).stem


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no inf/nan (jq rejects them); a zero-probability word makes a loss infinite
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _fmt(value, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def print_table(result: dict, name_a: str, name_b: str) -> None:
    """The bins and the overall row as a table on stderr."""
    from rich.table import Table

    table = Table(title=f"B = {name_b} vs A = {name_a}: loss(B) − loss(A) by training frequency in {name_a if result['freq_from'] == 'a' else name_b}",
                  title_justify="left")
    for header in ("bin", "words", "types", "median Δ", "mean Δ", "ppl A", "ppl B"):
        table.add_column(header, justify="left" if header == "bin" else "right")
    for row in result["bins"] + [result["overall"]]:
        table.add_row(row["bin"], f"{row['words']:,}", f"{row['types']:,}", _fmt(row["median_diff"], "+.4f"),
                      _fmt(row["mean_diff"], "+.4f"), _fmt(row["ppl_a"], ".2f"), _fmt(row["ppl_b"], ".2f"),
                      end_section=row is result["bins"][-1])
    err.print(table)
    if "words" in result:
        print_words(result["words"], name_a, name_b)
    log("Δ in nats per word (loss = −ln p); negative: B is better.")


def print_words(words: dict, name_a: str, name_b: str) -> None:
    """The word types that make the difference, each way, as a table on stderr."""
    from rich.table import Table

    total = words["total_diff"]
    table = Table(title=f"the words that make the difference: Σ loss(B) − loss(A) over each type's tokens "
                        f"(all tokens: {_fmt(total, '+,.1f')} nats)", title_justify="left")
    for header in ("", "word", "tokens", "train freq", "Σ Δ", "mean Δ"):
        table.add_column(header, justify="left" if header in ("", "word") else "right")
    for side, label in (("b_worse", f"{name_b} worse"), ("b_better", f"{name_b} better")):
        for i, w in enumerate(words[side]):
            table.add_row(label if i == 0 else "", w["word"], f"{w['tokens']:,}", f"{w['train_freq']:,}",
                          f"{w['sum_diff']:+,.1f}", f"{w['mean_diff']:+.4f}", end_section=i == len(words[side]) - 1)
    err.print(table)


def run_compare(settings: CompareSettings, path_a: Path, path_b: Path, output: Path | None = None,
                plot: Path | None = None, force: bool = False) -> dict:
    """Compare the per-token files A and B (``compare``; its table on stderr), write the bins table
    to ``output`` and a bar chart to ``plot`` where given; return the record: the comparison with
    its names and outputs, infinities as None (JSON has none)."""
    edges, column, freq_from = settings.edges, settings.column, settings.freq_from
    with contextlib.ExitStack() as outputs:
        for path, flag, what in ((output, "-o", "comparison table"), (plot, "`plot`", "file")):
            if path is not None:
                outputs.enter_context(claim_output(path, force, flag, what, inputs=(path_a, path_b)))
        if plot is not None:
            from ..plots import figure_format, require_matplotlib

            figure_format(plot)
            require_matplotlib()

        result = compare(path_a, path_b, edges, column=column, freq_from=freq_from, words=settings.words)
        name_a, name_b = settings.names.split(",") if settings.names else (_name(result["a"]), _name(result["b"]))
        for key in ("vocab", "cache"):
            if settings_differ(result, key):
                log(f"warning: A and B were evaluated with different --{key} ({result['a'][key]} vs {result['b'][key]})")
        print_table(result, name_a, name_b)
        result["names"] = [name_a, name_b]
        if output is not None:
            meta = provenance("compare", a=result["a"], b=result["b"], dataset_checksum=result["dataset_checksum"],
                              split=result["split"], column=result["column"], freq_from=freq_from, edges=list(edges),
                              sign=result["sign"], overall=_finite(result["overall"]))
            with atomic_path(output) as tmp:
                write_parquet(rows_table(result["bins"]), tmp, meta)
        if plot is not None:
            from ..plots import bar_by_bin

            bar_by_bin(result["bins"], plot,
                       title=f"{name_b} vs {name_a}: median loss({name_b}) − loss({name_a}); negative = {name_b} better",
                       xlabel=f"training frequency (in {name_a if freq_from == 'a' else name_b}'s training data)",
                       ylabel="median Δ loss (nats)" + (", before the cache" if column == "model" else ""))
    return _finite({**result, "output": str(output) if output else None, "plot": str(plot) if plot else None})
