"""groc compare: median loss difference per training-frequency bin between two evaluations (paper Figure 3)."""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Optional

import typer

from ..artifacts import atomic_path, claim_output, provenance, write_parquet
from ..console import emit_json, err, log
from ..errors import GrocError
from ..evaluation.compare import DEFAULT_EDGES, compare, parse_bins, rows_table, settings_differ
from ._inputs import RECORD_JSON, choices
from . import SUMMARIES

DEFAULT_BINS = ",".join(map(str, DEFAULT_EDGES))

Column = choices("Column", "final", "model")
Side = choices("Side", "a", "b")


EPILOG = """[bold]Examples[/bold]

  groc eval runs/ptb-tied data/ptb --per-token tied.parquet && groc eval runs/ptb-groc data/ptb --per-token groc.parquet

  groc compare tied.parquet groc.parquet --plot fig3.png

  groc compare tied.parquet groc.parquet --bins 1,10,100,1000 --column model -o bins.parquet

  groc compare tied.parquet groc.parquet | jq '.bins[] | [.bin, .median_diff]'

Sign: diff = loss(B) - loss(A) in nats per word; negative means B, the second file, is better.
Prints one JSON object on stdout (inputs, settings, bins, overall) and a table on stderr.
"""


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


def _print_table(result: dict, name_a: str, name_b: str) -> None:
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
    log("Δ in nats per word (loss = −ln p); negative: B is better.")


def compare_command(
    a: Path = typer.Argument(..., metavar="A", help="Per-token Parquet of the baseline A (from 'groc eval --per-token')."),
    b: Path = typer.Argument(..., metavar="B", help="Per-token Parquet of the run B compared with it, on the same dataset and split."),
    bins: str = typer.Option(DEFAULT_BINS, "--bins", help="Lower edges of the training-frequency bins: [1,50), [50,100), ..., "
                             "[5000,∞) by default; unseen words (frequency 0) always form their own bin."),
    column: Column = typer.Option(Column.final, "--column", help="final: log-probability after any cache (final_logp); "
                               "model: before it (model_logp)."),
    freq_from: Side = typer.Option(Side.a, "--freq-from", help="Bin by the training frequencies recorded in A (default, the "
                                  "baseline) or in B; they differ when the runs were trained on different data."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Also write the bins table as Parquet "
                                          "(bin, lo, hi, words, types, median_diff, mean_diff, ppl_a, ppl_b)."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Draw the median difference per bin as a PNG bar chart "
                                        "(needs matplotlib: pip install 'groc-cli\\[plots]')."),
    names: Optional[str] = typer.Option(None, "--names", help="A,B: names for the table and plot (default: the run "
                                        "directories' names)."),
    force: bool = typer.Option(False, "--force", help="Replace an existing --output or --plot file."),
    json_out: bool = RECORD_JSON,
) -> None:
    """Median loss difference per training-frequency bin between two per-token files (the GroC paper's Figure 3)."""
    column, freq_from = column.value, freq_from.value
    edges = parse_bins(bins)
    if names is not None and len(names.split(",")) != 2:
        raise GrocError(f"--names {names!r}: give two names separated by a comma, e.g. --names tied,groc")
    with contextlib.ExitStack() as outputs:
        for path, flag, what in ((output, "-o", "comparison table"), (plot, "--plot", "file")):
            if path is not None:
                outputs.enter_context(claim_output(path, force, flag, what, inputs=(a, b)))
        if plot is not None:
            from ..plots import require_matplotlib

            require_matplotlib()

        result = compare(a, b, edges, column=column, freq_from=freq_from)
        name_a, name_b = names.split(",") if names else (_name(result["a"]), _name(result["b"]))
        for key in ("vocab", "cache"):
            if settings_differ(result, key):
                log(f"warning: A and B were evaluated with different --{key} ({result['a'][key]} vs {result['b'][key]})")
        _print_table(result, name_a, name_b)

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
        if json_out:
            emit_json(_finite({**result, "names": [name_a, name_b], "output": str(output) if output else None,
                               "plot": str(plot) if plot else None}))


def register(app: typer.Typer) -> None:
    app.command("compare", epilog=EPILOG, help=SUMMARIES["compare"])(compare_command)
