"""groc eval: perplexity of a trained run on a split, closed or open vocabulary, optional cache."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Optional

import typer

from ..artifacts.locks import claim_output
from ..console import emit_json
from ..errors import GrocError
from ..evaluation.grid import parse_grid
from ..evaluation.settings import EvalSettings, option_help
from ._inputs import RECORD_JSON, THREADS, VERIFY
from . import _settings as S
from . import SUMMARIES

EPILOG = """[bold]Examples[/bold]

  groc eval runs/ptb-groc data/ptb --split test

  groc eval runs/wiki-groc data/wiki --vocab union --downweight-new 0.5 --per-token tokens.parquet

  groc eval runs/ptb-tied data/ptb --cache local --cache-weight 0.1 --theta 0.3 --cache-size 2000

  groc eval runs/ptb-tied data/ptb --cache unbounded --index IVF1024,PQ32 --index-train 50000 --knn 1024

  groc dump runs/ptb-tied data/ptb --split test -o states/ptb-test && groc eval runs/ptb-tied data/ptb --states states/ptb-test --cache local

  groc eval runs/ptb-tied data/ptb --states states/ptb-valid --cache local --grid "cache-weight=0.02,0.05,0.1;theta=0.1,0.3,0.5" --grid-out grid.parquet --plot grid.png

  groc eval runs/ptb-tied data/ptb --split valid --cache unbounded --index IVF256,PQ32 --index-save ptb.ivf && groc eval runs/ptb-tied data/ptb --cache unbounded --index IVF256,PQ32 --index-load ptb.ivf

  groc eval runs/ptb-tied data/ptb --states states/ptb-test --cache unbounded --index IVF4096,PQ32,RFlat --datastore disk

  groc eval runs/ptb-tied data/ptb --cache unbounded --index Flat --search torch --device cuda

  groc eval runs/ptb-groc data/news14 --vocab union --lexicon data/news.lexicon.parquet --downweight-new 0.1

  groc eval runs/ptb-tied data/ptb --config local-cache.toml theta=0.5

Prints one JSON object on stdout (perplexity, tokens, oov_rate, vocab_size, settings, seconds, tokens_per_s;
with --grid also "grid" (every setting with its perplexity) and "best"; "perplexity" is then the best one's).
Each evaluation without --grid is also kept inside the run, as RUN/evals/SPLIT-DATASET-DIGEST.json ("recorded"
names it; the same evaluation again replaces it), where 'groc runs RUN' shows it with its dataset and split.
"""


RUN_DIR = typer.Argument(..., help="Run directory from 'groc train' or 'groc finetune'.")
DATASET = typer.Argument(..., help="Dataset directory from 'groc prepare' (matched to the model by word strings).")
OVERRIDES = typer.Argument(None, metavar="[KEY=VALUE]...", help="Override any setting, e.g. cache=local theta=0.5 "
                           "split=valid (after the flags' values and the --config file's).")
CONFIG = typer.Option(None, "--config", help="Settings from a JSON or TOML file (e.g. cache = \"local\", theta = 0.5); "
                      "flags and KEY=VALUE arguments override it.")
GRID_OUT = S.placed_after("grid", typer.Option(None, "--grid-out", help="With --grid: write the table (one row per "
                                               "setting, best marked) as Parquet."))
PLOT = S.placed_after("grid", typer.Option(None, "--plot", help="With --grid of one or two settings: draw the "
                                           "perplexity of each combination as a PNG heatmap, best outlined (needs "
                                           "matplotlib)."))
PER_TOKEN = S.placed_after("lexicon", typer.Option(None, "--per-token", help="Write one Parquet row per prediction: "
                                                   "position, word, in_train, train_freq, model_logp, final_logp "
                                                   "(natural log)."))
STATES = S.placed_after("lexicon", typer.Option(None, "--states", help="Read hidden states and model log-probs from a "
                                                "'groc dump' directory instead of running the model (refused if its "
                                                "model or dataset checksum differs)."))
FORCE = typer.Option(False, "--force", help="Replace an existing --per-token, --grid-out, --plot or --index-save file.")


def eval_command(
    ctx: typer.Context, run_dir: Path = RUN_DIR, dataset: Path = DATASET, overrides: Optional[list[str]] = OVERRIDES,
    config: Optional[Path] = CONFIG, grid_out: Optional[Path] = GRID_OUT, plot: Optional[Path] = PLOT,
    per_token: Optional[Path] = PER_TOKEN, states: Optional[Path] = STATES, force: bool = FORCE,
    verify: bool = VERIFY, threads: str = THREADS, json_out: bool = RECORD_JSON, **options,
) -> None:
    """Perplexity of a trained model on a split (one stream, carried state); JSON on stdout, a summary line on stderr."""
    with S.setting_errors(ctx, GrocError):  # the library's errors name settings: say their flags
        if per_token is not None and str(per_token) == "-":
            raise GrocError("--per-token -: the per-token table is Parquet, written to a file (stdout has eval's JSON "
                            "record); give a path, e.g. --per-token test.parquet")
        from ..evaluation.perplexity import EvalOutputs, evaluate  # torch: not for --help
        from ..runtime import set_threads
        set_threads(threads)
        origin: dict[str, str] = {}
        given = {name: value for name, value in options.items() if value or name not in FROM_STATES}
        settings = S.resolve(ctx, {"eval": EvalSettings}, given, config, overrides, origin=origin)["eval"]
        with contextlib.ExitStack() as outputs:
            axes = _plot_axes(plot, settings.grid, settings.cache)
            if plot is not None:
                outputs.enter_context(claim_output(plot, force, "--plot", "file", inputs=(run_dir, dataset, states)))
            result = evaluate(run_dir, dataset, settings, EvalOutputs(per_token, grid_out, force), states_dir=states,
                              vocab_given="vocab" in origin, split_given="split" in origin, verify=verify)
            if plot is not None:
                _draw(result, settings, settings.cache, axes, plot, run_dir)
        if settings.grid is None:
            _record(result, run_dir)
        if json_out:
            emit_json(result)


#: The settings whose options default to nothing: their default is the --states directory's, else the field's.
FROM_STATES = ("split", "vocab")


def command():
    """eval_command with one option per setting (EvalSettings' and each registered cache's), generated
    from their declarations when the command is registered; --cache's and --grid's help list the
    registered caches (``option_help``)."""
    return S.with_settings(EvalSettings, defaults=dict.fromkeys(FROM_STATES), helps=option_help(),
                           after="config")(eval_command)


def _draw(result: dict, settings: EvalSettings, cache: str, axes: tuple[str, str], plot: Path, run_dir: Path) -> None:
    """--plot: the grid's perplexities as a heatmap (``cache``: the one the grid varies)."""
    from ..plots import heatmap

    rows = [{**row, "cache": cache} for row in result["grid"]]
    heatmap(rows, axes[0], axes[1], "perplexity", plot,
            title=f"{Path(run_dir).name} on {result.get('split', settings.split)}: perplexity, {cache} cache")
    result["plot"] = str(plot)


def _record(result: dict, run_dir: Path) -> None:
    """Keep the evaluation's record inside its run (evals/), where 'groc runs' finds it; a run that cannot be
    written (a read-only copy) still gets its result, with a note."""
    from ..console import log
    from ..runs import record_evaluation

    try:
        result["recorded"] = str(record_evaluation(result, run_dir))
    except OSError as exc:
        log(f"note: this evaluation is not recorded in {run_dir}/evals ({exc.strerror or exc}); 'groc runs' finds it "
            "only where its JSON is saved")


def _plot_axes(plot: Optional[Path], grid: Optional[str], cache: str) -> tuple[str, str]:
    """The heatmap's x and y columns for --plot (checked, with matplotlib, before any work)."""
    if plot is None:
        return ("", "")
    if grid is None:
        raise GrocError("--plot draws a --grid: add --grid, e.g. --grid 'cache-weight=0.05,0.1;theta=0.1,0.3'")
    names = [name.replace("-", "_") for name in parse_grid(grid, cache)]
    if len(names) > 2:
        raise GrocError(f"--plot draws one or two --grid settings; this grid varies {len(names)} ({', '.join(names)})")
    from ..plots import require_matplotlib

    require_matplotlib()
    return (names[0], names[1]) if len(names) == 2 else (names[0], "cache")


def register(app: typer.Typer) -> None:
    app.command("eval", epilog=EPILOG, help=SUMMARIES["eval"])(command())
