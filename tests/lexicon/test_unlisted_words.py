"""Words a GroC model composes without a lexicon row: finetune, eval and dump, and generate with a chosen
vocabulary each say once how many words of their vocabulary the lexicon does not list (they get characters
alone, no relations or definition), and say nothing when a lexicon over them is given; score reads one."""

import json
import re

import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO, TINY, run_groc

pytestmark = pytest.mark.slow

BOOKS = REPO / "groc_cli" / "data"
WARNING = re.compile(r"^warning: ([\d,]+) of the ([\d,]+) words of (.+) have no row in the lexicon \(e\.g\. ")


@pytest.fixture(scope="module")
def work(tiny_run):
    """A GroC run on Persuasion whose lexicon lists Persuasion's words only (and a tied run); Thursday, the
    other domain; lexicons over both and over Thursday alone."""
    data = tiny_run.data(BOOKS / "austen-persuasion.txt", "4000,1000", "--tokenize", "--lower")
    far = tiny_run.data(BOOKS / "chesterton-thursday.txt", "3000,1000", "--tokenize", "--lower")
    own = tiny_run.lexicon(data)
    return {"run": tiny_run("groc", data=data, lexicon=own, max_tokens=96), "far": far, "own": own,
            "both": tiny_run.lexicon(data, far), "far_only": tiny_run.lexicon(far),
            "tied": tiny_run("tied", data=data, max_tokens=96)}


def _warnings(result) -> list[tuple[int, int, str]]:
    assert result.returncode == 0, result.stderr.decode()
    lines = [line for line in result.stderr.decode().splitlines() if line.startswith("warning")]
    found = [WARNING.match(line) for line in lines]
    assert all(found), lines
    return [(int(m[1].replace(",", "")), int(m[2].replace(",", "")), m[3]) for m in found]


def _words(path, column: str | None = None) -> list[str]:
    """The words of a vocabulary or lexicon table (those with a true ``column`` where given)."""
    rows = pq.read_table(path).to_pylist()
    return [row["word"] for row in rows if column is None or row[column]]


def _union(work, column: str) -> list[str]:
    """The run's words, then the far domain's words of ``column`` that the run does not have."""
    model = _words(work["run"] / "vocab.parquet")
    return model + [w for w in _words(work["far"] / "vocab.parquet", column) if w not in set(model)]


def _unlisted(words, lexicon) -> int:
    listed = set(_words(lexicon))
    return sum(w not in listed for w in words)


def test_open_vocabulary_eval_and_dump_count_the_words_the_lexicon_lacks(work, tmp_path):
    union = run_groc("eval", work["run"], work["far"], "--split", "valid", "--vocab", "union")
    record = json.loads(union.stdout)
    words = _union(work, "count_valid")
    assert len(words) == record["vocab_size"]
    lacking = _unlisted(words, work["own"])  # Thursday's words that Persuasion never had
    assert 0 < lacking < len(words)
    assert _warnings(union) == [(lacking, len(words), "the evaluation vocabulary")]
    dumped = run_groc("dump", work["run"], work["far"], "--split", "valid", "--vocab", "union", "-o", tmp_path / "s")
    assert _warnings(dumped) == [(lacking, len(words), "the evaluation vocabulary")]

    covered = run_groc("eval", work["run"], work["far"], "--split", "valid", "--vocab", "union", "--lexicon", work["both"])
    assert _warnings(covered) == []
    # The rows it lacked change the model's probabilities: what the warning is about.
    assert json.loads(covered.stdout)["perplexity"] != record["perplexity"]
    assert _warnings(run_groc("eval", work["run"], work["far"], "--split", "valid")) == []  # closed: the run's words


def test_the_command_the_warning_gives_builds_the_table_that_silences_it(work, tmp_path):
    args = ["eval", work["run"], work["far"], "--split", "valid", "--vocab", "union"]
    warning, = [line for line in run_groc(*args).stderr.decode().splitlines() if line.startswith("warning")]
    command = re.search(r"\('groc (lexicon [^']*)'\)$", warning)[1].split()
    assert command == ["lexicon", "--vocab", str(work["run"]), "--vocab", "DATASET", "-o", "FILE"]
    table = tmp_path / "both.parquet"
    run_groc(*command[:4], work["far"], "-o", table, check=True)
    # A run directory gives its model's words: the table lists those and every word of the dataset.
    assert set(_words(table)) == set(_words(work["run"] / "vocab.parquet")) | set(_words(work["far"] / "vocab.parquet"))
    assert _warnings(run_groc(*args, "--lexicon", table)) == []


def test_a_lexicon_over_the_new_domain_alone_is_counted_for_the_models_own_words(work):
    union = run_groc("eval", work["run"], work["far"], "--split", "valid", "--vocab", "union", "--lexicon",
                     work["far_only"])
    words = _union(work, "count_valid")
    lacking = _unlisted(words, work["far_only"])
    assert lacking > _unlisted(words, work["own"])  # more of Persuasion's words than Thursday's new ones
    assert _warnings(union) == [(lacking, len(words), "the evaluation vocabulary")]
    # Closed vocabulary too: the model's own words are what it lacks there.
    closed = run_groc("eval", work["run"], work["far"], "--split", "valid", "--lexicon", work["far_only"])
    model = _words(work["run"] / "vocab.parquet")
    assert _warnings(closed) == [(_unlisted(model, work["far_only"]), len(model), "the evaluation vocabulary")]


def test_finetune_counts_its_union_vocabulary_once(work, tmp_path):
    flags = ["--max-tokens", "24", *TINY[4:]]
    tuned = run_groc("finetune", work["run"], work["far"], "-o", tmp_path / "tuned", *flags)
    words = _words(tmp_path / "tuned" / "vocab.parquet")
    assert words == _union(work, "in_vocab")
    assert _warnings(tuned) == [(_unlisted(words, work["own"]), len(words), "the finetuning vocabulary")]
    covered = run_groc("finetune", work["run"], work["far"], "-o", tmp_path / "covered", "--lexicon", work["both"], *flags)
    assert _warnings(covered) == []


def test_generate_counts_the_chosen_vocabulary(work):
    args = ["generate", work["run"], "the", "--vocab", work["far"], "--max-tokens", "3", "--seed", "1"]
    drawn = run_groc(*args)
    # The dataset's words (less <unk>, which is never drawn) and <eos>.
    words = [w for w in _words(work["far"] / "vocab.parquet", "in_vocab") if w != "<unk>"]
    assert _warnings(drawn) == [(_unlisted(words, work["own"]), len(words), "--vocab")]
    assert _warnings(run_groc(*args, "--lexicon", work["both"])) == []


def test_score_reads_a_given_lexicon_for_the_words_it_lists_anew(work, tmp_path):
    model = _words(work["run"] / "vocab.parquet")
    rows = pq.read_table(work["both"]).to_pylist()
    own = set(_words(work["own"]))
    new = [r["word"] for r in rows if r["relations"] and r["word"] not in own][:3]  # Thursday's, with WordNet rows
    known = [w for w in model if not w.startswith("<")][:6]
    text = tmp_path / "lines.txt"
    text.write_text(" ".join(known) + "\n" + " ".join(["the", *new]) + "\n")

    def scores(*flags) -> list[float]:
        r = run_groc("score", work["run"], text, "--json", *flags)
        assert r.returncode == 0, r.stderr.decode()
        return [json.loads(line)["ln_prob"] for line in r.stdout.decode().splitlines()]

    (known_own, new_own), (known_both, new_both) = scores(), scores("--lexicon", work["both"])
    assert known_both == known_own  # the model's own words have the same rows in both tables
    assert new_both != new_own

    tied = run_groc("score", work["tied"], text, "--lexicon", work["both"])
    missing = run_groc("score", work["run"], text, "--lexicon", tmp_path / "none.parquet")
    for refused, needle in ((tied, "GroC models only"), (missing, "no such file")):
        assert refused.returncode == 2 and refused.stdout == b""
        lines = refused.stderr.decode().splitlines()
        assert len(lines) == 1 and lines[0].startswith("groc: error: --lexicon") and needle in lines[0], lines
