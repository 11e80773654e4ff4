"""The reproduction report is a report (GUIDE 17): its built tables and figures are what the committed records
make (recipes/lib/build_report.py), so text and data cannot drift; it, the benchmarks page and the changelog
keep the sizes a reader can take in; the records stay small enough to travel with the tree."""

import json
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

from tests.conftest import REPO

BUILD = REPO / "recipes" / "lib" / "build_report.py"


def build(*args):
    return subprocess.run([sys.executable, str(BUILD), *map(str, args)], capture_output=True, text=True)


@pytest.mark.slow
def test_the_committed_tables_and_figures_are_what_the_committed_records_build():
    r = build("--check")
    assert r.returncode == 0, r.stderr
    text = (REPO / "docs" / "reproduction.md").read_text()
    blocks = re.findall(r"<!-- built:([a-z0-9-]+) -->", text)
    assert {"table2-cpu", "figure3-cpu", "ranks-cpu", "table2-paper", "converge", "converge-bins"} <= set(blocks)
    for figure in re.findall(r"\]\((figures/[^)]+\.png)\)", text):
        assert (REPO / "docs" / figure).is_file(), figure


@pytest.mark.slow
def test_a_record_that_changes_is_caught(tmp_path):
    records, docs = tmp_path / "records", tmp_path / "docs"
    shutil.copytree(REPO / "docs" / "records", records)
    docs.mkdir()
    shutil.copy(REPO / "docs" / "reproduction.md", docs)
    shutil.copytree(REPO / "docs" / "figures", docs / "figures")
    assert build("--check", "--records", records, "--docs", docs).returncode == 0
    test = records / "table2-cpu" / "ptb-tied" / "test.json"
    record = json.loads(test.read_text())
    record["perplexity"] = 93.0
    test.write_text(json.dumps(record))
    r = build("--check", "--records", records, "--docs", docs)
    assert r.returncode == 1 and "the block 'table2-cpu' is not what the records build" in r.stderr, r.stderr
    assert build("--records", records, "--docs", docs).returncode == 0  # rebuilt from the record ...
    assert "| **93.00** |" in (docs / "reproduction.md").read_text()
    assert build("--check", "--records", records, "--docs", docs).returncode == 0  # ... and in agreement again


def test_the_report_the_benchmarks_and_the_changelog_keep_their_size():
    report = (REPO / "docs" / "reproduction.md").read_text()
    assert len(report.splitlines()) <= 600
    assert not re.search(r"session|utc|lease|lost with", report, re.I)  # results, not their history
    assert len((REPO / "docs" / "benchmarks.md").read_text().splitlines()) <= 350
    changelog = (REPO / "CHANGELOG.md").read_text()
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert f"## {version}" in changelog
    entries = [line for line in changelog.splitlines() if line.startswith("- ")]
    assert entries and all(len(e) <= 200 for e in entries), max(entries, key=len)


def test_the_records_travel_with_the_tree():
    size = sum(p.stat().st_size for p in (REPO / "docs" / "records").rglob("*") if p.is_file())
    assert size < 10 * 2**20, size
