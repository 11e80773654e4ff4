"""groc score (real processes, pipes) and the Python API of docs/api.md, on tiny runs."""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO, TINY, run_env, run_groc

BOOKS = REPO / "groc_cli" / "data"


@pytest.fixture(scope="module")
def work(tmp_path_factory, tiny_run):
    """A tied and a GroC run on Persuasion (tiny_run's, linked here); text.txt: Emma (many words the runs
    never saw); seen.txt: the start of the runs' own training text (no new words)."""
    root = tmp_path_factory.mktemp("score")
    data = tiny_run.data(BOOKS / "austen-persuasion.txt", "4000,1000")
    lexicon = tiny_run.lexicon(data)
    for name, path in (("data", data), ("lex.parquet", lexicon), ("tied", tiny_run("tied", data=data, max_tokens=300)),
                       ("groc", tiny_run("groc", data=data, lexicon=lexicon, max_tokens=48))):
        (root / name).symlink_to(path)
    emma = BOOKS.joinpath("austen-emma.txt").read_text(encoding="utf-8").splitlines()[200:230]
    (root / "text.txt").write_text("\n".join(line.strip() for line in emma) + "\n", encoding="utf-8")
    seen = BOOKS.joinpath("austen-persuasion.txt").read_text(encoding="utf-8").splitlines()[:20]
    (root / "seen.txt").write_text("\n".join(seen) + "\n", encoding="utf-8")
    return root


def rows(stdout: bytes) -> tuple[list[str], list[list[str]]]:
    lines = stdout.decode().splitlines()
    return lines[0].split("\t"), [line.split("\t") for line in lines[1:]]


def eval_total(work, run: str, text: Path, vocab: str, tmp_path, *flags) -> tuple[float, int]:
    """groc eval's total log-prob on ``text`` as one stream. The split starts with an empty
    line: eval reads its first token as context only, and score reads each line after <eos>."""
    (tmp_path / "split.txt").write_text("\n" + text.read_text(encoding="utf-8"), encoding="utf-8")
    data = tmp_path / f"eval-{run}-{vocab}"
    run_groc("prepare", "--train", text, "--test", tmp_path / "split.txt", "-o", data, check=True)
    out = json.loads(run_groc("eval", work / run, data, "--split", "test", "--vocab", vocab, *flags, check=True).stdout)
    return -out["nll"] * out["tokens"], out["tokens"]


@pytest.mark.slow
@pytest.mark.parametrize("run", ["tied", "groc"])
@pytest.mark.parametrize("vocab, text", [("model", "text.txt"), ("union", "seen.txt")])
def test_one_stream_totals_are_evals_total(work, tmp_path, run, vocab, text):
    r = run_groc("score", work / run, work / text, "--one-stream", "--vocab", vocab, check=True)
    header, table = rows(r.stdout)
    assert header == ["ln_prob", "tokens", "perplexity"]
    assert len(table) == len(work.joinpath(text).read_text().splitlines())
    total, tokens = sum(float(t[0]) for t in table), sum(int(t[1]) for t in table)
    expected, expected_tokens = eval_total(work, run, work / text, vocab, tmp_path)
    assert tokens == expected_tokens
    assert total == pytest.approx(expected, rel=1e-6, abs=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("run, cache", [("tied", "local"), ("groc", "local"), ("tied", "unigram")])
def test_a_cache_carries_over_lines_as_in_eval(work, tmp_path, run, cache):
    flags = ["--cache", cache, "--cache-weight", "0.2", "--cache-size", "300"]
    r = run_groc("score", work / run, work / "text.txt", "--one-stream", "--vocab", "model", *flags, check=True)
    _, table = rows(r.stdout)
    total, tokens = sum(float(t[0]) for t in table), sum(int(t[1]) for t in table)
    expected, expected_tokens = eval_total(work, run, work / "text.txt", "model", tmp_path, *flags)
    assert tokens == expected_tokens
    assert total == pytest.approx(expected, rel=1e-6, abs=1e-3)
    _, plain = rows(run_groc("score", work / run, work / "text.txt", "--one-stream", "--vocab", "model", check=True).stdout)
    assert total != pytest.approx(sum(float(t[0]) for t in plain), abs=1e-3)  # the cache did something


@pytest.mark.slow
@pytest.mark.parametrize("run", ["tied", "groc"])
def test_unseen_words_get_finite_scores_and_the_line_adds_up(work, run):
    r = run_groc("score", work / run, "-", "--per-word", "--json", input=b"zzqx the blorfish\n", check=True)
    (line,) = r.stdout.decode().splitlines()
    row = json.loads(line)
    assert [w for w, _ in row["words"]] == ["zzqx", "the", "blorfish", "<eos>"]
    assert all(math.isfinite(lp) and lp < 0 for _, lp in row["words"])
    assert row["ln_prob"] == pytest.approx(sum(lp for _, lp in row["words"]))
    assert row["tokens"] == 4
    assert row["perplexity"] == pytest.approx(math.exp(-row["ln_prob"] / 4))


@pytest.mark.slow
def test_log10_and_reset_per_line(work):
    text = b"the captain was here\nthe captain was here\n"
    _, ln = rows(run_groc("score", work / "tied", "-", input=text, check=True).stdout)
    header, log10 = rows(run_groc("score", work / "tied", "-", "--log10", input=text, check=True).stdout)
    assert header[0] == "log10_prob"
    assert float(log10[0][0]) == pytest.approx(float(ln[0][0]) / math.log(10), abs=1e-5)
    assert ln[0] == ln[1]  # each line from the run's start state by default
    _, stream = rows(run_groc("score", work / "tied", "-", "--one-stream", input=text, check=True).stdout)
    assert stream[1] != ln[1]


@pytest.mark.slow
@pytest.mark.parametrize("run", ["tied", "groc"])
def test_lines_start_from_the_mean_state_after_eos_of_held_out_text(work, tmp_path, run):
    """Each checkpoint's start_state.safetensors is the mean LSTM state after each <eos> of
    the run's valid split read as one stream (eval mode); lone lines start from it, and a run
    without one (trained before start states) starts from zeros."""
    import shutil

    import torch

    from groc_cli import load_run
    from groc_cli.text.dataset import EOS, open_dataset
    from groc_cli.training.data import model_ids

    loaded = load_run(work / run, vocab="model")
    model = loaded.model
    valid = model_ids(loaded.vocab, open_dataset(work / "data"), "valid")
    eos = loaded.index[EOS]
    state, sums, lines, start = model.init_state(1), None, 0, 0
    with torch.no_grad():
        for end in (valid == eos).nonzero().flatten().tolist():
            _, state = model(valid[start : end + 1].view(-1, 1), state)
            sums = state if sums is None else [(a + h, b + c) for (a, b), (h, c) in zip(sums, state)]
            lines, start = lines + 1, end + 1
    expected = [(h / lines, c / lines) for h, c in sums]
    got = loaded.start_state()
    assert lines > 10 and len(got) == len(expected)
    for (h, c), (eh, ec) in zip(got, expected):
        assert torch.allclose(h, eh, atol=1e-6) and torch.allclose(c, ec, atol=1e-6)
        assert h.abs().sum() > 0
    for which in ("best", "last"):
        assert (work / run / which / "start_state.safetensors").is_file()
    line = b"the captain was here\n"
    _, scored = rows(run_groc("score", work / run, "-", "--vocab", "model", input=line, check=True).stdout)
    assert float(scored[0][0]) == pytest.approx(sum(loaded.score_tokens("the captain was here".split())[0]), abs=1e-5)
    old = tmp_path / "old"
    shutil.copytree(work / run, old)
    for which in ("best", "last"):
        (old / which / "start_state.safetensors").unlink()
    zeros = load_run(old, vocab="model")
    assert all(float(h.abs().sum()) == 0 for h, _ in zeros.start_state())
    _, from_zeros = rows(run_groc("score", old, "-", "--vocab", "model", input=line, check=True).stdout)
    assert from_zeros[0][0] != scored[0][0]


@pytest.mark.slow
def test_kenlm_layout_pairs_each_word_with_its_id_and_log10_prob(work):
    """--format kenlm writes KenLM query's lines: `word=id n log10prob` per word and </s>, `Total: T OOV: K`,
    then the perplexities including and excluding OOVs; the numbers are the TSV's, in log10."""
    from groc_cli import load_run

    text = b"she was the zzzqx\nshe was\n"
    r = run_groc("score", work / "tied", "-", "--format", "kenlm", "--vocab", "model", input=text, check=True)
    out = r.stdout.decode().splitlines()
    _, tsv = rows(run_groc("score", work / "tied", "-", "--vocab", "model", "--log10", input=text, check=True).stdout)
    index = {w: i for i, w in enumerate(load_run(work / "tied").vocab)}
    first = out[0].split("\t")
    assert [cell.split("=")[0] for cell in first[:-1]] == ["she", "was", "the", "zzzqx", "</s>"]
    assert [int(cell.split("=")[1].split()[0]) for cell in first[:-1]] == [
        index["she"], index["was"], index["the"], index["<unk>"], index["<eos>"]]
    assert [int(cell.split()[1]) for cell in first[:-1]] == [2, 3, 4, 5, 6]  # KenLM's n-gram length: tokens read
    probs = [float(cell.split()[-1]) for cell in first[:-1]]
    total = first[-1].split()
    assert total[0] == "Total:" and total[2] == "OOV:" and total[3] == "1"
    assert float(total[1]) == pytest.approx(sum(probs), abs=1e-4)
    assert float(total[1]) == pytest.approx(float(tsv[0][0]), abs=1e-4)  # log10, as --log10 writes it
    second = out[1].split("\t")
    assert second[-1].endswith("OOV: 0") and len(second) == 4
    summary = dict(line.split(":\t") for line in out[2:])
    assert list(summary) == ["Perplexity including OOVs", "Perplexity excluding OOVs", "OOVs", "Tokens"]
    assert summary["OOVs"] == "1" and summary["Tokens"] == "8"
    all_total = float(tsv[0][0]) + float(tsv[1][0])
    assert float(summary["Perplexity including OOVs"]) == pytest.approx(10 ** (-all_total / 8), rel=1e-4)
    assert float(summary["Perplexity excluding OOVs"]) == pytest.approx(10 ** (-(all_total - probs[3]) / 7), rel=1e-4)
    refused = run_groc("score", work / "tied", "-", "--format", "kenlm", "--json", input=text)
    assert refused.returncode == 2 and refused.stdout == b""
    assert refused.stderr.decode().count("\n") == 1 and "--format" in refused.stderr.decode()
    help_text = run_groc("score", "--help", check=True).stdout.decode()
    assert "--format" in help_text and "log10" in help_text


@pytest.mark.slow
def test_tokenize_reads_raw_text(work):
    r = run_groc("score", work / "groc", "-", "--tokenize", "--per-word", "--json", input=b"Anne's captain, here.\n", check=True)
    words = [w for w, _ in json.loads(r.stdout)["words"]]
    assert words[:1] == ["Anne"] and words[-4:] == [",", "here", ".", "<eos>"]


@pytest.mark.slow
def test_output_streams_and_head_ends_it_normally(work):
    """`yes | groc score RUN | head -1`: a line comes out before the input ends, and a closed
    stdout is a normal end (exit 0, nothing on stderr)."""
    proc = subprocess.Popen([sys.executable, "-m", "groc_cli", "score", str(work / "tied"), "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=run_env())
    proc.stdin.write(b"the captain was here\n")
    proc.stdin.flush()
    assert proc.stdout.readline().startswith(b"ln_prob")
    assert len(proc.stdout.readline().split(b"\t")) == 3  # scored while stdin is still open
    proc.stdout.close()  # the reader goes away, as head does
    proc.stdin.write(b"the captain was here\n" * 2000)
    proc.stdin.close()
    assert proc.wait(timeout=120) == 0
    assert proc.stderr.read() == b""
    many = work / "many.txt"
    many.write_text("the captain was here\n" * 3000)
    shell = subprocess.run(["bash", "-o", "pipefail", "-c", f"{sys.executable} -m groc_cli score {work / 'tied'} - < {many} "
                            "| head -1"], capture_output=True, env=run_env())
    assert shell.returncode == 0 and shell.stdout.decode().startswith("ln_prob"), shell.stderr


@pytest.mark.slow
@pytest.mark.parametrize("args, stdin, word", [
    (["-"], b"fine\n\xff\xfe\n", "line 2"),
    (["/no/such/file"], None, "no such file"),
    (["-", "--vocab", "closed"], b"a\n", "--vocab"),
    (["-", "--lower"], b"a\n", "--lower"),
    (["-", "--cache", "unbounded"], b"a\n", "--cache"),
    (["-", "--cache", "local", "--cache-weight", "2"], b"a\n", "--cache-weight"),
    (["-", "--cache", "local", "--theta", "-1"], b"a\n", "theta"),
])
def test_bad_input_is_one_line_and_exit_2(work, args, stdin, word):
    r = run_groc("score", work / "tied", *args, input=stdin or b"")
    err = r.stderr.decode().strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and word in err[0], err


@pytest.mark.slow
@pytest.mark.parametrize("flags, named, takes", [
    (["--cache", "none", "--theta", "0.5"], "--theta", "local"),
    (["--cache", "unigram", "--theta", "0.5"], "--theta", "local"),
    (["--cache-size", "100"], "--cache-size", "unigram, local"),
    (["--cache", "none", "--cache-weight", "0.2"], "--cache-weight", "unigram, local"),
])
def test_a_cache_setting_the_chosen_cache_does_not_take_is_refused(work, flags, named, takes):
    """As 'groc eval' refuses it (issue 30, class 6): score would print the same numbers without it."""
    r = run_groc("score", work / "tied", "-", *flags, input=b"a\n")
    err = r.stderr.decode().strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and not r.stdout, err
    assert err[0].startswith(f"groc: error: {named} is a setting of --cache {takes}") and "not of" in err[0], err


@pytest.mark.slow
def test_a_missing_run_is_one_line(work, tmp_path):
    r = run_groc("score", tmp_path / "nothing", "-", input=b"a\n")
    assert r.returncode == 2 and len(r.stderr.decode().strip().splitlines()) == 1


def test_import_groc_cli_does_not_import_torch():
    code = "import sys, groc_cli; from groc_cli import load_run; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


@pytest.mark.slow
def test_docs_api_examples_run(work, tmp_path, monkeypatch):
    """Every ```python block of docs/api.md, in order, in one namespace, against the tiny runs."""
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "api.md").read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 4
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "austen-groc").symlink_to(work / "groc")
    (tmp_path / "runs" / "austen-tied").symlink_to(work / "tied")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "docs/api.md", "exec"), namespace)


@pytest.mark.slow
def test_api_matches_the_command_line(work):
    from groc_cli import load_run

    run = load_run(work / "groc")
    text = (work / "text.txt").read_text(encoding="utf-8").splitlines()[:5]
    api = run.score(text, reset=False)
    _, table = rows(run_groc("score", work / "groc", work / "text.txt", "--one-stream", check=True).stdout)
    assert [s.log_prob for s in api] == pytest.approx([float(t[0]) for t in table[:5]], abs=1e-5)
    assert [s.tokens for s in api] == [int(t[1]) for t in table[:5]]
    # a new word's composed embedding is the same alone or among others
    one = run.embed_words(["zzqx"])
    two = run.embed_words(["captain", "zzqx"])
    assert one[0].tolist() == pytest.approx(two[1].tolist(), abs=1e-6)
    with pytest.raises(Exception, match="GroC"):
        load_run(work / "tied").embed_words(["a"])


@pytest.mark.slow
@pytest.mark.parametrize("run", ["tied", "groc"])
def test_weights_say_what_they_are_and_are_not_private(work, run):
    import hashlib
    import stat

    from groc_cli.run_storage import read_weights_metadata, read_vocab

    config = json.loads((work / run / "config.json").read_text())
    words, _ = read_vocab(work / run)
    umask = os.umask(0)
    os.umask(umask)
    for which in ("best", "last"):
        path = work / run / which / "model.safetensors"
        meta = read_weights_metadata(path)
        assert meta["format"] == "groc-weights" and meta["model"] == config["model"]
        assert meta["vocab_size"] == len(words)
        assert meta["vocab_sha256"] == hashlib.sha256("\n".join(words).encode()).hexdigest()
        # the same mode as the run's other outputs (config.json), not safetensors' private 0600
        assert stat.S_IMODE(path.stat().st_mode) == stat.S_IMODE((work / run / "config.json").stat().st_mode) == 0o666 & ~umask


@pytest.mark.slow
def test_new_words_leave_the_model_as_it_was(work):
    """Composing unseen words (score, log_probs, embed_words) never changes what the model
    gives for its own vocabulary, and a prefix with an unseen word is read by composition."""
    import torch

    from groc_cli import load_run

    run = load_run(work / "groc")
    before = run.log_probs("the captain")
    run.score(["zzqx blorf the captain"])
    run.embed_words(["qqqq", "the"])
    assert torch.equal(run.log_probs("the captain"), before)
    assert run.model.vocab == run.vocab
    unseen = run.log_probs("the zzqx")
    assert torch.isclose(unseen.exp().sum(), torch.tensor(1.0)) and not torch.equal(unseen, run.log_probs("the <unk>"))
    tied = load_run(work / "tied")
    assert torch.equal(tied.log_probs("the zzqx"), tied.log_probs("the <unk>"))


@pytest.mark.slow
def test_memory_is_bounded_by_settings_not_by_the_length_of_a_line(tmp_path):
    """One 5-million-character line built a tokens x vocabulary matrix (23.7 GB, the OOM killer). Here a
    500,000-character line and a vocabulary of every word of the three embedded novels (~21K): that matrix
    alone would be over 7 GB, and score's peak resident memory stays under 2.5 GB (measured by a parent of
    its own, so only this process counts; an address-space limit proved too sensitive to what else a
    process maps). docs/benchmarks.md measures the 5M-character line."""
    text = "\n".join(BOOKS.joinpath(name).read_text(encoding="utf-8") for name in
                     ("austen-emma.txt", "austen-persuasion.txt", "chesterton-thursday.txt"))
    (tmp_path / "books.txt").write_text(text, encoding="utf-8")
    run_groc("prepare", "--train", tmp_path / "books.txt", "--split", "250000,1000,1000", "-o", tmp_path / "data",
             check=True)
    run_groc("train", tmp_path / "data", "-o", tmp_path / "tied", "--output-layer", "tied", "--max-tokens", "200", *TINY,
             check=True)
    vocab = pq.read_table(tmp_path / "data" / "vocab.parquet").num_rows
    words = text.split()
    line = " ".join(words[: 500_000 // 6])
    (tmp_path / "long.txt").write_text(line + "\n", encoding="utf-8")
    tokens = len(line.split()) + 1
    assert tokens * vocab * 4 > 7e9  # the whole logit matrix alone

    probe = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], stderr=subprocess.PIPE); "
             "sys.stderr.buffer.write(r.stderr); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(r.returncode)")
    r = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "groc_cli", "score", str(tmp_path / "tied"),
                        str(tmp_path / "long.txt")], capture_output=True, env=run_env())
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    peak_kb = int(r.stderr.decode().strip().splitlines()[-1])
    assert peak_kb < 2_500_000, peak_kb
    header, table = rows(r.stdout)
    assert len(table) == 1 and int(table[0][header.index("tokens")]) == tokens
    assert math.isfinite(float(table[0][header.index("ln_prob")]))


@pytest.mark.slow
@pytest.mark.parametrize("run, vocab", [("tied", "union"), ("groc", "union"), ("groc", "model")])
def test_batched_scores_are_the_one_at_a_time_scores(work, run, vocab):
    """score() reads sentences side by side (issue 91 §4); each sentence's numbers stay those it gets
    alone (score_stream), lines of new words, an empty line and a long line included."""
    from groc_cli import load_run
    from groc_cli.api import BATCH_POSITIONS

    lines = work.joinpath("text.txt").read_text(encoding="utf-8").splitlines()
    lines += ["", "zzqx blorfish the zzqx", " ".join(["the"] * (BATCH_POSITIONS + 5))]
    loaded = load_run(work / run, vocab=vocab)
    batched, alone = loaded.score(lines), list(loaded.score_stream(lines))
    assert [s.tokens for s in batched] == [s.tokens for s in alone]
    for a, b in zip(batched, alone):
        assert [w for w, _ in a.word_log_probs] == [w for w, _ in b.word_log_probs]
        assert [lp for _, lp in a.word_log_probs] == pytest.approx([lp for _, lp in b.word_log_probs], abs=1e-5)


API_BAD = [
    ("load", {"path": None}, "path None"),
    ("load", {"path": 5}, "path must be a path"),
    ("load", {"vocab": ["a"]}, "vocab must be a str"),
    ("load", {"vocab": "open"}, "vocab 'open': expected one of"),
    ("load", {"checkpoint": 5}, "checkpoint must be a str"),
    ("load", {"checkpoint": "first"}, "checkpoint 'first'"),
    ("load", {"device": 0}, "device must be a str"),
    ("load", {"threads": 1.5}, "threads 1.5"),
    ("score", ([5],), "takes a list of str words"),
    ("score", (5,), "takes a list of sentences"),
    ("score", (None,), "takes a list of sentences"),
    ("score", (["a\x00b c"],), "NUL"),
    ("score", ([["a\x00b"]],), "each word must be"),
    ("score", ([["a b"]],), "each word must be"),
    ("score", ([[b"a"]],), "decode bytes first"),
    ("generate", {"seed": "1"}, "seed must be a whole number"),
    ("generate", {"seed": 1.5}, "seed must be a whole number"),
    ("generate", {"seed": True}, "seed must be a whole number"),
    ("generate", {"seed": 2**70}, "seed must be in [0, 18446744073709551615]"),
    ("generate", {"seed": -1}, "seed must be in"),
    ("generate", {"top_k": "3"}, "top_k must be a whole number"),
    ("generate", {"top_k": 2.5}, "top_k must be a whole number"),
    ("generate", {"max_tokens": "3"}, "max_tokens must be a whole number"),
    ("generate", {"max_tokens": 0}, "max_tokens must be"),
    ("generate", {"temperature": "1"}, "temperature must be a number"),
    ("generate", {"prompts": [5]}, "takes a list of str words"),
    ("generate", {"prompts": ["the\x00cat"]}, "NUL"),
    ("generate", {"bogus": 1}, "bogus"),
    ("stream", {"cache": "local", "knn": 8}, "knn is a setting of cache unbounded, not of local"),
    ("stream", {"theta": 0.7}, "theta is a setting of cache local, not of none"),
    ("stream", {"cache_weight": 0.3}, "cache_weight is a setting of cache"),
    ("stream", {"cache": "local", "theta": "x"}, "theta must be a number"),
    ("stream", {"cache": "local", "cache_weight": "x"}, "cache_weight must be a number"),
    ("stream", {"cache": 3}, "cache must be a str"),
    ("stream", {"reset": "no"}, "reset must be True or False"),
]


@pytest.mark.slow
@pytest.mark.parametrize("call, arguments, message", API_BAD, ids=[f"{c}-{m[:24]}" for c, _, m in API_BAD])
def test_the_api_refuses_wrong_types_and_ranges_with_a_setting_error(work, call, arguments, message):
    """Issue 91 §2: the API's arguments get the SettingError the command line gives, never a
    TypeError or a torch error; a cache's foreign setting is refused as on the command line."""
    from groc_cli import load_run
    from groc_cli.errors import SettingError

    with pytest.raises(SettingError) as caught:
        if call == "load":
            load_run(**{"path": work / "tied", **arguments})
        elif call == "score":
            load_run(work / "tied").score(*arguments)
        elif call == "generate":
            arguments = dict(arguments)
            load_run(work / "groc").generate(arguments.pop("prompts", "the"), **arguments)
        else:
            list(load_run(work / "tied").score_stream(["the cat"], **arguments))
    assert message in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.slow
@pytest.mark.parametrize("seed", ["-1", "99999999999999999999999"])
def test_a_seed_out_of_range_is_one_line(work, seed):
    r = run_groc("generate", work / "tied", "--seed", seed, "--max-tokens", "2")
    assert r.returncode == 2 and r.stdout == b""
    assert r.stderr.decode().strip() == f"groc: error: --seed must be in [0, 18446744073709551615], got {seed}"
