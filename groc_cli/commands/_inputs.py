"""Options about the artifacts a command reads, defined once for every command that reads them."""

from __future__ import annotations

import typer

VERIFY = typer.Option(False, "--verify", help="Before any work, read every split of the dataset and check it against "
                      "the vocabulary's counts and the manifest's checksum (file sizes, schemas and the vocabulary "
                      "are always checked).")
