"""groc generate: sample text from a trained run, over its own vocabulary or (GroC) one chosen now."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Optional

import typer

from ..console import write_stdout
from ..errors import GrocError, SettingError
from ..generation_settings import GenerateInput, GenerateSettings
from . import SUMMARIES
from . import _settings as S
from ._inputs import THREADS, UTF8_ERRORS, Checkpoint, Utf8Errors, checkpoint_option

EPILOG = """[bold]Examples[/bold]

  groc generate runs/emma-groc "she was" --max-tokens 20 --seed 1

  groc generate runs/emma-groc "the captain" --vocab data/persuasion --num-samples 3 --top-p 0.9

  groc generate runs/emma-groc --input prompts.txt --vocab words.txt --lexicon persuasion.lexicon.parquet --json

  groc tokenize --lower < openings.txt | groc generate runs/emma-tied --input - --temperature 0

  groc generate runs/emma-tied "she was" --no-unk --num-samples 5 --json | jq -r .text

Writes one line per sample as it is drawn (prompt lines in order, --num-samples each): the words after
the prompt, without the final <eos>; with --json one JSON object per line, written as each sample ends
(prompt, sample, text, tokens as \\[word, natural-log probability under the model], stop: eos or
max_tokens). No prompt, or an empty one, starts a line from nothing. --vocab (GroC only) draws from the
words of a word list (one word a line), a dataset directory's vocabulary (a test-only dataset's: every word
of its splits), or 'model' (the run's own, the default). The run's own vocabulary holds <unk> (the rare
and unseen words of its training data), which samples may emit; --no-unk never draws it.
"""


PROMPT = typer.Argument(None, help="The prompt (tokenized words, as the run's data); none: start from nothing, or "
                        "read --input.")
INPUT = typer.Option(None, "--input", metavar="FILE|-", help="Prompts, one a line ('-': stdin); each line gets "
                     "--num-samples samples.")
AS_JSON = typer.Option(False, "--json", help="One JSON object per sample, with each word's log-probability.")


@S.with_settings(GenerateSettings)
@S.with_settings(GenerateInput, after="input")
def generate(
    ctx: typer.Context,
    run_dir: Path = typer.Argument(..., help="Run directory from 'groc train' or 'groc finetune'."),
    prompt: Optional[str] = PROMPT, input: Optional[str] = INPUT, as_json: bool = AS_JSON,
    checkpoint: Checkpoint = checkpoint_option(),
    device: str = typer.Option("cpu", "--device", help="auto, cpu, cuda or cuda:N."),
    errors: Utf8Errors = UTF8_ERRORS, threads: str = THREADS,
    **settings,
) -> None:
    """Sample text from a trained run, one sample a line, streamed as it is drawn."""
    with S.setting_errors(ctx, GrocError):  # the library's errors name settings: say their flags
        if prompt is not None and input is not None:
            raise GrocError("give a prompt or --input, not both")
        reading, drawing = S.settings_of(ctx, GenerateInput, settings), S.settings_of(ctx, GenerateSettings, settings)
        _check_vocab(reading.vocab)
        from ..api import load_run
        from ..runtime import set_threads
        from ..text.io import open_input

        set_threads(threads)
        stream = open_input(input, "--input") if input is not None else None
        with S.setting_errors(ctx, SettingError):
            run = load_run(run_dir, checkpoint=checkpoint.value, device=device, lexicon=reading.lexicon)
            run.generation_vocab(reading.vocab)  # refused (a table model, an empty list) before any prompt is read
        with contextlib.ExitStack() as stack, S.setting_errors(ctx, SettingError):
            prompts = _prompts(stack, stream, prompt, input, errors, reading)
            _write(run.generate_stream(prompts, reading.vocab, **drawing.as_dict()), as_json)


def _check_vocab(vocab: Optional[str]) -> None:
    """--vocab names the run's own vocabulary ('model'), or a word list, dataset or run directory that exists."""
    if vocab is not None and vocab != "model" and not Path(vocab).exists():
        raise GrocError(f"--vocab {vocab}: no such file or directory (a word list, a dataset or run directory, or 'model')")


def _prompts(stack: contextlib.ExitStack, stream, prompt: Optional[str], input: Optional[str], errors: Utf8Errors,
             reading: GenerateInput):
    """The prompts as the samples read them: ``prompt`` (none: one from nothing), or the lines of
    ``stream``, --input's (closed by ``stack``), tokenized as ``reading`` says."""
    from ..text.tokenizer import decode_lines, text_lines

    if stream is None:
        return text_lines(iter([prompt or ""]), reading)
    stack.enter_context(contextlib.closing(stream))
    return _not_empty(text_lines(decode_lines(stream, errors=errors.value, name="stdin" if input == "-" else input),
                                 reading), input)


def _write(samples, as_json: bool) -> None:
    """Each sample on stdout as it is drawn: its words as they come, or (``as_json``) its JSON object when it ends."""
    started = False
    for sample, word in samples:
        if as_json:
            if word is None:
                write_stdout(json.dumps(sample.as_dict()) + "\n", flush=True)
        elif word is None:
            write_stdout("\n", flush=True)
            started = False
        else:  # a word as soon as it is drawn
            write_stdout((" " if started else "") + word, flush=True)
            started = True


def _not_empty(prompts, name):
    """The prompts, refusing a file or stdin with none (a blank line is a prompt: start from nothing)."""
    any_line = False
    for line in prompts:
        any_line = True
        yield line
    if not any_line and name is not None:
        raise GrocError(f"--input {name}: no prompts (an empty file); give one prompt a line, or an empty line to "
                        "start from nothing")


def register(app: typer.Typer) -> None:
    app.command("generate", epilog=EPILOG, help=SUMMARIES["generate"])(generate)
