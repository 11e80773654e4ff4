"""groc prepare: text files -> dataset directory (splits as Parquet, vocabulary, manifest)."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Optional

import typer

from ..artifacts import claim_output
from ..console import emit_json, log
from ..errors import GrocError
from ..text.dataset import SPLITS, count_splits, file_record, parse_budgets, write_dataset
from ..text.io import TokenLines, check_input_file
from ..text.tokenizer import TokenizeOptions
from . import SUMMARIES

EPILOG = """[bold]Examples[/bold]

  groc prepare --train ptb.train.txt --valid ptb.valid.txt --test ptb.test.txt -o data/ptb

  groc prepare --train news.2007.en --tokenize --lower --split 2M,2M,10M -o data/news07

  groc tokenize --lower raw.txt | groc prepare --train - --split 90K,10K -o data/sample
"""


def prepare(
    train: Optional[str] = typer.Option(None, "--train", help="Training text, one sentence or paragraph per line ('-' reads stdin)."),
    valid: Optional[str] = typer.Option(None, "--valid", help="Validation text."),
    test: Optional[str] = typer.Option(None, "--test", help="Test text."),
    output: Path = typer.Option(..., "-o", "--output", help="Dataset directory to create."),
    do_tokenize: bool = typer.Option(False, "--tokenize", help="Moses-tokenize raw text first (otherwise split on whitespace as is)."),
    lower: bool = typer.Option(False, "--lower", help="Lowercase while tokenizing (with --tokenize)."),
    split: Optional[str] = typer.Option(None, "--split", help="With only --train: consecutive token budgets train,valid,test, e.g. 2M,2M,10M ('rest' takes the remainder)."),
    eos: bool = typer.Option(True, "--eos/--no-eos", help="Append an <eos> token to every line (PTB/WikiText convention)."),
    min_count: int = typer.Option(1, "--min-count", min=1, help="Training words seen fewer times map to <unk>."),
    max_vocab: Optional[int] = typer.Option(None, "--max-vocab", min=3, help="Keep at most this many types (incl. <unk>, <eos>); rarer map to <unk>."),
    jobs: int = typer.Option(1, "-j", "--jobs", min=1, help="Tokenizer processes (with --tokenize)."),
    errors: str = typer.Option("strict", "--errors", help="Invalid UTF-8: 'strict' or 'replace'."),
    force: bool = typer.Option(False, "--force", help="Replace the output directory if it exists."),
    json_out: bool = typer.Option(False, "--json", help="Print the manifest as JSON on stdout."),
) -> None:
    """Build a dataset directory: each split as Parquet token ids, a vocabulary with per-split counts, and a manifest."""
    given = {name: path for name, path in zip(SPLITS, (train, valid, test)) if path is not None}
    if not given:
        raise GrocError("give at least one of --train, --valid, --test")
    if sum(1 for p in given.values() if p == "-") > 1:
        raise GrocError("only one split can be read from stdin ('-')")
    if split is not None and set(given) != {"train"}:
        raise GrocError("--split divides the --train file; do not combine it with --valid or --test")
    if lower and not do_tokenize:
        raise GrocError("--lower applies while tokenizing; add --tokenize (or lowercase with 'groc tokenize --lower')")
    if errors not in ("strict", "replace"):
        raise GrocError(f"--errors {errors!r}: expected 'strict' or 'replace'")
    budgets = parse_budgets(split) if split else None
    for name, path in given.items():
        if path != "-":
            check_input_file(Path(path), f"--{name}")
    sources = tuple(path for path in given.values() if path != "-")
    with claim_output(output, force, kind="dataset directory", inputs=sources), contextlib.ExitStack() as stack:
        start = time.perf_counter()
        options = TokenizeOptions(lower=lower)
        # Each input is read twice (count words, then write ids), so memory holds counts, not tokens.
        readers = {
            name: stack.enter_context(TokenLines(path, f"--{name}", spool_dir=output.parent, tokenize=do_tokenize,
                                                 options=options, jobs=jobs, errors=errors))
            for name, path in given.items()
        }
        scan = count_splits(readers, budgets=budgets, eos=eos, labels={name: r.label for name, r in readers.items()})
        inputs = {name: file_record(Path(path)) if path != "-" else {"path": "-"} for name, path in given.items()}
        if budgets:
            inputs = {"split_source": inputs["train"]}
            short = [name for name, stats in scan.stats.items() if not stats.lines]
            if short:
                raise GrocError(f"--split {split}: the input ran out before the {short[0]} split; lower the budgets")
            for (name, stats), budget in zip(scan.stats.items(), budgets):
                if budget is not None and stats.tokens < budget:
                    log(f"warning: the {name} split has {stats.tokens:,} tokens, fewer than its budget of {budget:,} (input ran out)")
        arguments = {
            "tokenize": do_tokenize, "lower": lower, "split": split, "eos": eos,
            "min_count": min_count, "max_vocab": max_vocab, "errors": errors,
        }
        manifest = write_dataset(scan, output, min_count=min_count, max_vocab=max_vocab, inputs=inputs, arguments=arguments)
        seconds = time.perf_counter() - start
        parts = []
        for name, s in manifest["splits"].items():
            oov = f", OOV {100 * s['oov_rate']:.2f}%" if "oov_rate" in s and name != "train" else ""
            parts.append(f"{name} {s['tokens']:,} tokens{oov}")
        vocab = f"vocabulary {manifest['vocab_size']:,}" if manifest["vocab_size"] else f"no training split, {manifest['types_total']:,} types"
        log(f"wrote {output}: {vocab}; " + "; ".join(parts) + f" ({seconds:.1f}s)")
        if json_out:
            emit_json(manifest)


def register(app: typer.Typer) -> None:
    app.command("prepare", epilog=EPILOG, help=SUMMARIES["prepare"])(prepare)
