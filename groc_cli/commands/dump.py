"""groc dump: hidden states, targets and model log-probs of a split, for cache tuning."""

from __future__ import annotations

from pathlib import Path

import typer

from ..console import emit_json
from ..evaluation.settings import DumpSettings
from . import _settings as S
from ._inputs import RECORD_JSON, THREADS, VERIFY
from . import SUMMARIES

EPILOG = """[bold]Examples[/bold]

  groc dump runs/ptb-tied data/ptb --split valid -o states/ptb-valid

  groc eval runs/ptb-tied data/ptb --states states/ptb-valid --cache local --theta 0.5 --cache-weight 0.05

  groc dump runs/wiki-groc data/wiki --split test --vocab union --dtype float32 -o states/wiki-test-union

Writes STATES_DIR/{hidden,targets,logp[,new_mass]}.npy, vocab.parquet and meta.json; prints meta.json as JSON.
"""


@S.with_settings(DumpSettings, defaults={"split": ...}, after="output_dir")
def dump(
    ctx: typer.Context,
    run_dir: Path = typer.Argument(..., help="Run directory from 'groc train' or 'groc finetune'."),
    dataset: Path = typer.Argument(..., help="Dataset directory from 'groc prepare'."),
    output_dir: Path = typer.Option(..., "-o", "--output-dir", help="States directory to create."),
    force: bool = typer.Option(False, "--force", help="Replace an existing -o directory."),
    verify: bool = VERIFY,
    threads: str = THREADS,
    json_out: bool = RECORD_JSON,
    **settings,
) -> None:
    """Dump the states a cache needs (one stream, carried state), written incrementally and atomically."""
    from ..evaluation.states import dump_states  # torch: not for --help
    from ..runtime import set_threads

    set_threads(threads)
    with S.setting_errors(ctx):
        dump_settings = DumpSettings(**settings)
    record = dump_states(run_dir, dataset, output_dir, dump_settings, force=force, verify=verify)
    if json_out:
        emit_json(record)


def register(app: typer.Typer) -> None:
    app.command("dump", epilog=EPILOG, help=SUMMARIES["dump"])(dump)
