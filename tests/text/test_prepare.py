import os
import subprocess
import sys
import hashlib
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from groc_cli.errors import GrocError
from tests.conftest import run_env
from groc_cli.text.dataset import (SPLITS, build_vocabulary, count_splits, open_dataset, parse_budgets, prepare_dataset,
                                   read_vocab_words, split_by_budget)
from groc_cli.text.io import TokenLines


def test_parse_budgets():
    assert parse_budgets("2M,2M,10M") == [2_000_000, 2_000_000, 10_000_000]
    assert parse_budgets("90k, rest") == [90_000, None]
    for bad in ("", "2X", "rest,1M", "1,2,3,4", "0"):
        with pytest.raises(GrocError):
            parse_budgets(bad)


def test_split_by_budget_cuts_at_line_boundaries():
    lines = [["a"] * 3 for _ in range(10)]
    out = split_by_budget(lines, [5, 7, None], eos=False)
    assert [len(out[s]) for s in ("train", "valid", "test")] == [2, 3, 5]


def test_vocabulary_order_and_limits():
    counts = Counter({"the": 5, "a": 5, "cat": 2, "dog": 1, "<eos>": 4})
    assert build_vocabulary(counts, 1, None, True) == ["a", "the", "<eos>", "cat", "dog", "<unk>"]
    assert build_vocabulary(counts, 2, None, True) == ["a", "the", "<eos>", "cat", "<unk>"]
    assert build_vocabulary(counts, 1, 4, True) == ["a", "the", "<eos>", "<unk>"]


@pytest.mark.slow
def test_ptb_counts(groc, data_dir, tmp_path):
    ptb = data_dir / "ptb"
    out = tmp_path / "ptb"
    result = groc("prepare", "--train", ptb / "ptb.train.txt", "--valid", ptb / "ptb.valid.txt",
                  "--test", ptb / "ptb.test.txt", "-o", out, "--json", check=True)
    manifest = json.loads(result.stdout)
    assert manifest["splits"]["train"]["tokens"] == 929_589
    assert manifest["vocab_size"] == 10_000
    assert manifest["splits"]["test"]["oov_rate"] == 0.0
    ds = open_dataset(out)
    train = ds.ids("train")
    assert train.dtype == np.uint16 and len(train) == 929_589
    assert ds.vocab[train[-1]] == "<eos>"
    assert ds.words[ds.counts["train"].argmax()] == "the"
    assert ds.manifest["inputs"]["train"]["sha256"]
    assert json.loads(pq.read_schema(out / "vocab.parquet").metadata[b"groc"])["stage"] == "prepare"


@pytest.mark.slow
def test_wikitext2_counts(groc, data_dir, tmp_path):
    wt = data_dir / "wikitext-2"
    out = tmp_path / "wt2"
    groc("prepare", "--train", wt / "wiki.train.tokens", "--valid", wt / "wiki.valid.tokens", "-o", out, check=True)
    ds = open_dataset(out)
    assert ds.manifest["splits"]["train"]["tokens"] == 2_088_628
    assert ds.vocab_size == 33_278
    # Written a row group at a time: the same row groups as the in-memory writer made, and the
    # checksum as documented (docs/formats.md), although no split was ever held whole.
    groups = pq.ParquetFile(out / "train.parquet").metadata
    assert [groups.row_group(i).num_rows for i in range(groups.num_row_groups)] == [1 << 20, 2_088_628 - (1 << 20)]
    digest = hashlib.sha256(f"groc-dataset-v1\n{ds.vocab_size}\n".encode())
    for word in ds.words:
        digest.update(word.encode() + b"\n")
    for name in SPLITS:
        if ds.has_split(name):
            digest.update(name.encode() + ds.ids(name).astype(np.uint32).tobytes())
    assert digest.hexdigest() == ds.checksum


@pytest.mark.slow
def test_stdin_and_tokenized_input_are_read_twice_through_an_unnamed_spool(groc, data_dir, tmp_path):
    valid = data_dir / "ptb" / "ptb.valid.txt"
    sums = []
    for n, (args, stdin) in enumerate([([valid], None), (["-"], valid.read_bytes()),
                                       ([valid, "--tokenize"], None), (["-", "--tokenize", "-j", "2"], valid.read_bytes())]):
        result = groc("prepare", "--train", *args, "--split", "50K,rest", "-o", tmp_path / f"d{n}", "--json", input=stdin, check=True)
        sums.append(json.loads(result.stdout)["checksum"])
    assert sums[0] == sums[1] and sums[2] == sums[3]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d0", "d1", "d2", "d3"]  # no spool or scratch file left


def test_budgets_stop_reading_once_met():
    read = []

    def lines():
        for i in range(1000):
            read.append(i)
            yield ["a", "b", "c"]

    class Twice:
        def __iter__(self):
            return lines()

    scan = count_splits({"train": Twice()}, budgets=[8, 8], eos=True)
    assert [(s.lines, s.tokens) for s in scan.stats.values()] == [(2, 8), (2, 8)]
    assert len(read) <= 5  # the 1000-line input was not read to its end


def test_input_changed_between_readings_is_refused(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("a b\nc d\n")
    lines = TokenLines(str(text), "--train", spool_dir=tmp_path)
    assert list(lines) == [["a", "b"], ["c", "d"]] == list(lines)
    text.write_text("a b\nc d e\n")
    with pytest.raises(GrocError, match="--train .* changed while groc was reading it"):
        list(lines)


@pytest.mark.slow
def test_split_tokenize_and_oov(groc, data_dir, tmp_path):
    out = tmp_path / "reuters"
    result = groc("prepare", "--train", data_dir / "reuters" / "reuters.test.txt", "--tokenize", "--lower",
                  "--split", "20K,5K,5K", "--min-count", "2", "-o", out, "--json", check=True)
    m = json.loads(result.stdout)
    for name, budget in (("train", 20_000), ("valid", 5_000), ("test", 5_000)):
        assert budget <= m["splits"][name]["tokens"] < budget + 2_000
    assert 0.05 < m["splits"]["test"]["oov_rate"] < 0.3
    ds = open_dataset(out)
    test_ids = ds.ids("test")
    assert np.count_nonzero(test_ids >= ds.vocab_size) == m["splits"]["test"]["oov_tokens"]
    assert all(w == w.lower() for w in ds.vocab)
    assert min(ds.counts["train"][: ds.vocab_size - 1]) >= 1


def test_same_content_same_checksum(tmp_path):
    lines = {"train": [["a", "b"], ["b", "c"]], "test": [["c", "d"]]}
    m1 = prepare_dataset(lines, tmp_path / "one", inputs={"train": {"path": "x"}})
    m2 = prepare_dataset(lines, tmp_path / "two", inputs={"train": {"path": "y"}})
    assert m1["checksum"] == m2["checksum"]
    m3 = prepare_dataset({"train": [["a", "b"]], "test": [["c", "d"]]}, tmp_path / "three")
    assert m3["checksum"] != m1["checksum"]


@pytest.mark.slow
def test_failures_leave_nothing(groc, data_dir, tmp_path):
    out = tmp_path / "ds"
    result = groc("prepare", "--train", data_dir / "ptb" / "ptb.valid.txt", "--split", "80K,50K", "-o", out)
    assert result.returncode != 0 and "ran out" in result.stderr.decode()
    assert list(tmp_path.iterdir()) == []
    out.mkdir()
    result = groc("prepare", "--train", data_dir / "ptb" / "ptb.valid.txt", "-o", out)
    assert result.returncode != 0 and "--force" in result.stderr.decode()
    assert "--tokenize" in groc("prepare", "--train", data_dir / "ptb" / "ptb.valid.txt", "--lower", "-o", tmp_path / "x").stderr.decode()


def test_open_dataset_refuses_other_directories(tmp_path):
    with pytest.raises(GrocError, match="not a directory"):
        open_dataset(tmp_path / "missing")
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(GrocError, match="not a groc dataset"):
        open_dataset(tmp_path)


def test_split_budget_counts_eos_and_test_only_dataset_has_no_oov(tmp_path):
    out = split_by_budget([["a"] * 3 for _ in range(10)], [8, None], eos=True)
    assert len(out["train"]) == 2
    m = prepare_dataset({"test": [["x", "y"]]}, tmp_path / "t")
    assert m["vocab_size"] == 0 and "oov_rate" not in m["splits"]["test"]


def _error_line(result) -> str:
    """The one-line error a failed prepare ends with (its progress lines come before it)."""
    err = result.stderr.decode()
    assert result.returncode == 2 and "Traceback" not in err, err
    return err.splitlines()[-1]


@pytest.mark.slow
def test_input_without_words_is_refused_naming_its_flag(groc, data_dir, tmp_path):
    blank = tmp_path / "blank.txt"
    blank.write_text("  \n\t\n\n \u00a0\n\n")
    good = data_dir / "ptb" / "ptb.valid.txt"
    for args, flag in ((["--train", blank], "--train"), (["--train", blank, "--tokenize", "-j", "2"], "--train"),
                       (["--train", good, "--test", blank], "--test"), (["--train", "-"], "--train stdin")):
        line = _error_line(groc("prepare", *args, "-o", tmp_path / "ds", input=b"\n \n" if "-" in args else None))
        assert line.startswith(f"groc: error: {flag}") and "has no words" in line, line
        assert str(blank) in line or "stdin" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blank.txt"]


@pytest.mark.slow
def test_min_count_that_keeps_no_word_is_refused_and_mostly_unk_warned(groc, data_dir, tmp_path):
    valid = data_dir / "ptb" / "ptb.valid.txt"  # 'the' occurs 4,122 times
    line = _error_line(groc("prepare", "--train", valid, "--min-count", "5000", "-o", tmp_path / "none"))
    assert line == ("groc: error: --min-count 5000 keeps no training word besides <unk> and <eos> "
                    "(the most frequent, 'the', occurs 4,122 times); lower --min-count")
    assert not (tmp_path / "none").exists()
    unk = groc("prepare", "--train", valid, "--min-count", "100", "-o", tmp_path / "mostly-unk", check=True)
    warnings = [w for w in unk.stderr.decode().splitlines() if w.startswith("warning")]
    assert warnings == ["warning: 52.5% of the training tokens are <unk>; lower --min-count (now 100) to keep more words"]
    fine = groc("prepare", "--train", valid, "--min-count", "50", "-o", tmp_path / "fine", check=True)
    assert "warning" not in fine.stderr.decode()


@pytest.mark.slow
def test_stdin_met_budgets_leave_the_writer_a_normal_end(tmp_path):
    # --split stops counting once its budgets are met; the rest of stdin is still read, so the
    # command writing into the pipe is not killed by SIGPIPE (a failure under pipefail).
    script = (f'seq 1 200000 | sed "s/$/ a b c/" | "{sys.executable}" -m groc_cli prepare --train - '
              f'--split 2K,1K -o "{tmp_path / "ds"}"')
    r = subprocess.run(["bash", "-o", "pipefail", "-c", script], capture_output=True, env=run_env())
    assert r.returncode == 0, r.stderr.decode()
    assert (tmp_path / "ds" / "manifest.json").exists()


@pytest.mark.slow
def test_a_byte_order_mark_is_not_part_of_the_first_word(groc, tmp_path):
    """Windows editors save UTF-8 with a byte-order mark; it used to become a word of its own ('\\ufeffthe')."""
    bom = b"\xef\xbb\xbf"
    text = b"the cat sat .\r\nthe dog ran .\r\n"
    plain, marked = tmp_path / "plain.txt", tmp_path / "marked.txt"
    plain.write_bytes(text)
    marked.write_bytes(bom + text)
    runs = {
        "plain": groc("prepare", "--train", plain, "--json", "-o", tmp_path / "plain"),
        "file": groc("prepare", "--train", marked, "--json", "-o", tmp_path / "file"),
        "stdin": groc("prepare", "--train", "-", "--json", "-o", tmp_path / "stdin", input=bom + text),
        "tokenized": groc("prepare", "--train", marked, "--tokenize", "--json", "-o", tmp_path / "tokenized"),
    }
    for name, result in runs.items():
        assert result.returncode == 0, (name, result.stderr.decode())
    words = {name: open_dataset(tmp_path / name).vocab for name in runs}
    assert "the" in words["plain"] and not any("\ufeff" in w for w in words["plain"])
    assert words["file"] == words["stdin"] == words["tokenized"] == words["plain"]
    assert {json.loads(r.stdout)["checksum"] for r in runs.values()} == {json.loads(runs["plain"].stdout)["checksum"]}
    tokenized = groc("tokenize", marked)
    assert tokenized.returncode == 0 and tokenized.stdout.startswith(b"the cat")
    word_list = tmp_path / "words.txt"
    word_list.write_bytes(bom + b"the 3\r\ncat\r\n")
    assert read_vocab_words(word_list) == ["the", "cat"]


@pytest.mark.slow
def test_compressed_text_is_read_as_it_is_and_a_truncated_file_is_one_line(groc, data_dir, tmp_path):
    """WMT's News Crawl comes gzipped: `groc prepare --train news.2007.en.shuffled.gz` said it
    looked binary. gzip, bzip2 and xz files, and compressed stdin, make the dataset that the text
    makes; a file cut short (an interrupted download) is one error line and leaves nothing."""
    import bz2
    import gzip
    import lzma

    text = (data_dir / "ptb" / "ptb.valid.txt").read_bytes()
    inputs = {"plain.txt": text, "t.gz": gzip.compress(text), "t.bz2": bz2.compress(text), "t.xz": lzma.compress(text)}
    for name, data in inputs.items():
        (tmp_path / name).write_bytes(data)
    checksums = set()
    for name in inputs:
        r = groc("prepare", "--train", tmp_path / name, "--json", "-o", tmp_path / f"ds-{name}")
        assert r.returncode == 0, r.stderr.decode()
        checksums.add(json.loads(r.stdout)["checksum"])
    r = groc("prepare", "--train", "-", "--json", "-o", tmp_path / "ds-stdin", input=inputs["t.gz"])
    assert r.returncode == 0, r.stderr.decode()
    checksums.add(json.loads(r.stdout)["checksum"])
    assert len(checksums) == 1
    assert groc("tokenize", tmp_path / "t.xz").stdout == groc("tokenize", tmp_path / "plain.txt").stdout

    cut = tmp_path / "cut.gz"
    cut.write_bytes(inputs["t.gz"][: len(inputs["t.gz"]) // 2])
    r = groc("prepare", "--train", cut, "-o", tmp_path / "ds-cut")
    err = r.stderr.decode().strip().splitlines()
    assert r.returncode != 0 and "cannot read it as gzip" in err[-1] and "cut short" in err[-1]
    assert len([line for line in err if "error" in line]) == 1
    assert not (tmp_path / "ds-cut").exists() and not list(tmp_path.glob(".ds-cut*"))


@pytest.mark.slow
def test_a_pipe_given_by_name_is_read_once_and_drained(data_dir, tmp_path):
    """`groc prepare --train <(zcat news.gz)` said `/dev/fd/63 is empty` (a pipe's size is 0), as did
    every stage given a pipe by name, and prepare reads a plain file twice, which a pipe cannot be."""
    valid = data_dir / "ptb" / "ptb.valid.txt"
    groc_cmd = f'"{sys.executable}" -m groc_cli'

    def shell(script: str):
        return subprocess.run(["bash", "-o", "pipefail", "-c", script], capture_output=True, text=True, cwd=tmp_path,
                              env=run_env())

    made = {}
    for name, source in (("file", f'"{valid}"'), ("substituted", f'<(cat "{valid}")'),
                         ("gzipped", f'<(gzip -c "{valid}")')):
        r = shell(f"{groc_cmd} prepare --train {source} --json -o {name}")
        assert r.returncode == 0, r.stderr
        made[name] = json.loads(r.stdout)["checksum"]
    assert len(set(made.values())) == 1
    r = shell(f'{groc_cmd} tokenize <(head -n 2 "{valid}")')
    assert r.returncode == 0 and r.stdout.splitlines()[0].startswith("consumers may want")
    # A named pipe whose budgets are met early: the rest is read, so its writer ends normally.
    r = shell(f'mkfifo fifo; (seq 1 200000 | sed "s/$/ a b c/" > fifo; echo "writer $?" > writer.txt) & '
              f'{groc_cmd} prepare --train fifo --split 2K,1K -o budgets; wait')
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "writer.txt").read_text().strip() == "writer 0"
    assert open_dataset(tmp_path / "budgets").manifest["splits"]["train"]["tokens"] == 2000
    # A word list (`--vocab <(cut -f1 counts.tsv)`): its first 8 KiB were read to check it, then lost.
    read_end, write_end = os.pipe()
    os.write(write_end, b"cat\ndog 3\n")
    os.close(write_end)
    try:
        assert read_vocab_words(Path(f"/dev/fd/{read_end}")) == ["cat", "dog"]
    finally:
        os.close(read_end)


def test_shuffled_assignment_fills_budgets_with_whole_lines_in_a_seeded_order():
    from groc_cli.text.dataset import LEFT_OUT, shuffled_assignment

    lengths = [3] * 20  # 4 tokens a line with <eos>
    one = shuffled_assignment(lengths, [16, 8, None], eos=True, seed=1)
    assert one.tolist() == shuffled_assignment(lengths, [16, 8, None], eos=True, seed=1).tolist()
    assert one.tolist() != shuffled_assignment(lengths, [16, 8, None], eos=True, seed=2).tolist()
    assert [int((one == k).sum()) for k in range(3)] == [4, 2, 14]
    assert one[:4].tolist() != [0, 0, 0, 0]  # not the consecutive split's first block
    assert int((shuffled_assignment(lengths, [16, 8], eos=True, seed=1) == LEFT_OUT).sum()) == 14


def _split_lines(path) -> dict[str, list[str]]:
    """Each split of a dataset directory as its lines (words joined by spaces, <eos> ending each)."""
    dataset = open_dataset(path, verify=True)  # the recorded checksum is the content's
    out = {}
    for name in dataset.manifest["splits"]:
        words = " ".join(dataset.words[i] for i in dataset.ids(name))
        out[name] = [line.strip() for line in words.split("<eos>") if line.strip()]
    return out


@pytest.mark.slow
def test_shuffle_splits_by_line_in_a_seeded_order_and_blank_lines_can_be_dropped(groc, tmp_path):
    """--split with --shuffle --seed: the splits hold whole input lines drawn at random (the same for the
    same seed, others for another seed), each split in input order, no line in two splits; without
    --shuffle the train split is the input's first lines. --drop-blank-lines leaves blank lines out."""
    text = tmp_path / "lines.txt"
    text.write_text("".join(f"w{i} common x{i % 3}\n" + ("\n   \n" if i % 5 == 0 else "") for i in range(60)))
    inputs = [f"w{i} common x{i % 3}" for i in range(60)]

    def prepare(name, *flags):
        groc("prepare", "--train", text, "--split", "80,40,rest", *flags, "-o", tmp_path / name, check=True)
        return _split_lines(tmp_path / name), json.loads((tmp_path / name / "manifest.json").read_text())

    plain, plain_manifest = prepare("plain")
    assert len(plain["train"]) > 5 and plain["train"] == inputs[:len(plain["train"])]
    shuffled, manifest = prepare("shuffled", "--shuffle", "--seed", "4")
    assert manifest["arguments"]["shuffle"] is True and manifest["arguments"]["seed"] == 4
    assert shuffled["train"] != plain["train"] and shuffled["train"][0] != "w0 common x0"
    position = {line: i for i, line in enumerate(inputs)}
    for lines in shuffled.values():
        assert [position[line] for line in lines] == sorted(position[line] for line in lines)  # input order
    every = [line for lines in shuffled.values() for line in lines]
    assert sorted(every, key=position.get) == inputs  # each line once ('rest' takes the others)
    again, again_manifest = prepare("again", "--shuffle", "--seed", "4")
    assert again == shuffled and again_manifest["checksum"] == manifest["checksum"]
    other, _ = prepare("other", "--shuffle", "--seed", "5")
    assert other["train"] != shuffled["train"]
    # Blank lines count as lines (an <eos> each) unless dropped.
    assert plain_manifest["splits"]["train"]["lines"] > len(plain["train"])
    _, dropped = prepare("dropped", "--drop-blank-lines")
    assert sum(s["lines"] for s in dropped["splits"].values()) == 60
    assert dropped["arguments"]["drop_blank_lines"] is True
    refused = groc("prepare", "--train", text, "--shuffle", "-o", tmp_path / "refused")
    assert _error_line(refused).startswith("groc: error: --shuffle") and "--split" in _error_line(refused)
    assert not (tmp_path / "refused").exists()


class _Rereads:
    """An input that gives other lines from its reading ``before`` + 1 on (a file rewritten during prepare)."""

    def __init__(self, first, second, before):
        self.first, self.second, self.before = first, second, before

    def __iter__(self):
        self.before -= 1
        return iter(self.first if self.before >= 0 else self.second)


@pytest.mark.parametrize("second,shuffle,message", [
    ([["a", "b"], ["c", "zebra"]] * 20, None, "the word 'zebra' is new"),
    ([["a", "b"], ["c"]] * 19, None, "22 lines, 24 before"),
    ([["a", "b"], ["c", "a"]] * 20, None, "tokens, "),
    ([["a", "b"], ["c", "zebra"]] * 20, 1, "the word 'zebra' is new"),
    ([["a", "b"], ["c"]] * 19, 1, "38 lines, 40 before"),
    ([["a", "b"], ["c", "a"]] * 20, 1, "tokens, "),
])
def test_an_input_that_changes_before_its_ids_are_written_is_refused_and_nothing_is_written(tmp_path, second, shuffle,
                                                                                         message):
    """prepare reads its input to count its words (a shuffled one first for its line lengths too), then to
    write its ids: a word, a line or a token count that differs in that last reading is one clear error
    naming the input, and the dataset directory is not created."""
    from groc_cli.text.dataset import write_dataset

    first = [["a", "b"], ["c"]] * 20
    scan = count_splits({"train": _Rereads(first, second, 1 if shuffle is None else 2)}, budgets=[40, None],
                        shuffle_seed=shuffle)
    with pytest.raises(GrocError, match=r"changed between groc's two readings of it \(.*" + message.replace("(", r"\(")):
        write_dataset(scan, tmp_path / "data")
    assert not (tmp_path / "data").exists() and os.listdir(tmp_path) == []
