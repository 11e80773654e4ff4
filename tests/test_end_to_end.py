"""The real CLI chain on a slice of real data: tokenize | prepare, then lexicon."""

import json
import subprocess
import sys

import pytest

from groc_cli.text.dataset import open_dataset

pytestmark = pytest.mark.slow


def test_tokenize_pipes_into_prepare_then_lexicon(data_dir, tmp_path):
    raw = data_dir / "reuters" / "reuters.test.txt"
    ds = tmp_path / "reuters"
    groc = f"{sys.executable} -m groc_cli"
    pipeline = f"head -n 3000 {raw} | {groc} tokenize --lower -j 2 | {groc} prepare --train - --split 30K,rest -o {ds} --json"
    result = subprocess.run(["bash", "-o", "pipefail", "-c", pipeline], capture_output=True, check=True)
    manifest = json.loads(result.stdout)
    assert manifest["splits"]["train"]["tokens"] >= 30_000 and manifest["splits"]["valid"]["tokens"] > 0
    dataset = open_dataset(ds)
    assert "reuters" in dataset.vocab and all(w == w.lower() for w in dataset.vocab)
    lex = tmp_path / "lex.parquet"
    out = subprocess.run([sys.executable, "-m", "groc_cli", "lexicon", "--vocab", str(ds), "-o", str(lex), "--json"],
                         capture_output=True, check=True)
    report = json.loads(out.stdout)
    assert report["vocab_size"] == dataset.vocab_size and report["definition_coverage"] > 0.5
