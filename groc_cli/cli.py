"""The `groc` command: one thin module per stage under groc_cli/commands/."""

from __future__ import annotations

import errno
import importlib
import os
import sys

from .errors import address_space_limited


def _torch_first_under_a_memory_limit() -> None:
    """Under an address-space limit (`ulimit -v`), load torch before anything else. Its import cannot fail
    gracefully: a static initialiser that the limit refuses throws std::bad_alloc and aborts the process
    (status 134, no message), while every later library's failure is an exception groc turns into its one
    out-of-memory line. Loaded first, torch needs what `python -c "import torch"` needs, so any limit at
    which that works lets groc report what does not fit. Without a limit nothing changes: commands that
    never use torch (tokenize, prepare) do not load it."""
    if not address_space_limited():
        return
    try:
        import torch  # noqa: F401
    except (ImportError, MemoryError, OSError, RuntimeError):
        pass  # the import where groc needs torch fails again, inside groc's handling


_torch_first_under_a_memory_limit()

import typer  # noqa: E402

try:  # typer >= 0.20 vendors click as typer._click
    from typer._click import exceptions as click_exceptions
except ImportError:  # older typer depends on click itself
    from click import exceptions as click_exceptions

from .version import __version__
from . import console, interrupts
from .errors import GrocError, OutOfMemory, StdoutClosed, Terminated, named, out_of_memory

from typer.core import TyperCommand, TyperGroup

from .commands import SUMMARIES

# Shared by the root command and each command's own Typer (lazily built, below).
_SETTINGS = dict(add_completion=False, pretty_exceptions_enable=False, pretty_exceptions_show_locals=False,
                 rich_markup_mode="rich", context_settings={"help_option_names": ["-h", "--help"]})


def _reflowed(epilog: str | None) -> str | None:
    """A command's epilog with each prose paragraph on one line, for rich to wrap to the terminal: typer's
    rich mode keeps single line breaks, so prose wrapped in the source broke mid-sentence in --help. An
    indented line (an example command) stays a line of its own."""
    if not epilog:
        return epilog
    paragraphs = []
    for paragraph in epilog.split("\n\n"):
        lines: list[str] = []
        for line in paragraph.split("\n"):
            if lines and line.strip() and not line[:1].isspace() and not lines[-1][:1].isspace():
                lines[-1] = f"{lines[-1].rstrip()} {line.strip()}"
            else:
                lines.append(line)
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


class _LazyCommand(TyperCommand):
    """A command whose module (and so torch) is imported only when the command runs or shows its own
    help: `groc --help`, `groc tokenize` and `groc prepare` never pay for the others' imports. It
    stands in the command list with its one-line summary; `real()` is the command itself. A command
    module that fails to import is a bug to see, not a command to hide: the ImportError propagates."""

    def __init__(self, name: str) -> None:
        super().__init__(name, help=SUMMARIES[name], short_help=SUMMARIES[name], add_help_option=False)
        self._real = None

    def real(self):
        if self._real is None:
            module = importlib.import_module(f"{__package__}.commands.{self.name}")
            single = typer.Typer(**_SETTINGS)
            module.register(single)
            self._real = typer.main.get_command(single)
            self._real.epilog = _reflowed(self._real.epilog)
        return self._real

    def make_context(self, info_name, args, parent=None, **extra):
        return self.real().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx):
        return self.real().invoke(ctx)


class _LazyGroup(TyperGroup):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.commands = {name: _LazyCommand(name) for name in SUMMARIES}

    def list_commands(self, ctx) -> list[str]:
        return list(SUMMARIES)  # in the order of the pipeline, not alphabetical


def command(name: str):
    """The click command of one stage (its options, for tests and tools)."""
    return _GROUP.commands[name].real()


app = typer.Typer(
    name="groc",
    cls=_LazyGroup,
    help=(
        "Adaptive word-level language modeling: grounded compositional outputs (GroC), "
        "weight tying, and local/unbounded neural caches.\n\n"
        "Stages chain through files and pipes: tokenize -> prepare -> lexicon -> train -> "
        "finetune -> dump -> eval."
    ),
    no_args_is_help=True,
    **_SETTINGS,
)


def _version(value: bool) -> None:
    if value:
        from .faiss_build import describe

        print(f"groc {__version__} ({describe()})")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version (and FAISS's: version, CPU or GPU build) and exit."),
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors."),
) -> None:
    if debug:
        os.environ["GROC_DEBUG"] = "1"


_GROUP = typer.main.get_command(app)


def _quiet_stdout() -> int:
    # The reader of our stdout went away: point stdout at /dev/null so that the interpreter's
    # final flush does not fail again, and end normally.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 0


def _interrupted(exc: BaseException | None) -> int:
    if console.stderr_gone:  # stderr's reader went away (StderrClosed): nothing to tell
        return 141
    if isinstance(exc, Terminated):
        print("groc: terminated", file=sys.stderr)
        return 143
    print("groc: interrupted", file=sys.stderr)
    return 130


def _flagged(args: list[str]):
    """A function that writes the settings a message names in backticks (an error that reached the top
    outside ``setting_errors``, a log line) as the flags of the command ``args`` run."""
    def write(message) -> str:
        if "`" not in (message.text if isinstance(message, GrocError) else message):
            return str(message)
        from .commands._settings import command_flags, with_flags

        name = next((a for a in args if not a.startswith("-")), None)
        found = _GROUP.commands.get(name)
        return with_flags(message, command_flags(found.real()) if found is not None else {})

    return write


def _escaping_stderr() -> None:
    """Messages never stop a stage: in an ASCII or Latin-1 locale stderr keeps its encoding and
    escapes what it cannot show (a path or word outside it), where it raised UnicodeEncodeError.
    (Results are UTF-8 whatever the locale: console.write_stdout.)"""
    if sys.stderr is not None and hasattr(sys.stderr, "reconfigure") and not console.utf8(sys.stderr):
        sys.stderr.reconfigure(errors="backslashreplace")


def _out_of_memory(reading=None) -> str:
    """The one line of any allocation refused (docs/stages.md, "Memory limits"), wherever it happened."""
    return f"groc: error: {OutOfMemory.wording(reading, batch='--batch-size', chunk='--chunk')}"


def _disk_full(exc: OSError) -> str:
    """A full disk (or quota) met outside an output's own writer, which says more (artifacts.diskfull.DiskFull):
    the path, with the free bytes of its file system."""
    import shutil

    where = exc.filename or "."
    device = os.path.dirname(os.path.abspath(where))
    while not os.path.isdir(device) and device != os.path.dirname(device):
        device = os.path.dirname(device)
    try:
        free = f"; {shutil.disk_usage(device).free:,} bytes free there"
    except OSError:
        free = ""
    what = "disk quota exceeded" if exc.errno == errno.EDQUOT else "no space left on the device"
    return f"groc: error: {what} writing {where}{free}; free some space or choose another path"


_memory_ran_out = False  # set by _main's out-of-memory branches


def main(argv: list[str] | None = None) -> int:
    """Run groc; the exit status (130 after Ctrl-C, 143 after SIGTERM, whenever it arrives)."""
    global _memory_ran_out
    _memory_ran_out = False
    try:
        status = _main(argv)
    except KeyboardInterrupt as exc:  # one that arrived while another exception was being handled
        status = _interrupted(exc)
    finally:
        if argv is None:  # groc's own process (the `groc` script, python -m groc_cli), not a caller's: from here
            interrupts.after_main()  # on a signal ends it at once (before uninstall: never Python's own handler)
        interrupts.uninstall()
    if argv is None:
        # groc's own process (the `groc` script, python -m groc_cli): everything groc writes is closed by now, so
        # it leaves without the interpreter's teardown, where a signal is no longer groc's to handle. After an
        # allocation the limit refused, native libraries' half-started thread pools can crash even the atexit
        # callbacks (a segfault after the one-line error): those are skipped too.
        interrupts.exit_process(status, callbacks=not _memory_ran_out)
    return status


def _main(argv: list[str] | None) -> int:
    global _memory_ran_out
    command = _GROUP
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args or os.environ.get("GROC_DEBUG") == "1"
    from .cores import omp_threads_problem  # before torch or FAISS loads OpenMP, which reads the variable

    if problem := omp_threads_problem(os.environ.get("OMP_NUM_THREADS")):
        print(f"groc: error: {problem}", file=sys.stderr)
        return 2
    if os.environ.get("OMP_NUM_THREADS", "x").strip() == "":  # set but empty: unset, as groc reads it, not libgomp's complaint
        del os.environ["OMP_NUM_THREADS"]
    interrupts.install()
    console.setting_names = _flagged(args)
    console.stderr_gone = False
    _escaping_stderr()
    try:
        result = command.main(args=args, prog_name="groc", standalone_mode=False)
        if interrupts.received() or console.stderr_gone:  # typer turns Ctrl-C (and so our SIGTERM) into a silent return of 130
            return _interrupted(interrupts.received())
        return result if isinstance(result, int) else 0
    except typer.Exit as exc:
        return exc.exit_code
    except SystemExit as exc:
        # typer ends with status 1 when stdout's reader went away (`groc tokenize | head`): a
        # normal end of a pipeline, which `set -o pipefail` must not see as a failure.
        if getattr(exc.__context__, "errno", None) == errno.EPIPE:
            return _quiet_stdout()
        raise
    except (typer.Abort, KeyboardInterrupt) as exc:
        return _interrupted(exc if isinstance(exc, KeyboardInterrupt) else exc.__cause__)
    except click_exceptions.UsageError as exc:
        if not exc.format_message():  # no arguments at all: the help was already shown
            return 2
        where = exc.ctx.command_path if exc.ctx else "groc"
        print(f"{where}: error: {exc.format_message()} (see '{where} --help')", file=sys.stderr)
        return 2
    except click_exceptions.ClickException as exc:
        print(f"groc: error: {exc.format_message()}", file=sys.stderr)
        return exc.exit_code
    except OutOfMemory as exc:
        if debug:
            raise
        _memory_ran_out = True
        print(_out_of_memory(exc.reading), file=sys.stderr)
        return OutOfMemory.exit_code
    except GrocError as exc:
        if debug:
            raise
        print(f"groc: error: {_flagged(args)(exc)}", file=sys.stderr)
        return exc.exit_code
    except (StdoutClosed, BrokenPipeError):
        return _quiet_stdout()
    except (MemoryError, RuntimeError, OSError, ImportError) as exc:
        memory = out_of_memory(exc)  # ENOMEM is an OSError too: a memory map the limit refuses
        if debug or not (memory or isinstance(exc, OSError)):
            raise
        if memory:
            _memory_ran_out = True
            print(_out_of_memory(), file=sys.stderr)
        elif exc.errno in (errno.ENOSPC, errno.EDQUOT):
            print(_disk_full(exc), file=sys.stderr)
        else:
            print(f"groc: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 1
    finally:
        console.setting_names = named
