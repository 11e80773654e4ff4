"""Options shared by several commands (the artifacts they read, their CPU threads), defined once."""

from __future__ import annotations

import enum

import typer

VERIFY = typer.Option(False, "--verify", help="Before any work, read every split of the dataset and check it against "
                      "the vocabulary's counts and the manifest's checksum (file sizes, schemas and the vocabulary "
                      "are always checked).")
THREADS = typer.Option("auto", "--threads", help="CPU threads of this process (torch and FAISS): a number, or auto: "
                       "the cores it may use, divided among torchrun's processes on the node, less the cores that "
                       "other work keeps busy (measured over 0.2 s at start), at least 1; OMP_NUM_THREADS, if set, is used "
                       "as given. A number above the cores is one warning and the cores. Oversubscribed cores cost many times their share (docs/benchmarks.md, 'CPU threads').")
RECORD_JSON = typer.Option(True, "--json/--no-json", help="Print the stage's record as JSON on stdout (the default); "
                           "--no-json leaves stdout empty (the one-line summary on stderr stays).")


class Choice(str, enum.Enum):
    """An option's allowed values, shown as <a|b|c> in --help; a command reads `.value`."""


def choices(name: str, *values: str) -> type[Choice]:
    """A Choice whose members are named as their values: choices("Vocab", "model", "union")."""
    return Choice(name, [(v, v) for v in values])


Checkpoint = choices("Checkpoint", "best", "last")
Vocab = choices("Vocab", "model", "union")
Utf8Errors = choices("Utf8Errors", "strict", "replace")


def checkpoint_option() -> Checkpoint:
    return typer.Option(Checkpoint.best, "--checkpoint", help="Which weights of the run: best (lowest validation "
                        "perplexity) or last.")


UTF8_ERRORS = typer.Option(Utf8Errors.strict, "--errors", help="Invalid UTF-8: 'strict' stops naming the line, "
                           "'replace' substitutes U+FFFD.")
