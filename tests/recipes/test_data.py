"""recipes/data-crossdomain.sh on small stand-ins for the paper's downloads (real text from
../shared/data under the WMT 2014 / WikiText-103 file names, budgets of a few thousand tokens)."""

import gzip
import json
import os
import shutil
import sys
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from groc_cli.text.dataset import open_dataset
from groc_cli.text.tokenizer import TokenizeOptions, tokenize_line

from tests.conftest import REPO, run_env

SCRIPT = REPO / "recipes" / "data-crossdomain.sh"
BUDGETS = {"train": 5000, "valid": 2000, "test": 5000}
# One of the five News Crawl years (the same code path; every year's file name is checked by
# test_missing_inputs_fail_before_any_work), to keep the test short.
DOMAINS = ["news2007", "web", "wiki"]
EXPECTED = [
    *(f"news.{year}.en.shuffled" for year in range(2007, 2012)),
    "commoncrawl.de-en.en",
    *(f"wikitext-103-raw/wiki.{split}.raw" for split in ("train", "valid", "test")),
]


def run_script(src: Path, out: Path, domains=DOMAINS, **env):
    # The script puts ../.venv/bin on PATH itself; the running interpreter's bin holds groc here.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(
        ["bash", str(SCRIPT)], capture_output=True, text=True,
        env=run_env({"PATH": path, "SRC": str(src), "OUT": str(out),
                     "TRAIN": "5K", "VALID": "2K", "TEST": "5K", "JOBS": "1", "DOMAINS": " ".join(domains), **env}),
    )


def make_src(data_dir: Path, src: Path) -> None:
    """Real text under the expected names: Reuters newswire for the News Crawl years, webtext
    (its UTF-8 files) for Common Crawl, pieces of the WikiText raw test set for WikiText-103."""
    reuters = (data_dir / "reuters" / "reuters.training.txt").read_text().splitlines(keepends=True)
    for i, year in enumerate(range(2007, 2012)):
        (src / f"news.{year}.en.shuffled").write_text("".join(reuters[600 * i : 600 * (i + 1)]))
    web = "".join((data_dir / "webtext" / name).read_text() for name in ("grail.txt", "singles.txt"))
    (src / "commoncrawl.de-en.en").write_text(web)
    wiki = (data_dir / "wikitext-2-raw" / "wiki.test.raw").read_text().splitlines(keepends=True)
    (src / "wikitext-103-raw").mkdir()
    for split, lines in (("train", wiki[:1500]), ("valid", wiki[1500:2500]), ("test", wiki[2500:4000])):
        (src / "wikitext-103-raw" / f"wiki.{split}.raw").write_text("".join(lines))


def lines_of(ds, split: str) -> list[list[str]]:
    """A split's token stream back as lines (it ends every line with <eos>)."""
    lines, line = [], []
    for i in ds.ids(split):
        word = ds.words[i]
        if word == "<eos>":
            lines.append(line)
            line = []
        else:
            line.append(word)
    assert not line
    return lines


def tokenized(path: Path, n: int) -> list[list[str]]:
    options = TokenizeOptions(lower=True)
    with open(path, encoding="utf-8") as handle:
        return [tokenize_line(next(handle), options).split() for _ in range(n)]


@pytest.fixture(scope="module")
def built(data_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("crossdomain")
    src, out = tmp / "src", tmp / "out"
    src.mkdir()
    make_src(data_dir, src)
    first = run_script(src, out)
    assert first.returncode == 0, first.stderr
    return src, out, first


def test_missing_inputs_fail_before_any_work(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_script(empty, tmp_path / "out", domains=())  # empty DOMAINS: the default, all seven
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == len(EXPECTED)  # one line per missing file, naming it and its source
    for line, name in zip(lines, EXPECTED):
        assert f"missing {empty / name} (" in line
        assert ("statmt.org/wmt14" in line) if "wiki" not in name else ("Salesforce" in line)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_one_missing_file_is_one_line(built, tmp_path):
    src, _, _ = built
    partial = tmp_path / "src"
    shutil.copytree(src, partial)
    (partial / "news.2009.en.shuffled").unlink()
    result = run_script(partial, tmp_path / "out", domains=())
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert str(partial / "news.2009.en.shuffled") in result.stderr
    assert not (tmp_path / "out").exists()
    # as WMT serves it: gzipped, which this recipe (awk on the text) does not read
    (partial / "news.2009.en.shuffled.gz").write_bytes(gzip.compress((src / "news.2009.en.shuffled").read_bytes()))
    result = run_script(partial, tmp_path / "out", domains=())
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "news.2009.en.shuffled.gz is there: gunzip -k it" in result.stderr


@pytest.mark.slow
def test_budgets_cut_at_line_ends(built):
    _, out, _ = built
    for domain in DOMAINS:
        ds = open_dataset(out / domain)
        assert set(ds.manifest["splits"]) == set(BUDGETS)
        for split, budget in BUDGETS.items():
            tokens = ds.manifest["splits"][split]["tokens"]
            longest = max(len(line) + 1 for line in lines_of(ds, split))
            # split_by_budget: whole lines until the budget is reached, so the line that reached
            # it is the only one past the budget.
            assert tokens - longest < budget <= tokens, (domain, split, tokens)


@pytest.mark.slow
def test_splits_come_from_where_the_paper_says(built):
    src, out, _ = built
    # News Crawl: consecutive train, valid, test from the start of the year's file, in order.
    for domain in ("news2007",):
        ds = open_dataset(out / domain)
        got = [line for split in ("train", "valid", "test") for line in lines_of(ds, split)]
        assert got == tokenized(src / f"news.{domain[4:]}.en.shuffled", len(got))
    # Common Crawl: the same consecutive splits, then each one's lines re-shuffled.
    ds = open_dataset(out / "web")
    splits = [lines_of(ds, split) for split in ("train", "valid", "test")]
    source = tokenized(src / "commoncrawl.de-en.en", sum(map(len, splits)))
    start = 0
    for lines in splits:
        expected = source[start : start + len(lines)]
        assert sorted(lines) == sorted(expected) and lines != expected
        start += len(lines)
    # WikiText-103: the first tokens of wiki.train/valid/test.raw respectively.
    ds = open_dataset(out / "wiki")
    for split in ("train", "valid", "test"):
        lines = lines_of(ds, split)
        assert lines == tokenized(src / "wikitext-103-raw" / f"wiki.{split}.raw", len(lines))


@pytest.mark.slow
def test_lexicon_covers_every_domain(built):
    _, out, _ = built
    words = set(pq.read_table(out / "lexicon.parquet", columns=["word"]).column("word").to_pylist())
    for domain in DOMAINS:
        assert set(open_dataset(out / domain).words) <= words, domain


@pytest.mark.slow
def test_second_run_skips_everything(built):
    src, out, first = built
    log = out / "commands.log"
    before = log.read_text().splitlines()
    assert before[0].startswith("# ") and len([l for l in before if l.startswith("+ ")]) >= len(DOMAINS) + 1
    manifests = {d: (out / d / "manifest.json").read_text() for d in DOMAINS}
    lexicon_mtime = (out / "lexicon.parquet").stat().st_mtime_ns
    again = run_script(src, out)
    assert again.returncode == 0, again.stderr
    after = log.read_text().splitlines()
    assert after[: len(before)] == before and len(after) == len(before) + 1 and after[-1].startswith("# ")
    assert again.stderr.count("(done)") == len(DOMAINS) + 1
    assert {d: (out / d / "manifest.json").read_text() for d in DOMAINS} == manifests
    assert (out / "lexicon.parquet").stat().st_mtime_ns == lexicon_mtime
    assert not list(out.glob(".tmp-*"))
    assert json.loads(manifests["news2007"])["arguments"]["split"] == "5K,2K,5K"
