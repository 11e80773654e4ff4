"""groc eval: perplexity of a trained run on a split, closed or open vocabulary, optional cache."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Optional

import typer

from ..artifacts import claim_output
from ..console import emit_json
from ..errors import GrocError
from ..runtime import set_threads
from ..evaluation.perplexity import EvalSettings, evaluate, parse_grid
from ._inputs import RECORD_JSON, THREADS, VERIFY
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

  groc eval runs/ptb-groc data/news14 --vocab union --lexicon data/news.lexicon.parquet --downweight-new 0.1

Prints one JSON object on stdout (perplexity, tokens, oov_rate, vocab_size, settings, seconds, tokens_per_s;
with --grid also "grid" (every setting with its perplexity) and "best"; "perplexity" is then the best one's).
"""


def eval_command(
    run_dir: Path = typer.Argument(..., help="Run directory from 'groc train' or 'groc finetune'."),
    dataset: Path = typer.Argument(..., help="Dataset directory from 'groc prepare' (matched to the model by word strings)."),
    split: Optional[str] = typer.Option(None, "--split", help="Split to evaluate: train, valid or test (default: test, "
                                        "or the split of --states)."),
    vocab: Optional[str] = typer.Option(None, "--vocab", help="model: closed vocabulary, unknown words -> <unk> (default, "
                                        "or that of --states). union: the model's vocabulary plus every type of the split (paper 5.1)."),
    uniform_weight: Optional[float] = typer.Option(None, "--uniform-weight", help="u in p = (1-u) p_model + u/|vocab|. "
                                                   "Default 0.01 for table models with --vocab union (they give new words no mass), else 0."),
    downweight_new: float = typer.Option(1.0, "--downweight-new", help="GroC, --vocab union: multiply the probability of words outside "
                                         "the training vocabulary by F and renormalise (before any cache)."),
    cache: str = typer.Option("none", "--cache", help="none, unigram, local (Grave et al. 2017c) or unbounded (Grave et al. 2017a)."),
    cache_weight: float = typer.Option(0.1, "--cache-weight", help="w in p = (1-w) p_model + w p_cache: the cache's share. "
                                       "Grave et al. 2017c's λ is this share; the GroC paper's λ is 1 minus it."),
    theta: float = typer.Option(0.3, "--theta", help="local: flatness θ of exp(θ hᵀh_i)."),
    cache_size: Optional[int] = typer.Option(None, "--cache-size", help="local: window of past positions (default 10000); "
                                             "unigram: count only the last N targets (default: all)."),
    knn: int = typer.Option(1024, "--knn", help="unbounded: neighbours k."),
    index: str = typer.Option("IVF4096,PQ32", "--index", help="unbounded: FAISS factory string ('Flat' is exact)."),
    nprobe: int = typer.Option(8, "--nprobe", help="unbounded: inverted lists visited per query (IVF indexes)."),
    kernel: str = typer.Option("gaussian", "--kernel", help="unbounded: gaussian or epanechnikov."),
    bandwidth_scale: float = typer.Option(1.0, "--bandwidth-scale", help="unbounded: multiplies the k-th-neighbour bandwidth (1 = paper)."),
    index_train: Optional[int] = typer.Option(None, "--index-train", help="unbounded, trainable index (IVF/PQ): train it on the first N "
                                              "states of the evaluated stream (default min(200000, tokens)); the quantizer sees "
                                              "those states, never their targets, before they are scored."),
    index_save: Optional[Path] = typer.Option(None, "--index-save", help="unbounded: write the trained, empty FAISS index "
                                              "(quantizer and codebooks, no stored states) to this file for --index-load."),
    index_load: Optional[Path] = typer.Option(None, "--index-load", help="unbounded: use a trained index from --index-save "
                                              "instead of training one (e.g. trained on valid states, used on test)."),
    datastore: str = typer.Option("memory", "--datastore", help="unbounded, large datastores: where an index ending in "
                                  "',RFlat' (exact re-ranking of its candidates) reads each state. memory: a float32 copy "
                                  "inside the index, 4 x d bytes a state. disk: the memory-mapped --states dump, so only the "
                                  "index's codes stay in memory (44 bytes a state for IVF...,PQ32); same results."),
    grid: Optional[str] = typer.Option(None, "--grid", help="Score every combination in one pass, e.g. "
                                       "'cache-weight=0.05,0.1;theta=0.1,0.5'. Names: cache-weight (any cache), theta "
                                       "(local), knn, kernel, bandwidth-scale (unbounded); the others keep their flag's value."),
    grid_out: Optional[Path] = typer.Option(None, "--grid-out", help="With --grid: write the table (one row per setting, "
                                            "best marked) as Parquet."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="With --grid of one or two settings: draw the perplexity of "
                                        "each combination as a PNG heatmap, best outlined (needs matplotlib)."),
    lexicon: Optional[Path] = typer.Option(None, "--lexicon", help="GroC: use this lexicon table instead of the run's own "
                                           "(other coverage, Table 4; relations of new words in --vocab union)."),
    per_token: Optional[Path] = typer.Option(None, "--per-token", help="Write one Parquet row per prediction: position, word, in_train, "
                                             "train_freq, model_logp, final_logp (natural log)."),
    states: Optional[Path] = typer.Option(None, "--states", help="Read hidden states and model log-probs from a 'groc dump' directory "
                                          "instead of running the model (refused if its model or dataset checksum differs)."),
    checkpoint: str = typer.Option("best", "--checkpoint", help="best or last."),
    chunk: int = typer.Option(256, "--chunk", help="Positions run through the LSTM at once (results do not depend on it)."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N."),
    force: bool = typer.Option(False, "--force", help="Replace an existing --per-token, --grid-out, --plot or --index-save file."),
    verify: bool = VERIFY,
    threads: str = THREADS,
    json_out: bool = RECORD_JSON,
) -> None:
    """Perplexity of a trained model on a split (one stream, carried state); JSON on stdout, a summary line on stderr."""
    if per_token is not None and str(per_token) == "-":
        raise GrocError("--per-token -: the per-token table is Parquet, written to a file (stdout has eval's JSON "
                        "record); give a path, e.g. --per-token test.parquet")
    set_threads(threads)
    settings = EvalSettings(
        split=split or "test", vocab=vocab or "model", uniform_weight=uniform_weight, downweight_new=downweight_new, cache=cache,
        cache_weight=cache_weight, theta=theta, cache_size=cache_size, knn=knn, index=index, nprobe=nprobe, kernel=kernel,
        bandwidth_scale=bandwidth_scale, index_train=index_train, index_save=_str(index_save), index_load=_str(index_load),
        datastore=datastore, grid=grid, lexicon=_str(lexicon), checkpoint=checkpoint, chunk=chunk, device=device,
    )
    with contextlib.ExitStack() as outputs:
        axes = _plot_axes(plot, grid, cache)
        if plot is not None:
            outputs.enter_context(claim_output(plot, force, "--plot", "file", inputs=(run_dir, dataset, states)))
        result = evaluate(run_dir, dataset, settings, per_token=per_token, force=force, states_dir=states,
                          vocab_given=vocab is not None, split_given=split is not None, grid_out=grid_out, verify=verify)
        if plot is not None:
            from ..plots import heatmap

            rows = [{**row, "cache": cache} for row in result["grid"]]
            heatmap(rows, axes[0], axes[1], "perplexity", plot,
                    title=f"{Path(run_dir).name} on {result.get('split', settings.split)}: perplexity, {cache} cache")
            result["plot"] = str(plot)
    if json_out:
        emit_json(result)


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


def _str(path: Optional[Path]) -> Optional[str]:
    return None if path is None else str(path)


def register(app: typer.Typer) -> None:
    app.command("eval", epilog=EPILOG, help=SUMMARIES["eval"])(eval_command)
