"""groc: adaptive word-level language modeling from the command line."""

from .version import __version__


def load_run(path, checkpoint: str = "best", device: str = "cpu", vocab: str = "union", lexicon=None, threads="auto"):
    """A trained run as a Python object (``groc_cli.api.LoadedRun``): ``.score``, ``.log_probs``,
    ``.vocab``, ``.config``, ``.to``, ``.embed_words`` (GroC). See docs/api.md. Imported on first
    call, so ``import groc_cli`` does not pay for torch."""
    from .api import load_run as _load_run

    return _load_run(path, checkpoint, device, vocab, lexicon, threads)
