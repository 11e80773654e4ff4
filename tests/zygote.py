"""A fork server for the tests' `groc` runs: an interpreter that has imported torch once, forking a
child per run, so that a test's `groc` pays for its own work and not for torch's 2-3 s import.

The child is what `python -m groc_cli ARGS` would be: its own process (pid, exit status, signals),
stdin/stdout/stderr on the pipes the test made, the test's working directory and environment, and
groc_cli imported afresh after the environment is in place; only torch (with torch._dynamo, which
torch.optim imports when `train` makes its optimizer: 1.4 s more), numpy and pyarrow come already
imported. `run_groc` (tests/conftest.py) starts a server with the environment of the run
that needs it, and another where a run changes what those imports or the interpreter read at start-up
(locale, PYTHON*, allocator, OpenMP settings other than a thread count); GROC_TESTS_FRESH_PYTHON=1
gives every run a real subprocess instead.

The child ends as groc's own process does (groc_cli.interrupts.exit_process): as the interpreter does on
`SystemExit` (non-daemon threads joined, atexit handlers, garbage collected, stdout and stderr flushed), then
os._exit instead of tearing down every module torch brought: that teardown took 1.1-1.3 s of every forked run (the objects it frees
lie on pages the fork shares, so each one freed is a page copied), more than most runs' work.
Anything else (an uncaught exception, a flush that fails) takes the interpreter's own way out.

Protocol, over a SOCK_SEQPACKET socket pair: the test sends one JSON message (args, cwd, env) with
three file descriptors (the child's stdin, stdout, stderr); the server forks, the child runs groc and
exits like an interpreter does (atexit handlers, non-daemon threads joined, buffers flushed), and
the server answers with the child's pid, then with its exit code (negative: the signal that ended it),
as subprocess reports it.
"""

import json
import os
import socket
import sys

PRELOADED = ("torch", "torch._dynamo", "numpy", "pyarrow", "pyarrow.parquet")


def serve(fd: int) -> None:
    import importlib

    for name in PRELOADED:
        importlib.import_module(name)
    import gc

    gc.freeze()  # the children's collections leave the server's objects (and their shared pages) alone
    sock = socket.socket(fileno=fd)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
        except ConnectionError:
            return
        if not message:  # the test process has gone
            return
        request = json.loads(message)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            sock.close()
            _run_in_child(request, fds)  # raises SystemExit: the child ends as an interpreter does
        for f in fds:
            os.close(f)
        sock.send(json.dumps(pid).encode())  # for a test's timeout, which kills the child
        _, status = os.waitpid(pid, 0)
        sock.send(json.dumps(os.waitstatus_to_exitcode(status)).encode())


def _run_in_child(request: dict, fds: list[int]) -> None:
    import runpy

    for target, f in zip((0, 1, 2), fds):
        os.dup2(f, target)
        os.close(f)
    _reopen_stdio()
    os.chdir(request["cwd"])
    sys.path[0] = os.getcwd()  # as `python -m` puts it
    os.environ.clear()
    os.environ.update(request["env"])
    # What a fresh interpreter's OpenMP would have read from this environment (the server's was
    # read when torch was imported); run_groc sends any other OMP_NUM_THREADS to a real subprocess.
    import torch

    given = request["env"].get("OMP_NUM_THREADS")
    torch.set_num_threads(int(given) if given else len(os.sched_getaffinity(0)))
    sys.argv = ["groc", *request["args"]]
    code = 0
    try:
        runpy.run_module("groc_cli", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
    _exit(code)  # outside the except clause: the handlers run with no exception being handled, as at exit


def _exit(code) -> None:
    """Leave as the interpreter leaves on SystemExit(code), less the teardown of its modules (groc's own
    process leaves this way from its main, so this is for a run that ended before main did)."""
    from groc_cli.interrupts import exit_process

    if code is not None and not isinstance(code, int):  # SystemExit("message"): printed, status 1
        try:
            print(code, file=sys.stderr)
        except BaseException:
            pass  # as the interpreter ignores it
        code = 1
    exit_process(code or 0)
    raise SystemExit(code) from None  # a flush failed: the interpreter's own way, the error reported, status 120


def _reopen_stdio() -> None:
    """sys.stdin/stdout/stderr on the test's pipes, built as the interpreter builds them at start-up (the
    server's were built on /dev/null, which is seekable: reconfiguring one on a pipe would then seek).
    Encoding, errors and buffering are the server's, which started with the run's start-up variables."""
    import io

    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        old = getattr(sys, name)
        raw = io.FileIO(fd, "rb" if fd == 0 else "wb", closefd=False)
        raw.name = f"<{name}>"
        unbuffered = isinstance(old.buffer, io.FileIO)  # stdout, stderr under python -u or PYTHONUNBUFFERED
        buffer = raw if unbuffered else io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
        stream = io.TextIOWrapper(buffer, encoding=old.encoding, errors=old.errors, newline="\n",
                                  line_buffering=not unbuffered and (fd == 2 or raw.isatty()),
                                  write_through=old.write_through)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
