"""Smaller cases of issue 30 (class 8): strict JSON everywhere, lexicons that list a word twice or
without bound, what a SIGKILLed writer leaves, and the Python API's words."""

import json
import os
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pytest

from groc_cli.artifacts.io import provenance, write_parquet
from groc_cli.console import strict_json
from groc_cli.errors import DamagedInput, GrocError
from groc_cli.models.lexicon import MAX_ENTRIES
from groc_cli.run_storage import read_lexicon
from tests.conftest import REPO, run_groc
from tests.test_damaged_artifacts import EVAL, pristine, work  # noqa: F401


def strict_loads(text):
    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_strict_json_writes_null_and_says_why():
    text = strict_json({"perplexity": float("inf"), "grid": [{"ppl": float("nan")}, {"ppl": 3.0}], "n": 2})
    data = strict_loads(text)
    assert data["perplexity"] is None and data["grid"][0]["ppl"] is None and data["grid"][1]["ppl"] == 3.0
    assert data["nonfinite"] == {"perplexity": "inf", "grid.0.ppl": "nan"}


@pytest.mark.slow
def test_eval_with_the_cache_alone_is_strict_json(work):
    r = run_groc("eval", "run", "ds", "--split", "valid", "--device", "cpu", "--cache", "local", "--cache-weight", "1",
                 cwd=work)
    assert r.returncode == 0, r.stderr.decode()
    data = strict_loads(r.stdout.decode())
    assert data["perplexity"] is None and data["nonfinite"]["perplexity"] == "inf"


@pytest.mark.slow
def test_score_with_the_cache_alone_is_strict_json(work):
    (work / "lines.txt").write_text("she was not a woman of many words .\n")
    r = run_groc("score", "run", "lines.txt", "--device", "cpu", "--json", "--cache", "unigram", "--cache-weight", "1",
                 cwd=work)
    assert r.returncode == 0, r.stderr.decode()
    row = strict_loads(r.stdout.decode().splitlines()[0])
    assert row["ln_prob"] is None and "ln_prob" in row["nonfinite"]


def lexicon_file(path, rows, max_relations=3):
    table = pa.table({"word": pa.array([w for w, _ in rows], pa.string()),
                      "relations": pa.array([r for _, r in rows], pa.list_(pa.string())),
                      "definition": pa.array([[] for _ in rows], pa.list_(pa.string()))})
    write_parquet(table, path, provenance("lexicon", arguments={"max_relations": max_relations, "max_definition": 10}))
    return path


def test_lexicon_listing_a_word_twice_differently(tmp_path):
    path = lexicon_file(tmp_path / "lex.parquet", [("ship", ["boat"]), ("sea", ["ocean"]), ("ship", ["vessel"])])
    with pytest.raises(DamagedInput, match="'ship' twice"):
        read_lexicon(path, "rebuild it")
    same = lexicon_file(tmp_path / "same.parquet", [("ship", ["boat"]), ("ship", ["boat"])])
    assert read_lexicon(same, "rebuild it").relations == {"ship": ["boat"]}


def test_lexicon_with_more_relations_than_recorded(tmp_path):
    many = [f"w{i}" for i in range(20_000)]
    with pytest.raises(DamagedInput, match="20,000 relations for 'ship'"):
        read_lexicon(lexicon_file(tmp_path / "a.parquet", [("ship", many)]), "rebuild it")
    with pytest.raises(DamagedInput, match="more than the 3 "):
        read_lexicon(lexicon_file(tmp_path / "b.parquet", [("ship", many[:4])]), "rebuild it")
    with pytest.raises(DamagedInput, match=f"more than the {MAX_ENTRIES:,} "):
        read_lexicon(lexicon_file(tmp_path / "c.parquet", [("ship", many)], max_relations=None), "rebuild it")


@pytest.mark.slow
def test_a_sigkilled_writers_leftovers_are_reclaimed(tmp_path):
    """A real writer (tokenize -o, reading stdin) killed mid-output leaves its temporary file; the
    next writer of that output removes it, and leaves a live writer's alone."""
    out = tmp_path / "out.txt"
    writer = subprocess.Popen([sys.executable, "-m", "groc_cli", "tokenize", "-", "-o", str(out)], cwd=REPO,
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    writer.stdin.write(b"Hello, world.\n" * 1000)
    writer.stdin.flush()
    deadline = time.monotonic() + 300  # a liveness bound on a loaded machine, not a timing assertion
    while not [p for p in tmp_path.iterdir() if ".incomplete-" in p.name]:
        assert writer.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    left = [p.name for p in tmp_path.iterdir() if ".incomplete-" in p.name]
    assert left and all(name.startswith(f".out.txt.incomplete-{writer.pid}-") for name in left)
    live = tmp_path / f".out.txt.incomplete-{os.getpid()}-live"
    live.write_text("")
    (tmp_path / "in.txt").write_text("Hello again.\n")
    r = run_groc("tokenize", tmp_path / "in.txt", "-o", out)
    assert r.returncode == 0, r.stderr.decode()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["in.txt", "out.txt", live.name])


@pytest.fixture(scope="module")
def loaded(pristine):
    from groc_cli import load_run

    return load_run(pristine / "run")


@pytest.mark.slow
@pytest.mark.parametrize("call", [lambda m: m.score([[b"the", b"ship"]]), lambda m: m.score([["the", 3]]),
                                  lambda m: m.score_tokens(["the", ""]), lambda m: m.log_probs([b"the"]),
                                  lambda m: m.score([b"the ship"])])
def test_api_refuses_words_that_are_not_str(loaded, call):
    with pytest.raises(GrocError, match="str"):
        call(loaded)


@pytest.mark.slow
def test_api_takes_str_where_documented(loaded):
    assert loaded.score(["the ship"])[0].tokens == 3
    assert loaded.log_probs("the").shape == (len(loaded.vocab),)


@pytest.mark.slow
def test_embed_words_refuses_one_str(loaded):
    """Checked before the run's kind: a str is never a list of words."""
    with pytest.raises(GrocError, match=r"not a str.*\['captain'\]"):
        loaded.embed_words("captain")
    with pytest.raises(GrocError, match="GroC runs only"):
        loaded.embed_words(["captain"])
