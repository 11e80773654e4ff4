"""groc compare: per-bin medians checked against hand-computed numbers on small per-token
files written with the real PerTokenWriter (no model runs), misaligned inputs and bad flags
refused with one line, Parquet and PNG outputs."""

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from groc_cli.artifacts.io import provenance, read_metadata
from groc_cli.cli import main
from groc_cli.errors import GrocError
from groc_cli.evaluation.compare import compare, make_bins, parse_bins
from groc_cli.evaluation.records import PerTokenWriter

WORDS = ["<eos>", "zyx", "rare", "mid", "common", "the"]
# Training counts as recorded by each run ("zyx" is unseen by A, seen 120 times by B).
COUNTS_A = {"<eos>": 9000, "rare": 3, "mid": 60, "common": 700, "the": 6000}
COUNTS_B = {"<eos>": 9000, "zyx": 120, "rare": 3, "mid": 60, "common": 700, "the": 6000}
# (word, loss A, loss B) at positions 1..11; losses are exact binary fractions.
TOKENS = [
    ("zyx", 5.0, 3.0), ("rare", 4.0, 3.0), ("rare", 4.0, 4.5), ("rare", 6.0, 3.0), ("mid", 2.0, 2.5),
    ("mid", 2.0, 1.5), ("common", 1.0, 1.25), ("the", 0.5, 0.25), ("the", 0.5, 0.75), ("the", 0.5, 1.5),
    ("zyx", 7.0, 3.0),
]
# Hand-computed from TOKENS, diff = loss B - loss A, binned by A's counts:
#   0: -2, -4 | 1-49: -1, +0.5, -3 | 50-99: +0.5, -0.5 | 500-999: +0.25 | ≥5000: -0.25, +0.25, +1
EXPECTED = {
    "0": dict(words=2, types=1, median_diff=-3.0, mean_diff=-3.0, ppl_a=math.exp(6.0), ppl_b=math.exp(3.0)),
    "1-49": dict(words=3, types=1, median_diff=-1.0, mean_diff=-3.5 / 3, ppl_a=math.exp(14 / 3), ppl_b=math.exp(3.5)),
    "50-99": dict(words=2, types=1, median_diff=0.0, mean_diff=0.0, ppl_a=math.exp(2.0), ppl_b=math.exp(2.0)),
    "100-499": dict(words=0, types=0, median_diff=None, mean_diff=None, ppl_a=None, ppl_b=None),
    "500-999": dict(words=1, types=1, median_diff=0.25, mean_diff=0.25, ppl_a=math.e, ppl_b=math.exp(1.25)),
    "1000-4999": dict(words=0, types=0, median_diff=None, mean_diff=None, ppl_a=None, ppl_b=None),
    "≥5000": dict(words=3, types=1, median_diff=0.25, mean_diff=1 / 3, ppl_a=math.exp(0.5), ppl_b=math.exp(2.5 / 3)),
}
OVERALL_MEDIAN = -0.25  # sorted diffs: -4 -3 -2 -1 -0.5 [-0.25] 0.25 0.25 0.5 0.5 1


def write_per_token(path, loss_index, counts, checksum="data-1", split="test", tokens=TOKENS, model_shift=0.0, run="runs/x"):
    """A per-token file as 'groc eval --per-token' writes it; model_logp = final_logp - model_shift."""
    meta = provenance("eval", run=run, dataset_checksum=checksum, model_checksum=f"model-{run}",
                      settings={"split": split, "vocab": "union", "cache": "none"})
    ids = np.array([WORDS.index(t[0]) for t in tokens])
    final = -np.array([t[loss_index] for t in tokens])
    with PerTokenWriter(path, WORDS, list(counts), list(counts.values()), meta) as writer:
        writer.write(np.arange(1, len(tokens) + 1), ids, final - model_shift, final)
    return path


@pytest.fixture
def pair(tmp_path):
    a = write_per_token(tmp_path / "a.parquet", 1, COUNTS_A, model_shift=1.0, run="runs/tied")
    b = write_per_token(tmp_path / "b.parquet", 2, COUNTS_B, run="runs/groc")
    return a, b


def assert_rows(rows, expected):
    assert [r["bin"] for r in rows] == list(expected)
    for row in rows:
        for key, want in expected[row["bin"]].items():
            got = row[key]
            assert (got is None) if want is None else got == pytest.approx(want), (row["bin"], key, got, want)


def test_default_bins_follow_figure_3_with_unseen_words_apart(pair):
    result = compare(*pair)
    assert_rows(result["bins"], EXPECTED)
    assert result["overall"]["words"] == len(TOKENS)
    assert result["overall"]["types"] == 5
    assert result["overall"]["median_diff"] == pytest.approx(OVERALL_MEDIAN)
    assert result["column"] == "final_logp" and result["freq_from"] == "a" and result["split"] == "test"


def test_model_column_and_frequencies_from_b(pair):
    # A's model_logp is 1 nat below its final_logp, so every model-column difference is 1 lower.
    model = compare(*pair, column="model")
    assert model["overall"]["median_diff"] == pytest.approx(OVERALL_MEDIAN - 1)
    assert model["bins"][0]["median_diff"] == pytest.approx(-4.0)
    # B saw "zyx" 120 times: its two tokens move from the unseen bin to 100-499.
    by_b = {r["bin"]: r for r in compare(*pair, freq_from="b")["bins"]}
    assert by_b["0"]["words"] == 0 and by_b["100-499"]["words"] == 2
    assert by_b["100-499"]["median_diff"] == pytest.approx(-3.0)


def test_custom_bins_and_labels(pair):
    assert parse_bins("1,50,100,500,1000,5000") == (1, 50, 100, 500, 1000, 5000)
    assert [b.label for b in make_bins((10, 100))] == ["0", "1-9", "10-99", "≥100"]
    assert [b.label for b in make_bins((1, 2))] == ["0", "1", "≥2"]
    rows = compare(*pair, edges=(1, 100))["bins"]
    assert [(r["bin"], r["words"]) for r in rows] == [("0", 2), ("1-99", 5), ("≥100", 4)]
    assert rows[1]["median_diff"] == pytest.approx(-0.5)  # -1, +0.5, -3, +0.5, -0.5


@pytest.mark.parametrize("text", ["", "0,10", "10,5", "5,5", "1,x", "1,,2", "-1"])
def test_bad_bins_are_refused(text):
    with pytest.raises(GrocError, match="^bins "):  # the setting; groc compare says --bins
        parse_bins(text)


def test_misaligned_files_are_refused(tmp_path, pair):
    a, _ = pair
    other_data = write_per_token(tmp_path / "d.parquet", 2, COUNTS_B, checksum="data-2")
    other_split = write_per_token(tmp_path / "s.parquet", 2, COUNTS_B, split="valid")
    shorter = write_per_token(tmp_path / "n.parquet", 2, COUNTS_B, tokens=TOKENS[:-1])
    swapped = write_per_token(tmp_path / "w.parquet", 2, COUNTS_B, tokens=[TOKENS[1], TOKENS[0]] + TOKENS[2:])
    for path, message in [(other_data, "different datasets"), (other_split, "different splits"),
                          (shorter, "11 and 10 rows"), (swapped, "word 'zyx' vs 'rare'")]:
        with pytest.raises(GrocError, match=message):
            compare(a, path)
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"position": [1], "word": ["x"], "train_freq": [0], "final_logp": [-1.0]}), plain)
    with pytest.raises(GrocError, match="no 'groc eval' provenance"):
        compare(a, plain)
    with pytest.raises(GrocError, match="not found"):
        compare(a, tmp_path / "missing.parquet")
    for path, what in [(tmp_path, "is a directory"), ("/dev/null", "is a character device")]:  # exist, but no file
        with pytest.raises(GrocError, match=f"^per-token file {path} {what}; give a file written by"):
            compare(a, path)


@pytest.mark.slow
def test_cli_refuses_misaligned_files_and_bad_bins_with_one_line(tmp_path, pair, groc):
    a, _ = pair
    other = write_per_token(tmp_path / "d.parquet", 2, COUNTS_B, checksum="data-2")
    for args in [(a, other), (*pair, "--bins", "50,10")]:
        r = groc("compare", *args)
        lines = r.stderr.decode().strip().splitlines()
        assert r.returncode == 2 and r.stdout == b""
        assert len(lines) == 1 and lines[0].startswith("groc: error:"), lines


@pytest.mark.slow
def test_cli_json_parquet_and_plot(tmp_path, pair, capsys):
    pytest.importorskip("matplotlib")
    out, png = tmp_path / "bins.parquet", tmp_path / "fig3.png"
    assert main(["compare", *map(str, pair), "-o", str(out), "--plot", str(png)]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert_rows(result["bins"], EXPECTED)
    assert result["names"] == ["tied", "groc"] and result["a"]["run"] == "runs/tied"
    assert "B is better" in captured.err and "≥5000" in captured.err
    table = pq.read_table(out).to_pylist()
    assert_rows(table, EXPECTED)
    meta = read_metadata(out)
    assert meta["stage"] == "compare" and meta["overall"]["median_diff"] == pytest.approx(OVERALL_MEDIAN)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Existing outputs are kept unless --force.
    assert main(["compare", *map(str, pair), "-o", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["compare", *map(str, pair), "-o", str(out), "--force", "--bins", "1,100"]) == 0
    assert pq.read_table(out).column("bin").to_pylist() == ["0", "1-99", "≥100"]


def test_words_lists_the_types_whose_summed_difference_is_largest_each_way(pair, capsys):
    """--words N: the N word types that cost B most over all their tokens, and the N it gains most on,
    hand-computed from TOKENS (sums of loss B - loss A: zyx -6, rare -3.5, mid 0, common +0.25, the +1)."""
    assert "words" not in compare(*pair)
    words = compare(*pair, words=2)["words"]
    assert words["total_diff"] == pytest.approx(-8.25)
    assert [(w["word"], w["tokens"], w["train_freq"]) for w in words["b_worse"]] == [("the", 3, 6000), ("common", 1, 700)]
    assert [w["sum_diff"] for w in words["b_worse"]] == pytest.approx([1.0, 0.25])
    assert words["b_worse"][0]["mean_diff"] == pytest.approx(1 / 3)
    assert [(w["word"], w["tokens"], w["train_freq"]) for w in words["b_better"]] == [("zyx", 2, 0), ("rare", 3, 3)]
    assert [w["sum_diff"] for w in words["b_better"]] == pytest.approx([-6.0, -3.5])
    # mid's tokens cancel (+0.5, -0.5): in neither list, however long
    many = compare(*pair, words=10)["words"]
    assert [w["word"] for w in many["b_worse"] + many["b_better"]] == ["the", "common", "zyx", "rare"]
    assert [w["train_freq"] for w in compare(*pair, words=1, freq_from="b")["words"]["b_better"]] == [120]

    assert main(["compare", *map(str, pair), "--words", "1"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["words"]["b_better"][0]["word"] == "zyx"
    assert "the words that make the difference" in captured.err and "groc better" in captured.err
    assert main(["compare", *map(str, pair), "--words", "-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("groc: error:") and "--words" in err[0]


def test_plot_without_matplotlib_names_the_extra(tmp_path, pair, capsys, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    assert main(["compare", *map(str, pair), "--plot", str(tmp_path / "f.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("groc: error:") and "[plots]" in err and not (tmp_path / "f.png").exists()


@pytest.mark.slow
def test_heatmap_and_curves_write_pngs(tmp_path):
    pytest.importorskip("matplotlib")
    from groc_cli.plots import curves, heatmap

    grid = [{"theta": t, "weight": w, "ppl": 100 - 10 * t + 30 * abs(w - 0.2)} for t in (0.1, 0.3, 0.5) for w in (0.1, 0.2, 0.4)]
    heatmap(grid, "theta", "weight", "ppl", tmp_path / "grid.png", title="local cache")
    curves({"train": [(1, 5.0), (2, 4.5), (3, 4.2)], "valid": [(1, 5.2), (2, 4.9), (3, 4.8)]}, tmp_path / "loss.png",
           "epoch", "loss (nats)", "finetuning")
    for name in ("grid.png", "loss.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary files left
