"""Nothing lost, ever: --force, one writer per output, interruptions and full disks, with real
processes (GUIDE 13; docs/stages.md, "Outputs")."""

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO, TINY, default_signals, run_env, run_groc

# Long enough to be interrupted: early stopping never ends it.
ENDLESS = ["--max-epochs", "1000", "--patience", "1000", "--lr-patience", "1000"]


@pytest.fixture(scope="module")
def work(tmp_path_factory, tiny_run):
    """data and run: copies of tiny_run.data() and of a tied run of one epoch on it (tests here write
    beside them, and eval records itself in the run)."""
    root = tmp_path_factory.mktemp("outputs")
    tiny_run.copy(tiny_run.data(), root / "data")
    tiny_run.copy(tiny_run("tied", max_tokens=None, max_epochs=1), root / "run")
    return root


def digest(directory: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(directory)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def leftovers(directory: Path) -> list[str]:
    """Temporary entries a stage may leave beside its output: none may survive it."""
    return sorted(p.name for p in directory.iterdir() if ".incomplete-" in p.name or p.name.endswith(".lock")
                  or ".old-" in p.name)


def start(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "groc_cli", *map(str, args)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=run_env(), preexec_fn=default_signals)


def wait_for(check, what: str, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if proc.poll() is not None:
            raise AssertionError(f"the process ended before {what}: {proc.stderr.read().decode()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def one_error_line(result) -> str:
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("groc") and ": error: " in lines[0], lines
    return lines[0]


@pytest.mark.slow
def test_force_keeps_the_old_run_when_the_new_command_is_rejected(work, tmp_path):
    before = digest(work / "run")
    for bad in (["--lr", "nan"], ["--lr", "-1"], ["--clip", "inf"], ["--output-layer", "groc"]):
        r = run_groc("train", work / "data", "-o", work / "run", "--force", *TINY, *bad)
        assert r.returncode == 2, bad
        one_error_line(r)
        assert digest(work / "run") == before, bad
    assert leftovers(work) == []


@pytest.mark.slow
def test_force_swaps_in_the_new_run_only_when_it_is_complete(work, tmp_path):
    run = tmp_path / "run"
    run_groc("train", work / "data", "-o", run, "--max-epochs", "1", *TINY, check=True)
    before = digest(run)
    proc = start("train", work / "data", "-o", run, "--force", *TINY, *ENDLESS, "--seed", "9")
    wait_for(lambda: any((p / "last").is_dir() for p in tmp_path.glob(".run.incomplete-*")), "a checkpoint", proc)
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=60)[1].decode()
    assert proc.returncode == 130 and "unchanged" in err and err.strip().endswith("groc: interrupted")
    assert digest(run) == before and leftovers(tmp_path) == []
    # Completed, the replacement is there and the old run is gone.
    run_groc("train", work / "data", "-o", run, "--force", "--max-epochs", "1", *TINY, "--seed", "9", check=True)
    assert digest(run) != before and leftovers(tmp_path) == []


@pytest.mark.slow
def test_an_empty_directory_is_a_new_run(work, tmp_path):
    """`mkdir -p runs/x` (or a recipe's lock) before `groc train -o runs/x` is not an existing run."""
    run = tmp_path / "run"
    run.mkdir()
    r = run_groc("train", work / "data", "-o", run, *TINY, "--lr", "nan")
    assert r.returncode == 2 and "already exists" not in one_error_line(r)
    assert run.is_dir() and not any(run.iterdir())  # left as it was found
    run_groc("train", work / "data", "-o", run, "--max-epochs", "1", *TINY, check=True)
    assert (run / "summary.json").exists() and leftovers(tmp_path) == []


@pytest.mark.slow
@pytest.mark.parametrize("signum,code,word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_an_interrupted_run_says_where_its_checkpoint_is(work, tmp_path, signum, code, word):
    run = tmp_path / "run"
    proc = start("train", work / "data", "-o", run, *TINY, *ENDLESS)
    wait_for(lambda: (run / "last" / "trainer.pt").exists(), "a checkpoint", proc)
    proc.send_signal(signum)
    err = proc.communicate(timeout=60)[1].decode()
    assert proc.returncode == code
    assert f"the last checkpoint is kept in {run / 'last'}: continue with --resume" in err
    assert err.strip().endswith(f"groc: {word}") and "Traceback" not in err
    assert leftovers(tmp_path) == []
    resumed = run_groc("train", work / "data", "-o", run, "--resume", "--max-epochs", "1", *TINY)
    assert resumed.returncode == 0, resumed.stderr.decode()


@pytest.mark.slow
def test_a_run_interrupted_in_its_first_epoch_keeps_what_it_trained(work, tmp_path):
    """Ctrl-C before the first checkpoint used to remove the run ("nothing was trained"): the step it
    lands in is finished, checkpointed and resumable, and the resumed run goes on from that step."""
    run = tmp_path / "run"
    # A large model: its first epoch (and checkpoint) takes many seconds, so the signal comes well before it.
    proc = start("train", work / "data", "-o", run, *TINY, "--emb", "512", "--hidden", "1024", "--log-every", "1",
                 *ENDLESS)
    for line in iter(proc.stderr.readline, b""):
        if line.startswith(b"epoch 1 step 3/"):
            break
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=60)[1].decode()
    assert proc.returncode == 130 and f"the last checkpoint is kept in {run / 'last'}: continue with --resume" in err, err
    assert not (run / "best").exists() and leftovers(tmp_path) == []
    import torch

    step = torch.load(run / "last" / "trainer.pt", weights_only=False)["position"]["step"]
    assert step >= 3
    # Two steps more show where it goes on (the rest of the epoch at this size was half the test's time).
    flags = dict(zip(TINY[::2], TINY[1::2]))
    tokens = (step + 2) * int(flags["--batch-size"]) * int(flags["--bptt"])
    resumed = run_groc("train", work / "data", "-o", run, "--resume", "--max-tokens", tokens, "--log-every", "1")
    assert resumed.returncode == 0, resumed.stderr.decode()
    assert f"step {step + 1}/".encode() in resumed.stderr and f"step {step}/".encode() not in resumed.stderr


@pytest.mark.slow
def test_a_killed_train_force_leaves_its_pid_and_the_next_writer_reclaims_it(work, tmp_path):
    """train --force trains aside; SIGKILL cleans nothing up, so the aside copy (gigabytes for a large
    model) carries the killed writer's pid, and the next writer of the run removes it."""
    run = tmp_path / "run"
    run_groc("train", work / "data", "-o", run, *TINY, "--max-tokens", "200", check=True)
    proc = start("train", work / "data", "-o", run, "--force", *TINY, *ENDLESS)
    wait_for(lambda: any(tmp_path.glob(".run.incomplete-*/config.json")), "the run trained aside", proc)
    proc.kill()
    proc.wait()
    left = [name for name in leftovers(tmp_path) if ".incomplete-" in name]
    assert len(left) == 1 and left[0].startswith(f".run.incomplete-{proc.pid}-"), left
    assert (run / "summary.json").exists()  # the old run is untouched
    run_groc("train", work / "data", "-o", run, "--force", *TINY, "--max-tokens", "200", check=True)
    assert leftovers(tmp_path) == []


# Ctrl-C lands at the first training step inside what cannot raise it: code compiled from a string
# (torch builds dataclasses while it imports at the first step), or a callback whose exceptions
# Python ignores (importlib's module locks have one).
INTERRUPTED_AT_FIRST_STEP = """
import signal, sys, weakref, runpy
from groc_cli.commands import _training_flags
def in_string_code():
    exec("import signal; signal.raise_signal(signal.SIGINT)")
def in_ignoring_callback():
    class Object: pass
    kept = Object()
    ref = weakref.ref(kept, lambda ref: signal.raise_signal(signal.SIGINT))
    del kept
    assert ref() is None
def in_an_import():
    import interrupted_import  # noqa: F401  its code takes the signal, then finishes
where = {"string": in_string_code, "callback": in_ignoring_callback, "import": in_an_import}[sys.argv.pop(1)]
step = _training_flags.StepProgress.__call__
def first_step(self, *args):
    global where
    if where is not None:
        where, now = None, where
        now()
    step(self, *args)
_training_flags.StepProgress.__call__ = first_step
enter = _training_flags.StepProgress.__enter__
def before_training(self):  # an import outside a training step, which holds a signal on its own
    if where is in_an_import:
        in_an_import()
    return enter(self)
_training_flags.StepProgress.__enter__ = before_training
sys.argv = ["groc", *sys.argv[1:]]
runpy.run_module("groc_cli", run_name="__main__")
"""


@pytest.mark.slow
@pytest.mark.parametrize("where", ["string", "callback", "import"])
def test_ctrl_c_where_python_cannot_raise_it_still_stops_the_run_with_130(work, tmp_path, where):
    """It used to end the process by SIGINT after groc had cleaned up (status -2 to the parent), or be
    lost, so that training ran to its end (a flaky test found it). Inside an import it was raised there,
    and where torch's extensions called back into Python while loading, thrown through C++ uncaught
    (std::terminate, status 134): it waits until the module has loaded."""
    run = tmp_path / "run"
    (tmp_path / "interrupted_import.py").write_text(
        "import pathlib, signal\nsignal.raise_signal(signal.SIGINT)\npathlib.Path('imported').write_text('whole')\n")
    # Run with -m, as `python -m groc_cli`: CPython ends a -m module by SIGINT after an interrupt that
    # passed through a string's code (a script, such as the `groc` command, exits with its status).
    (tmp_path / "first_step.py").write_text(INTERRUPTED_AT_FIRST_STEP)
    r = subprocess.run([sys.executable, "-m", "first_step", where, "train", work / "data", "-o", run, *TINY,
                        "--max-epochs", "20"], capture_output=True, cwd=tmp_path, timeout=300,
                       env=run_env({"PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}), preexec_fn=default_signals)
    err = r.stderr.decode()
    # It stops at once (before its first checkpoint, unless a busy machine delays it past one). The import's
    # interrupt is taken after the module has loaded, a moment later: before the run directory is made; or
    # after, when nothing has been trained yet and the directory is removed; or, redelivered 20 ms later,
    # during the first step, which ends whole and is kept as a checkpoint to resume from.
    assert r.returncode == 130 and err.endswith("groc: interrupted\n") and "Exception ignored" not in err, err
    if where != "import":
        assert "\nstopped: " in err, err
    elif "\nstopped: nothing was trained" in err:
        assert not run.exists(), err
    elif "\nstopped: " in err:  # the import's interrupt landed in the first step
        assert "\nstopped: the last checkpoint is kept" in err and (run / "last" / "model.safetensors").is_file(), err
    assert not (run / "summary.json").exists() and leftovers(tmp_path) == []
    assert (tmp_path / "imported").exists() == (where == "import")  # the module was loaded whole


def test_main_called_in_process_gives_back_the_signal_handlers_it_took(capsys):
    from groc_cli.cli import main

    before = [signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.unraisablehook]
    assert main(["--version"]) == 0 and capsys.readouterr().out.startswith("groc ")
    assert [signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.unraisablehook] == before


NO_LOCKS = """
import errno, fcntl, os, runpy, sys
def flock(fd, op):  # a file system without locks: Lustre mounted noflock
    raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))
fcntl.flock = flock
sys.argv = ["groc", *sys.argv[1:]]
runpy.run_module("groc_cli", run_name="__main__")
"""


@pytest.mark.slow
def test_a_file_system_without_locks_is_written_with_one_warning(work, tmp_path):
    """flock fails with ENOSYS on Lustre mounted `noflock` (ENOLCK on NFS without lockd): every
    writer used to stop with `groc: error: Function not implemented` and leave its lock file."""
    def groc_without_locks(*args):
        return subprocess.run([sys.executable, "-c", NO_LOCKS, *map(str, args)], capture_output=True,
                              env=run_env(), preexec_fn=default_signals)

    r = groc_without_locks("prepare", "--train", REPO / "groc_cli" / "data" / "austen-persuasion.txt", "--split",
                           "4000,1000", "-o", tmp_path / "data")
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert err.count("has no file locks") == 1 and f"{tmp_path}" in err
    assert open_dataset_words(tmp_path / "data") == open_dataset_words(work / "data")
    r = groc_without_locks("train", tmp_path / "data", "-o", tmp_path / "run", "--max-epochs", "1", *TINY)
    assert r.returncode == 0, r.stderr.decode()
    assert (tmp_path / "run" / "best").is_dir()
    assert leftovers(tmp_path) == []


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_folder_that_takes_no_new_file_is_refused_in_one_line_naming_the_output():
    """/proc passes the writability check for root (as a root-squashed NFS folder does) but refuses every new
    file: the error named groc's lock file (`No such file or directory: /proc/.out.lock`) and exited 1."""
    r = run_groc("prepare", "--train", REPO / "groc_cli" / "data" / "austen-persuasion.txt", "--split", "4000,1000",
                 "-o", "/proc/groc-test-out")
    err = r.stderr.decode()
    assert r.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert "/proc/groc-test-out" in err and "choose another -o" in err and ".lock" not in err


def open_dataset_words(path: Path) -> list[str]:
    from groc_cli.text.dataset import open_dataset

    return open_dataset(path).vocab


@pytest.mark.slow
def test_a_reader_of_stderr_that_goes_away_stops_the_stage_as_sigpipe_would(work, tmp_path):
    """`groc train ... 2>&1 | head`: rich's broken-pipe handler pointed stdout at /dev/null and
    exited 1, which groc took for stdout's reader gone: status 0, and the run was removed."""
    def piped(run: Path, *extra: str):
        command = " ".join([sys.executable, "-m", "groc_cli", "train", str(work / "data"), "-o", str(run), *TINY,
                            "--max-epochs", "3", "--log-every", "5", *extra])
        return subprocess.run(["bash", "-c", f"set -o pipefail; {command} 2>&1 | head -n 3"], capture_output=True,
                              text=True, env=run_env(), preexec_fn=default_signals)

    r = piped(tmp_path / "early")  # before the first checkpoint: as after Ctrl-C, the steps trained are kept
    assert r.returncode == 141 and len(r.stdout.splitlines()) == 3, (r.returncode, r.stdout, r.stderr)
    assert (tmp_path / "early" / "last" / "model.safetensors").is_file()
    run_groc("train", work / "data", "-o", tmp_path / "early", "--resume", "--max-epochs", "1", check=True)
    r = piped(tmp_path / "later", "--checkpoint-every", "1")  # a checkpoint is kept and resumes
    assert r.returncode == 141
    assert (tmp_path / "later" / "last" / "model.safetensors").is_file()
    run_groc("train", work / "data", "-o", tmp_path / "later", "--resume", "--max-epochs", "1", check=True)
    assert leftovers(tmp_path) == []


@pytest.mark.slow
def test_a_second_writer_is_refused_in_one_line(work, tmp_path):
    run = tmp_path / "run"
    proc = start("train", work / "data", "-o", run, *TINY, *ENDLESS)
    try:
        wait_for(lambda: (run / "config.json").exists(), "the run directory", proc)
        for args in (("train", work / "data", "-o", run, "--force", *TINY),
                     ("train", work / "data", "-o", run, "--resume", *TINY)):
            r = run_groc(*args)
            assert r.returncode == 2 and "another groc process" in one_error_line(r)
        # A writer that needs no --force (its output does not exist yet) is refused as well: the first
        # one here holds its lock while it waits for its input.
        out = tmp_path / "tokens.txt"
        first = subprocess.Popen([sys.executable, "-m", "groc_cli", "tokenize", "-", "-o", str(out)], stdin=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=run_env(), preexec_fn=default_signals)
        wait_for(lambda: (tmp_path / ".tokens.txt.lock").exists(), "the first writer's lock", first)
        second = run_groc("tokenize", "-", "-o", out, input=b"second\n")
        assert second.returncode == 2 and "another groc process" in one_error_line(second)
        first.communicate(b"first writer\n", timeout=60)
        assert first.returncode == 0 and out.read_text() == "first writer\n"
        # Two `groc prepare` into one -o: the second is refused, not silently replacing the first.
        data = tmp_path / "data"
        first = subprocess.Popen([sys.executable, "-m", "groc_cli", "prepare", "--train", "-", "-o", str(data)],
                                 stdin=subprocess.PIPE, stderr=subprocess.PIPE, env=run_env(), preexec_fn=default_signals)
        wait_for(lambda: (tmp_path / ".data.lock").exists(), "the first prepare's lock", first)
        second = run_groc("prepare", "--train", "-", "-o", data, input=b"the second corpus\n")
        assert second.returncode == 2 and "another groc process" in one_error_line(second)
        first.communicate(b"the first corpus\n", timeout=60)
        assert first.returncode == 0 and (data / "manifest.json").exists()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert leftovers(tmp_path) == []


@pytest.mark.slow
def test_force_never_replaces_another_kind_of_output_nor_an_input(work, tmp_path):
    before = digest(work / "run")
    text = tmp_path / "text.txt"
    text.write_text("a few words\n")
    cases = [
        (("tokenize", text, "-o", work / "run", "--force"), "is a run directory"),
        (("tokenize", text, "-o", work / "run" / "config.json", "--force"), "part of the run directory"),
        (("lexicon", "--vocab", work / "data", "-o", work / "run" / "vocab.parquet", "--force"), "part of the run directory"),
        (("train", work / "data", "-o", work / "data", "--force", *TINY), "the input"),
        (("dump", work / "run", work / "data", "--split", "valid", "-o", work / "run", "--force"), "the input"),
        (("dump", work / "run", work / "data", "--split", "valid", "-o", work / "data", "--force"), "the input"),
    ]
    for args, why in cases:
        r = run_groc(*args)
        assert r.returncode == 2 and why in one_error_line(r), (args, r.stderr.decode())
    assert digest(work / "run") == before
    assert text.read_text() == "a few words\n"


def special_files(directory: Path) -> dict[str, Path]:
    """A FIFO, a socket and (root only) a character device like /dev/full, made in `directory`."""
    import socket

    made = {"FIFO": directory / "fifo", "socket": directory / "sock"}
    os.mkfifo(made["FIFO"])
    with socket.socket(socket.AF_UNIX) as sock:  # the entry outlives the socket object
        sock.bind(str(made["socket"]))
    with contextlib.suppress(PermissionError, OSError):
        os.mknod(directory / "full", 0o666 | 0o020000, os.makedev(1, 7))  # S_IFCHR: /dev/full's numbers
        made["character device"] = directory / "full"
    return made


@pytest.mark.slow
def test_force_never_replaces_nor_opens_a_special_file(work, tmp_path):
    """A device node, a FIFO or a socket as an output is refused at once in one line, with or without
    --force: --force replaced /dev/full with a regular file and blocked forever opening a FIFO; and
    `train -o` a device no longer says to pass --force (which it would refuse too)."""
    text = tmp_path / "text.txt"
    text.write_text("a few words\n")
    made = special_files(tmp_path)
    if "character device" not in made and os.path.exists("/dev/full"):  # no mknod here: the real one
        made["character device"] = Path("/dev/full")
    for kind, path in made.items():
        before = os.stat(path)
        for args, flag in [(("tokenize", text, "-o", path), "-o"), (("plot", work / "run", "-o", path), "-o"),
                           (("eval", work / "run", work / "data", "--split", "valid", "--per-token", path), "--per-token"),
                           (("train", work / "data", "-o", path, "--max-epochs", "1", *TINY), "-o")]:
            for force in [("--force",)] + ([()] if args[0] in ("tokenize", "train") else []):
                try:
                    r = run_groc(*args, *force, timeout=300)
                except subprocess.TimeoutExpired:
                    raise AssertionError(f"{args} {force} blocked on the {kind}") from None
                line = one_error_line(r)
                assert r.returncode == 2 and f"{flag} {path} is a {kind}" in line, (args, force, line)
            after = os.stat(path)
            assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)
    assert leftovers(tmp_path) == []


@pytest.mark.slow
def test_eval_outputs_are_never_their_inputs(work, tmp_path):
    per_token = tmp_path / "a.parquet"
    run_groc("eval", work / "run", work / "data", "--split", "valid", "--per-token", per_token, check=True)
    before = per_token.read_bytes()
    r = run_groc("compare", per_token, per_token, "-o", per_token, "--force")
    assert r.returncode == 2 and "the input" in one_error_line(r)
    assert per_token.read_bytes() == before


@pytest.mark.slow
def test_missing_parent_directories_are_created_and_a_file_in_the_way_is_refused(work, tmp_path):
    """`-o runs/ptb/tied` works in a fresh checkout, as `mkdir -p` would; every stage's outputs."""
    text = tmp_path / "text.txt"
    text.write_text("The cat sat.\n")
    new = tmp_path / "new" / "deeper"
    outputs = [
        (("tokenize", text, "-o", new / "tok" / "text.txt"), new / "tok" / "text.txt"),
        (("prepare", "--train", REPO / "groc_cli" / "data" / "austen-persuasion.txt", "--split", "4000,1000",
          "-o", new / "data" / "p"), new / "data" / "p" / "manifest.json"),
        (("train", work / "data", "-o", new / "runs" / "tied", "--max-epochs", "1", *TINY), new / "runs" / "tied" / "summary.json"),
        (("dump", work / "run", work / "data", "--split", "valid", "-o", new / "states" / "v"), new / "states" / "v" / "meta.json"),
        (("eval", work / "run", work / "data", "--split", "valid", "--per-token", new / "pt" / "a.parquet"), new / "pt" / "a.parquet"),
    ]
    for args, made in outputs:
        run_groc(*args, check=True)
        assert made.is_file(), args
    assert leftovers(new / "runs") == [] and leftovers(new / "data") == []
    blocked = tmp_path / "blocked"
    blocked.write_text("a file, not a directory\n")
    r = run_groc("tokenize", text, "-o", blocked / "sub" / "text.txt")
    assert r.returncode == 2 and "is not a directory" in one_error_line(r)
    assert blocked.read_text() == "a file, not a directory\n"


@pytest.mark.slow
def test_per_token_to_stdout_is_refused_and_no_json_leaves_stdout_empty(work, tmp_path):
    r = run_groc("eval", work / "run", work / "data", "--split", "valid", "--per-token", "-", cwd=tmp_path)
    assert r.returncode == 2 and "--per-token -" in one_error_line(r) and r.stdout == b""
    assert list(tmp_path.iterdir()) == []  # no file named '-'
    r = run_groc("eval", work / "run", work / "data", "--split", "valid", "--no-json", check=True)
    assert r.stdout == b"" and "perplexity" in r.stderr.decode()
    r = run_groc("dump", work / "run", work / "data", "--split", "valid", "-o", tmp_path / "states", "--no-json", check=True)
    assert r.stdout == b"" and (tmp_path / "states" / "meta.json").is_file()


@contextlib.contextmanager
def small_disk(path: Path, size: str):
    """A tmpfs of `size` at `path` (root only): a real full disk for real processes."""
    path.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_leaves_nothing(work, tmp_path):
    with small_disk(tmp_path / "disk", "64k") as disk:
        r = run_groc("dump", work / "run", work / "data", "--split", "train", "--dtype", "float32", "-o", disk / "states")
        line = one_error_line(r)
        assert r.returncode == 1 and "no space left" in line and str(disk / "states") in line and "bytes" in line
        assert list(disk.iterdir()) == []
        # The same dump past that check (as when another process fills the disk meanwhile): its
        # memory-mapped files are allocated before they are written, so no SIGBUS kills it.
        unchecked = ("import sys; import groc_cli.evaluation.states as s; s.require_space = lambda *a: None; "
                     "from groc_cli.cli import main; sys.exit(main(sys.argv[1:]))")
        r = subprocess.run([sys.executable, "-c", unchecked, "dump", str(work / "run"), str(work / "data"), "--split",
                            "train", "--dtype", "float32", "-o", str(disk / "states")], capture_output=True,
                           env=run_env())
        assert r.returncode == 1 and "no space left" in r.stderr.decode().splitlines()[-1], r.stderr.decode()
        assert list(disk.iterdir()) == []
        r = run_groc("train", work / "data", "-o", disk / "run", *TINY, "--emb", "64", "--hidden", "64", "--max-epochs", "1")
        err = r.stderr.decode()
        line = err.strip().splitlines()[-1]
        assert r.returncode == 1 and "Traceback" not in err and line.startswith("groc: error: no space left")
        assert str(disk / "run") in line and "bytes" in line and "nothing was trained" in line
        assert list(disk.iterdir()) == []


QUOTA = """
import sys
import pyarrow.parquet as pq
import groc_cli.run_storage as storage
from safetensors import SafetensorError

def quota(*args, **kwargs):  # EDQUOT as each library words it: the device has room, the user's quota not
    if sys.argv[1] == "prepare":
        raise OSError("Error writing bytes to file. Detail: [errno 122] Disk quota exceeded")
    raise SafetensorError('Error while serializing: IoError(Os { code: 122, kind: QuotaExceeded, message: "Disk quota exceeded" })')

pq.ParquetWriter.write_table = quota
storage.save_file = quota
from groc_cli.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_a_disk_quota_met_is_one_line_that_says_quota_and_leaves_nothing(work, tmp_path):
    """On a cluster's home or project file system the user's quota (EDQUOT) runs out, not the
    device: pyarrow's and safetensors' wordings of it were a traceback or a bare library message."""
    def groc_over_quota(*args):
        return subprocess.run([sys.executable, "-c", QUOTA, *map(str, args)], capture_output=True,
                              env=run_env())

    def error_line(r) -> str:
        err = r.stderr.decode()
        assert err.count("error") == 1 and "Traceback" not in err, err
        return err.strip().splitlines()[-1]

    r = groc_over_quota("prepare", "--train", REPO / "groc_cli" / "data" / "austen-persuasion.txt", "--split",
                        "4000,1000", "-o", tmp_path / "data")
    line = error_line(r)
    assert r.returncode == 1 and line.startswith(f"groc: error: disk quota exceeded writing {tmp_path / 'data'}"), line
    assert "quota -s" in line
    r = groc_over_quota("train", work / "data", "-o", tmp_path / "run", "--max-epochs", "1", *TINY)
    line = error_line(r)
    assert r.returncode == 1 and line.startswith(f"groc: error: disk quota exceeded writing {tmp_path / 'run'}"), line
    assert "nothing was trained" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_checkpoint_that_does_not_fit_keeps_the_previous_one_whole(work, tmp_path):
    """ENOSPC while `train --resume` writes its next checkpoint: best/, metrics.parquet and
    steps.parquet were replaced (and best/'s start state deleted) while last/ stayed at the old step.
    A checkpoint is all of a run's state or none: the run must be byte for byte as it was."""
    import shutil

    def pages(path: Path) -> int:
        return sum(-(-p.stat().st_size // 4096) * 4096 for p in path.rglob("*") if p.is_file())

    weights = (work / "run" / "best" / "model.safetensors").stat().st_size
    # Room for one more weights file (a new best/), not for the new last/ (weights and Adam's two moments).
    size = pages(work / "run") + 4096 * (-(-3 * weights // 2 // 4096)) + 8 * 4096
    with small_disk(tmp_path / "disk", str(size)) as disk:
        run = disk / "run"
        shutil.copytree(work / "run", run)
        before = digest(run)
        r = run_groc("train", work / "data", "-o", run, "--resume", "--max-epochs", "3")
        err = r.stderr.decode()
        line = err.strip().splitlines()[-1]
        assert r.returncode == 1 and "Traceback" not in err and line.startswith("groc: error: no space left"), err
        assert str(run) in line and "--resume" in line
        assert digest(run) == before and leftovers(run) == [] and leftovers(disk) == []
        # Room again: the same command resumes from the kept checkpoint.
        subprocess.run(["mount", "-o", f"remount,size={size * 4}", str(disk)], check=True)
        run_groc("train", work / "data", "-o", run, "--resume", "--max-epochs", "2", check=True)
        assert digest(run) != before and leftovers(run) == []


@pytest.mark.slow
@pytest.mark.parametrize("args,flag", [
    (["--lr", "inf"], "--lr"), (["--max-minutes", "nan"], "--max-minutes"), (["--dropout", "nan"], "--dropout"),
    (["--init-range", "inf"], "--init-range"), (["--lr-decay", "0"], "--lr-decay"),
    (["--output-layer", "adaptive", "--cutoffs", "100,100000"], "--cutoffs"),
])
def test_invalid_settings_are_refused_before_any_work(work, tmp_path, args, flag):
    r = run_groc("train", work / "data", "-o", tmp_path / "run", *TINY, *args)
    line = one_error_line(r)
    assert r.returncode == 2 and (line.startswith(f"groc: error: {flag} ") or f"'{flag}'" in line), line
    assert not (tmp_path / "run").exists() and leftovers(tmp_path) == []


@pytest.mark.slow
def test_resume_refuses_settings_that_differ_from_the_run(work):
    r = run_groc("train", work / "data", "-o", work / "run", "--resume", *TINY, "--lr", "0.01", "--dropout", "0.5")
    line = one_error_line(r)
    assert r.returncode == 2 and "--lr 0.01 (the run has 0.001)" in line and "--dropout 0.5 (the run has" in line
    # Budgets may be extended, and a flag repeating the stored value is no conflict.
    r = run_groc("train", work / "data", "-o", work / "run", "--resume", *TINY, "--max-epochs", "1", "--lr", "0.001")
    assert r.returncode == 0, r.stderr.decode()


@pytest.mark.slow
def test_resume_keeps_the_runs_budget_unless_one_is_given(work, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(work / "run", run)  # trained with --max-epochs 1
    epochs = lambda: len(pq.read_table(run / "metrics.parquet"))  # noqa: E731
    r = run_groc("train", work / "data", "-o", run, "--resume")
    assert r.returncode == 0 and "already spent its budget (--max-epochs 1)" in r.stderr.decode(), r.stderr.decode()
    assert epochs() == 1
    # A budget given is extended and an interval changed; config.json records what the run trained with.
    run_groc("train", work / "data", "-o", run, "--resume", "--max-epochs", "2", "--checkpoint-every", "50", check=True)
    assert epochs() == 2
    train = json.loads((run / "config.json").read_text())["train"]
    assert (train["max_epochs"], train["checkpoint_every"], train["batch_size"]) == (2, 50, 4)



def test_a_signal_between_the_renames_of_a_swap_waits_for_the_second(tmp_path, monkeypatch):
    """`train --force` swaps its new run in with two renames (the old run aside, the new one in): Ctrl-C
    between them left neither run at the run's path, both aside. It is taken once the new one is in."""
    from groc_cli.artifacts import atomic

    final, new = tmp_path / "run", tmp_path / ".run.incomplete-1-x"
    final.mkdir()
    (final / "summary.json").write_text("old")
    new.mkdir()
    (new / "summary.json").write_text("new")
    renames = []

    def replace(src, dst):
        renames.append(dst)
        os.rename(src, dst)
        if len(renames) == 1:
            signal.raise_signal(signal.SIGINT)  # lands between the two renames

    monkeypatch.setattr(atomic.os, "replace", replace)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            atomic.replace_path(new, final)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert (final / "summary.json").read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_a_signal_after_groc_has_its_exit_status_ends_it_as_interrupted():
    """After main returned, Python's own handler raised Ctrl-C inside an atexit callback ("Exception
    ignored", status 0) or, at the top, ended the process by the raw signal (status -2)."""
    code = ("import atexit, signal\nfrom groc_cli import interrupts\n"
            "atexit.register(lambda: signal.raise_signal(signal.SIGINT))\ninterrupts.after_main()\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, env=run_env(), preexec_fn=default_signals)
    assert (r.returncode, r.stderr.decode()) == (130, "groc: interrupted\n")


def test_a_signal_while_the_interpreter_would_tear_down_never_kills_groc_by_the_raw_signal(tmp_path):
    """The interpreter puts the default signal actions back before it frees the modules (torch's take a
    second or so): a Ctrl-C then ended groc by the raw signal (status -2), after it had written everything.
    Here an object in a module sends it as it is freed, where a late Ctrl-C would land."""
    (tmp_path / "sitecustomize.py").write_text(
        "import os, signal, time\n"
        "class Late:\n"
        "    def __del__(self):\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        time.sleep(0.05)\n"
        "late = Late()\n")
    env = run_env({"PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])})
    r = subprocess.run([sys.executable, "-m", "groc_cli", "tokenize", "--lower"], input=b"Hello, World.\n",
                       capture_output=True, env=env, preexec_fn=default_signals)
    assert (r.returncode, r.stdout.decode(), r.stderr.decode()) == (0, "hello , world .\n", "")
