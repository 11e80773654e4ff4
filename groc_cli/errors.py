"""User-facing errors: one line on stderr, non-zero exit, no traceback (unless --debug)."""


class GrocError(Exception):
    """An error caused by the user's input or environment, with a message that names the fix."""

    exit_code = 2


class SettingError(GrocError):
    """A setting's value that the input cannot take (adaptive's cutoffs for a smaller vocabulary); the
    message starts with the setting's name, which a command replaces by its flag."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is so that it cleans up as after Ctrl-C (exit status 143)."""


class DamagedInput(GrocError):
    """A file that an earlier stage wrote is missing, unreadable, foreign or inconsistent with the
    files beside it. The message names the file and the command that writes it again, because
    repairing it by hand would only move the damage somewhere less visible."""

    def __init__(self, file, problem: str, rebuild: str):
        super().__init__(f"{file} {problem}; {rebuild}")


class StdoutClosed(Exception):
    """The reader of stdout went away (`groc tokenize | head`): a normal end, exit status 0. Not an
    OSError, which typer would turn into exit status 1 before groc's own handler saw it."""
