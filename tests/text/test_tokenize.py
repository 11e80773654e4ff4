import multiprocessing
import os
import signal
import struct
import time

import pytest

from groc_cli.errors import GrocError
from groc_cli.text.tokenizer import TokenizeOptions, _result, tokenize_line, tokenize_lines


def test_moses_splits_punctuation_and_keeps_abbreviations():
    assert tokenize_line("Mr. Smith paid $5.50, didn't he?", TokenizeOptions()) == "Mr. Smith paid $ 5.50 , didn 't he ?"


def test_lower_and_escape():
    assert tokenize_line('A "Big" <deal> & more', TokenizeOptions(lower=True)) == 'a " big " < deal > & more'
    assert "&quot;" in tokenize_line('A "Big" deal', TokenizeOptions(escape=True))


def test_parallel_keeps_order_and_blank_lines():
    lines = [f"Line {i}, with words." if i % 7 else "" for i in range(5000)]
    serial = list(tokenize_lines(lines, TokenizeOptions(), jobs=1))
    parallel = list(tokenize_lines(lines, TokenizeOptions(), jobs=2))
    assert parallel == serial
    assert len(parallel) == 5000 and parallel[0] == "" and parallel[1] == "Line 1 , with words ."


def test_a_worker_dead_before_a_chunk_is_sent_to_it_is_the_worker_error():
    # The parent's next step with a dead worker may be a send (its task pipe then has no reader):
    # that broken pipe is the worker's death, not stdout's reader going away, which the CLI ends
    # with status 0 (CI once saw `groc tokenize -j 2` exit 0 with no output after a worker's kill -9).
    before = {child.pid for child in multiprocessing.active_children()}

    def lines():
        workers = [child for child in multiprocessing.active_children() if child.pid not in before]
        assert len(workers) == 2  # the two that tokenize_lines has just started
        for worker in workers:
            os.kill(worker.pid, signal.SIGKILL)
            worker.join()
        yield from ["A line, with words."] * 100

    with pytest.raises(GrocError, match=r"^a tokenizer worker process ended unexpectedly \(exit status -9\); "
                                        r"run again, or with -j 1$"):
        list(tokenize_lines(lines(), TokenizeOptions(), jobs=2))


def test_a_worker_killed_in_the_middle_of_a_result_is_the_worker_error():
    # A result larger than the pipe's buffer is written in parts; a worker killed between them
    # leaves a message cut short, which the parent must report as the worker's death too.
    worker = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,), daemon=True)
    worker.start()
    os.kill(worker.pid, signal.SIGKILL)
    reader, writer = multiprocessing.Pipe(duplex=False)
    os.write(writer.fileno(), struct.pack("!i", 100_000) + b"\x80" * 100)  # a length, then part of the message
    writer.close()
    with pytest.raises(GrocError, match=r"^a tokenizer worker process ended unexpectedly \(exit status -9\)"):
        _result((worker, None, reader))
    reader.close()


def test_cli_pipes_stdin_to_stdout(groc):
    result = groc("tokenize", "--lower", input=b"Hello, World!\n\nIt's fine.\n")
    assert result.returncode == 0
    assert result.stdout.decode().splitlines() == ["hello , world !", "", "it 's fine ."]
    assert result.stderr == b""


@pytest.mark.slow
def test_cli_invalid_utf8_names_line(groc, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\nsecond \xff line\n")
    out = tmp_path / "out.txt"
    result = groc("tokenize", bad, "-o", out)
    assert result.returncode != 0
    err = result.stderr.decode().strip()
    assert len(err.splitlines()) == 1 and "line 2" in err and "--errors replace" in err
    assert not out.exists() and list(tmp_path.iterdir()) == [bad]  # nothing half-written
    ok = groc("tokenize", bad, "--errors", "replace")
    assert ok.returncode == 0 and ok.stdout.decode().splitlines()[1] == "second \ufffd line"


@pytest.mark.slow
def test_cli_refuses_existing_output_and_bad_inputs(groc, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("some text\n")
    out = tmp_path / "out.txt"
    out.write_text("keep me")
    result = groc("tokenize", src, "-o", out)
    assert result.returncode != 0 and "--force" in result.stderr.decode() and out.read_text() == "keep me"
    assert groc("tokenize", src, "-o", out, "--force").returncode == 0 and out.read_text() == "some text\n"
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert "empty" in groc("tokenize", empty).stderr.decode()
    binary = tmp_path / "x.bin"
    binary.write_bytes(b"\x00\x01\x02" * 10)
    assert "binary" in groc("tokenize", binary).stderr.decode()
    missing = groc("tokenize", tmp_path / "nope.txt")
    assert missing.returncode != 0 and "no such file" in missing.stderr.decode()
