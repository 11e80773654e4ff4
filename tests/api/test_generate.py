"""groc generate and LoadedRun.generate on tiny runs: seeds, greedy, top-k/top-p, a vocabulary chosen at
generation time (GroC) and its refusal (table models), prompts with unseen words, bad input, pipes."""

import json
import subprocess
import sys

import pytest
import torch

from tests.conftest import REPO, TEST_ENV, run_groc

pytestmark = pytest.mark.slow

BOOKS = REPO / "groc_cli" / "data"
PERSUASION = (BOOKS / "austen-persuasion.txt", "4000,1000", "--tokenize", "--lower")


@pytest.fixture(scope="module")
def work(tmp_path_factory, tiny_run):
    """A tied and a GroC run on the start of Persuasion; emma: a dataset of the start of Emma (a
    vocabulary with words the runs never saw); each a link, under one folder, to tiny_run's shared one."""
    root = tmp_path_factory.mktemp("generate")
    data = tiny_run.data(*PERSUASION)
    emma = tiny_run.data(BOOKS / "austen-emma.txt", "3000", "--tokenize", "--lower")
    lexicon = tiny_run.lexicon(data, emma)
    shared = {"data": data, "emma": emma, "lex.parquet": lexicon, "tied": tiny_run("tied", data=data),
              "groc": tiny_run("groc", data=data, lexicon=lexicon, max_tokens=48)}
    for name, path in shared.items():
        (root / name).symlink_to(path)
    return root


def generate(work, run, *args, input=None):
    return run_groc("generate", work / run, *args, input=input)


def lines(result) -> list[str]:
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode().splitlines()


@pytest.mark.parametrize("run", ["tied", "groc"])
def test_a_seed_gives_the_same_samples_and_json_carries_log_probs(work, run):
    args = ("the", "--max-tokens", "12", "--num-samples", "3", "--seed", "7")
    first, again = lines(generate(work, run, *args)), lines(generate(work, run, *args))
    assert first == again and len(first) == 3
    other = lines(generate(work, run, *args[:-1], "8"))
    assert other != first  # three samples of up to 12 words from ~1,000 words: a clash is not credible
    records = [json.loads(line) for line in lines(generate(work, run, *args, "--json"))]
    assert [r["text"] for r in records] == first
    for r in records:
        assert r["prompt"] == "the" and r["stop"] in ("eos", "max_tokens")
        assert len(r["tokens"]) <= 12 and all(lp <= 0 for _, lp in r["tokens"])
        assert (len(r["tokens"]) == 12) == (r["stop"] == "max_tokens")


def test_temperature_zero_is_greedy_the_same_for_every_seed(work):
    from groc_cli import load_run

    one = lines(generate(work, "groc", "the", "--temperature", "0", "--max-tokens", "5", "--seed", "1"))
    two = lines(generate(work, "groc", "the", "--temperature", "0", "--max-tokens", "5", "--seed", "2",
                         "--num-samples", "2"))
    assert two == one * 2
    run = load_run(work / "groc")
    expected = run.vocab[int(torch.argmax(run.log_probs("the")))]
    sample = run.generate("the", temperature=0, max_tokens=1)[0]
    assert (sample.words or ["<eos>"])[0] == expected
    # the log-prob reported is the model's (closed vocabulary: log_probs' own)
    if sample.words:
        assert sample.log_probs[0] == pytest.approx(float(run.log_probs("the").max()), abs=1e-5)


def test_top_k_one_is_greedy_and_top_p_zero_is_refused(work):
    greedy = lines(generate(work, "tied", "the", "--temperature", "0", "--max-tokens", "6"))
    assert lines(generate(work, "tied", "the", "--top-k", "1", "--max-tokens", "6", "--seed", "5")) == greedy
    r = generate(work, "tied", "the", "--top-p", "0")
    assert r.returncode == 2 and r.stdout == b""
    err = r.stderr.decode().strip()
    assert len(err.splitlines()) == 1 and "--top-p" in err and "(0, 1]" in err
    assert lines(generate(work, "tied", "the", "--top-p", "1", "--max-tokens", "3"))


def test_groc_draws_from_a_vocabulary_chosen_now(work, tmp_path):
    from groc_cli import load_run

    run = load_run(work / "groc")
    new = ["zeppelin", "quasar", "captain", "admiral"]
    assert not {"zeppelin", "quasar"} & set(run.vocab)
    (tmp_path / "words.txt").write_text("\n".join(new) + "\n", encoding="utf-8")
    out = lines(generate(work, "groc", "the", "--vocab", tmp_path / "words.txt", "--max-tokens", "30",
                         "--num-samples", "4", "--seed", "2", "--temperature", "2"))
    drawn = {w for line in out for w in line.split()}
    assert drawn and drawn <= set(new) and drawn & {"zeppelin", "quasar"}  # new words are drawn too
    # a dataset directory's vocabulary: every word drawn is Emma's
    emma = load_run(work / "groc").generation_vocab(work / "emma")
    out = lines(generate(work, "groc", "", "--vocab", work / "emma", "--max-tokens", "20", "--num-samples", "3",
                         "--lexicon", work / "lex.parquet"))
    assert {w for line in out for w in line.split()} <= set(emma)
    assert "<unk>" not in emma and "<eos>" in emma
    # composed rows over a chosen list equal the model's own rows for its words
    seen = run.vocab[10]
    assert run.embed_words([seen, "zeppelin"])[0].tolist() == pytest.approx(
        run.model.compose(grad=False).weight[run.index[seen]].tolist(), abs=1e-6)


def test_a_test_only_dataset_gives_every_word_of_its_split_to_draw_from(work, tmp_path):
    """A dataset prepared without a training split (a target domain's test text, as the quickstart's
    near and far sets) has no training vocabulary: its words are those of its split."""
    from groc_cli import load_run
    from groc_cli.text.dataset import open_dataset

    text = tmp_path / "thursday.txt"
    text.write_text("".join((BOOKS / "chesterton-thursday.txt").read_text(encoding="utf-8").splitlines(True)[160:220]),
                    encoding="utf-8")
    run_groc("prepare", "--test", text, "--tokenize", "--lower", "-o", tmp_path / "far", check=True)
    words, run = set(open_dataset(tmp_path / "far").words), load_run(work / "groc")
    assert "anarchist" in words and "anarchist" not in run.vocab
    assert set(run.generation_vocab(tmp_path / "far")) == words - {"<unk>"} | {"<eos>"}
    out = lines(generate(work, "groc", "the", "--vocab", tmp_path / "far", "--max-tokens", "30", "--num-samples", "4",
                         "--seed", "1"))
    drawn = {w for line in out for w in line.split()}
    assert drawn and drawn <= words


def test_a_table_model_refuses_a_chosen_vocabulary_and_reads_unseen_words_as_unk(work, tmp_path):
    (tmp_path / "words.txt").write_text("captain\n", encoding="utf-8")
    r = generate(work, "tied", "the", "--vocab", tmp_path / "words.txt")
    assert r.returncode == 2 and r.stdout == b""
    err = r.stderr.decode().strip()
    assert len(err.splitlines()) == 1 and err.startswith("groc: error: --vocab") and "GroC" in err
    assert lines(generate(work, "tied", "the", "--vocab", "model", "--max-tokens", "2"))
    prompts = "zzqx the\nthe qqzx\n"
    r = generate(work, "tied", "--input", "-", "--max-tokens", "3", input=prompts.encode())
    assert len(lines(r)) == 2
    notes = [line for line in r.stderr.decode().splitlines() if "<unk>" in line]
    assert len(notes) == 1 and "zzqx" in notes[0]
    r = generate(work, "groc", "--input", "-", "--max-tokens", "3", input=prompts.encode())
    assert len(lines(r)) == 2 and "<unk>" not in r.stderr.decode()


def test_bad_input_is_one_line(work, tmp_path):
    def refused(*args, needle, input=None, run="groc"):
        r = generate(work, run, *args, input=input)
        assert r.returncode != 0 and r.stdout == b"", r.stderr.decode()
        err = r.stderr.decode().strip()
        assert len(err.splitlines()) == 1 and needle in err, err

    refused("the", "--vocab", tmp_path / "missing.txt", needle="--vocab")
    (tmp_path / "empty.txt").write_text("")
    refused("the", "--vocab", tmp_path / "empty.txt", needle="empty")
    (tmp_path / "only-unk.txt").write_text("<unk>\n<eos>\n")
    refused("the", "--vocab", tmp_path / "only-unk.txt", needle="no words")
    refused("--input", tmp_path / "empty.txt", needle="empty")
    refused("--input", "-", needle="no prompts", input=b"")
    refused("the", "--input", tmp_path / "empty.txt", needle="not both")
    refused("the", "--max-tokens", "0", needle="--max-tokens")
    refused("the", "--temperature", "-1", needle="--temperature")
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "config.json").write_text("{not json")
    r = run_groc("generate", damaged, "the")
    assert r.returncode == 2 and "config.json" in r.stderr.decode() and len(r.stderr.decode().strip().splitlines()) == 1


def test_an_empty_prompt_starts_from_nothing_and_blank_lines_are_prompts(work):
    assert len(lines(generate(work, "tied", "", "--max-tokens", "4"))) == 1
    assert len(lines(generate(work, "tied", "--max-tokens", "4", "--num-samples", "2"))) == 2
    assert len(lines(generate(work, "tied", "--input", "-", "--max-tokens", "4", input=b"\nthe\n\n"))) == 3


def test_a_finetuned_run_generates_over_its_union_vocabulary(work, tmp_path):
    run_groc("finetune", work / "groc", work / "emma", "-o", tmp_path / "ft", "--max-tokens", "24",
             "--batch-size", "4", "--bptt", "12", "--eval-batch-size", "4", "--lexicon", work / "lex.parquet", check=True)
    from groc_cli import load_run

    run = load_run(tmp_path / "ft")
    samples = run.generate(["the", "emma"], max_tokens=5, num_samples=2, seed=4)
    assert [s.prompt for s in samples] == ["the", "the", "emma", "emma"]
    assert all(set(s.words) <= set(run.vocab) for s in samples)


def test_a_closed_pipe_ends_generation_quietly(work):
    shell = (f"{sys.executable} -m groc_cli generate {work / 'tied'} the --max-tokens 200 --num-samples 500 "
             "| head -n 2")
    r = subprocess.run(["bash", "-o", "pipefail", "-c", shell], capture_output=True,
                       env={**__import__("os").environ, **TEST_ENV})
    assert r.returncode == 0, r.stderr.decode()
    assert len(r.stdout.decode().splitlines()) == 2 and r.stderr == b""


def test_api_settings_errors_name_the_setting(work):
    from groc_cli import load_run
    from groc_cli.errors import GrocError

    run = load_run(work / "tied")
    with pytest.raises(GrocError, match=r"^top_p must be in \(0, 1\]"):
        run.generate("the", top_p=0)
    with pytest.raises(GrocError, match=r"^vocab .*GroC"):
        run.generate("the", vocab=["captain"])


def test_tokenize_reads_a_raw_prompt_as_its_words(work):
    """`--tokenize` once joined the letters of the tokenizer's string ("a n d t h e l o r d"): the prompt a
    sample continues is the prompt's Moses tokens, lowercased with --lower, from an argument or --input."""
    from groc_cli import load_run

    args = ("--tokenize", "--lower", "--json", "--temperature", "0", "--max-tokens", "2")
    record = json.loads(lines(generate(work, "groc", "Anne's captain, here.", *args))[0])
    assert record["prompt"] == "anne 's captain , here ."
    again = json.loads(lines(generate(work, "groc", *args, "--input", "-", input=b"Anne's captain, here.\n"))[0])
    assert again == record
    # Greedy: the first word is the model's most probable after the tokenized prompt, as the API computes it.
    run = load_run(work / "groc")
    if record["tokens"]:
        expected = run.log_probs("anne 's captain , here .").max()
        assert record["tokens"][0][1] == pytest.approx(float(expected), abs=1e-5)
    plain = json.loads(lines(generate(work, "groc", "Anne's captain, here.", "--json", "--max-tokens", "1"))[0])
    assert plain["prompt"] == "Anne's captain, here."  # without --tokenize the prompt is read as it is


def test_no_unk_never_draws_unk_which_samples_may_emit_otherwise(tiny_run):
    """A run whose vocabulary keeps 30 words (most training tokens <unk>) emits <unk> by default; with --no-unk
    the same draws never do, and each word's log-probability is over the words without <unk> (greater)."""
    run = tiny_run("tied", data=tiny_run.data(*PERSUASION, "--max-vocab", "30"))
    args = ("she was", "--max-tokens", "20", "--num-samples", "4", "--seed", "1", "--json")
    plain = [json.loads(line) for line in lines(run_groc("generate", run, *args))]
    assert any(w == "<unk>" for r in plain for w, _ in r["tokens"])
    banned = [json.loads(line) for line in lines(run_groc("generate", run, *args, "--no-unk"))]
    assert len(banned) == 4 and all(w != "<unk>" for r in banned for w, _ in r["tokens"])
    assert sum(len(r["tokens"]) for r in banned) > 0
    # The first word drawn before any <unk> is the same draw; its probability is renormalised without <unk>.
    first = next((p, b) for p, b in zip(plain, banned) if p["tokens"] and b["tokens"] and p["tokens"][0][0] != "<unk>")
    assert first[1]["tokens"][0][0] == first[0]["tokens"][0][0]
    assert first[1]["tokens"][0][1] > first[0]["tokens"][0][1]
    help_text = run_groc("generate", "--help", check=True).stdout.decode()
    assert "--no-unk" in help_text and "may emit" in help_text


def test_json_samples_stream_one_object_a_line_as_each_ends(work):
    """--json writes each sample's object as the sample ends: the first prompt's record arrives while the next
    prompt is not yet written (stdin still open), and each line is one valid JSON object."""
    import os
    import select

    proc = subprocess.Popen([sys.executable, "-m", "groc_cli", "generate", str(work / "tied"), "--input", "-", "--json",
                             "--max-tokens", "5", "--seed", "2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, **TEST_ENV})
    try:
        proc.stdin.write(b"she was\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, "no JSON record before the input ended"
        first = json.loads(proc.stdout.readline())
        assert first["prompt"] == "she was" and first["sample"] == 0 and proc.poll() is None
        proc.stdin.write(b"the\n")
        proc.stdin.close()
        rest = proc.stdout.read().decode().splitlines()
        assert proc.wait(60) == 0, proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert [json.loads(line)["prompt"] for line in rest] == ["the"]
