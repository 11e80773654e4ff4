"""groc dump: hidden states, targets and model log-probs of a split, for cache tuning."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..console import emit_json
from ..runtime import set_threads
from ..evaluation.states import dump_states
from ._inputs import RECORD_JSON, THREADS, VERIFY, Checkpoint, Vocab, checkpoint_option, choices
from . import SUMMARIES

StateDtype = choices("StateDtype", "float16", "float32")


EPILOG = """[bold]Examples[/bold]

  groc dump runs/ptb-tied data/ptb --split valid -o states/ptb-valid

  groc eval runs/ptb-tied data/ptb --states states/ptb-valid --cache local --theta 0.5 --cache-weight 0.05

  groc dump runs/wiki-groc data/wiki --split test --vocab union --dtype float32 -o states/wiki-test-union

Writes STATES_DIR/{hidden,targets,logp[,new_mass]}.npy, vocab.parquet and meta.json; prints meta.json as JSON.
"""


def dump(
    run_dir: Path = typer.Argument(..., help="Run directory from 'groc train' or 'groc finetune'."),
    dataset: Path = typer.Argument(..., help="Dataset directory from 'groc prepare'."),
    split: str = typer.Option(..., "--split", help="Split to dump: train, valid or test."),
    output_dir: Path = typer.Option(..., "-o", "--output-dir", help="States directory to create."),
    vocab: Vocab = typer.Option(Vocab.model, "--vocab", help="model or union (as 'groc eval --vocab'); union also stores each "
                              "position's probability mass on new words (GroC) for --downweight-new."),
    dtype: StateDtype = typer.Option(StateDtype.float16, "--dtype", help="Hidden states as float16 (half the disk; caches then see "
                              "rounded states) or float32 (same results as 'groc eval' without --states)."),
    checkpoint: Checkpoint = checkpoint_option(),
    chunk: int = typer.Option(256, "--chunk", help="Positions run through the LSTM at once."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N."),
    lexicon: Optional[Path] = typer.Option(None, "--lexicon", help="GroC: use this lexicon table instead of the run's own "
                                           "(recorded in meta.json)."),
    force: bool = typer.Option(False, "--force", help="Replace an existing -o directory."),
    verify: bool = VERIFY,
    threads: str = THREADS,
    json_out: bool = RECORD_JSON,
) -> None:
    """Dump the states a cache needs (one stream, carried state), written incrementally and atomically."""
    set_threads(threads)
    record = dump_states(run_dir, dataset, split, output_dir, vocab.value, dtype.value, checkpoint.value, chunk, device,
                         force, lexicon, verify)
    if json_out:
        emit_json(record)


def register(app: typer.Typer) -> None:
    app.command("dump", epilog=EPILOG, help=SUMMARIES["dump"])(dump)
