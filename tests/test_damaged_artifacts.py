"""Damaged artifacts (issue 14): a truncated, foreign or inconsistent dataset, states or run
file is refused before any work with one line on stderr that names the file and the stage
that writes it again, exit status 2, and nothing written."""

import hashlib
import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import TINY, run_groc

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, tiny_run):
    """ds: tiny_run.small_data(), a small dataset at --min-count 2 (so the run trains <unk> and eval has
    no warning to give); ds-min1: the same text at --min-count 1 (same types, another checksum); run:
    tiny_run.small(), a tiny tied run on ds (tiny_run's, linked here: read-only); st: its dumped valid
    states."""
    root = tmp_path_factory.mktemp("pristine")
    for name, path in (("ds", tiny_run.small_data()), ("ds-min1", tiny_run.small_data(min_count=1)),
                       ("run", tiny_run.small())):
        (root / name).symlink_to(path)
    run_groc("dump", root / "run", root / "ds", "--split", "valid", "-o", root / "st", "--device", "cpu", check=True)
    return root


@pytest.fixture
def work(pristine, tmp_path, monkeypatch):
    """A private copy of the pristine artifacts, as the working directory (paths in messages are relative)."""
    for name in ("ds", "ds-min1", "run", "st"):
        shutil.copytree(pristine / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def snapshot(root):
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
            for p in sorted(root.rglob("*"))}


def refused(work, args, file, stage):
    """Run groc in `work`; it must fail with status 2 and one stderr line naming `file` and `stage`,
    print nothing on stdout, and leave every file under `work` as it was."""
    before = snapshot(work)
    r = run_groc(*args, cwd=work)
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("groc: error: "), err
    assert str(file) in err and stage in err, err
    assert not r.stdout
    assert snapshot(work) == before
    return err


EVAL = ["eval", "run", "ds", "--split", "valid", "--device", "cpu", "--per-token", "out.parquet"]


def rewrite_parquet(path, column, change):
    """Replace one column of a groc Parquet file, keeping its provenance (a careful forgery)."""
    table = pq.read_table(path)
    values = table.column(column).to_numpy(zero_copy_only=False).copy()
    change(values)
    table = table.set_column(table.column_names.index(column), column, pa.array(values, type=table.schema.field(column).type))
    pq.write_table(table, path)


def edit_json(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def without_integrity(states, *names):
    """meta.json of ``states`` without the integrity record of arrays ``names`` (all: none given), as a
    dump written before the record (or a careful forgery), so the checks behind it are reached."""
    edit_json(states / "meta.json", lambda m: [spec.pop("integrity", None) for name, spec in m["files"].items()
                                               if not names or name in names])


# -- dataset directories -----------------------------------------------------------------------

def test_truncated_split(work):
    path = work / "ds" / "valid.parquet"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    refused(work, EVAL, "ds/valid.parquet", "groc prepare")


@pytest.mark.parametrize("target", ["valid.parquet", "vocab.parquet"])
def test_foreign_parquet_in_place_of_a_dataset_file(work, target):
    shutil.copyfile(work / "run" / "metrics.parquet", work / "ds" / target)  # valid Parquet, another schema
    refused(work, EVAL, f"ds/{target}", "groc prepare")


def test_vocabulary_of_another_preparation(work):
    # Same types, same schema, but another training vocabulary: only its recorded checksum tells.
    shutil.copyfile(work / "ds-min1" / "vocab.parquet", work / "ds" / "vocab.parquet")
    assert "another dataset" in refused(work, EVAL, "ds/vocab.parquet", "groc prepare")


@pytest.mark.parametrize("content", [None, "{not json", "[1, 2]"])
def test_missing_or_non_json_manifest(work, content):
    path = work / "ds" / "manifest.json"
    if content is None:
        path.unlink()
    else:
        path.write_text(content)
    refused(work, EVAL, "ds/manifest.json", "groc prepare")


@pytest.mark.parametrize("change, file", [
    (lambda m: m["splits"]["valid"].update(tokens=m["splits"]["valid"]["tokens"] + 7), "ds/valid.parquet"),
    (lambda m: m.update(types_total=m["types_total"] - 5), "ds/vocab.parquet"),
    (lambda m: m.update(vocab_size=m["vocab_size"] - 5), "ds/vocab.parquet"),
], ids=["split-tokens", "types-total", "vocab-size"])
def test_manifest_sizes_that_disagree_with_the_files(work, change, file):
    edit_json(work / "ds" / "manifest.json", change)
    assert "manifest.json" in refused(work, EVAL, file, "groc prepare")


def test_token_ids_beyond_the_vocabulary(work):
    types = json.loads((work / "ds" / "manifest.json").read_text())["types_total"]

    def beyond(ids):
        ids[5] = types + 10

    rewrite_parquet(work / "ds" / "valid.parquet", "id", beyond)
    refused(work, EVAL, "ds/valid.parquet", "groc prepare")


def _other_id(ids):
    ids[5] = (int(ids[5]) + 1) % 3  # in range, same length: only reading the split shows it


@pytest.mark.parametrize("args", [
    EVAL,
    ["dump", "run", "ds", "--split", "valid", "-o", "st2", "--device", "cpu"],
    ["train", "ds", "-o", "run2", *TINY],
    ["finetune", "run", "ds", "-o", "run2"],
], ids=["eval", "dump", "train", "finetune"])
def test_verify_reads_every_split(work, args):
    rewrite_parquet(work / "ds" / "valid.parquet", "id", _other_id)
    assert "--verify" in refused(work, [*args, "--verify"], "ds/valid.parquet", "groc prepare")


def test_verify_checks_the_words_against_the_manifest_checksum(work):
    def rename(words):
        words[7] = words[7] + "x"

    rewrite_parquet(work / "ds" / "vocab.parquet", "word", rename)
    refused(work, [*EVAL, "--verify"], "ds/vocab.parquet", "groc prepare")


# -- states directories ------------------------------------------------------------------------

EVAL_STATES = ["eval", "run", "ds", "--states", "st", "--cache", "local", "--device", "cpu", "--per-token", "out.parquet"]


@pytest.mark.parametrize("name", ["hidden", "targets", "logp"])
def test_truncated_states_array(work, name):
    path = work / "st" / f"{name}.npy"
    path.write_bytes(path.read_bytes()[: path.stat().st_size - 64])
    refused(work, EVAL_STATES, f"st/{name}.npy", "groc dump")


def test_states_arrays_whose_lengths_disagree(work):
    # logp.npy shortened and its own record in meta.json edited to match: only the other arrays disagree.
    np.save(work / "st" / "logp.npy", np.load(work / "st" / "logp.npy")[:-5])
    edit_json(work / "st" / "meta.json", lambda m: m["files"]["logp"].update(shape=[m["predictions"] - 5]))
    without_integrity(work / "st", "logp")
    refused(work, EVAL_STATES, "st/logp.npy", "groc dump")


def test_missing_states_meta(work):
    (work / "st" / "meta.json").unlink()
    refused(work, EVAL_STATES, "st/meta.json", "groc dump")


# -- run directories ---------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["train", "ds"], ["finetune", "run", "ds"]], ids=["train", "finetune"])
def test_truncated_trainer_state_on_resume(work, command):
    # finetune --resume continues a finetuned run; the tiny run stands in for one (its last/ is what is read).
    path = work / "run" / "last" / "trainer.pt"
    path.write_bytes(path.read_bytes()[:1000])
    refused(work, [*command, "-o", "run", "--resume"], "run/last/trainer.pt", "--checkpoint best")


@pytest.mark.parametrize("setting, value", [("emb", 10), ("hidden", 12), ("output", "lookup")])
def test_config_that_no_longer_matches_the_weights(work, setting, value):
    edit_json(work / "run" / "config.json", lambda c: c["model"].update({setting: value}))
    refused(work, EVAL, "run/config.json", "groc train")


def test_missing_run_vocabulary(work):
    (work / "run" / "vocab.parquet").unlink()
    refused(work, ["dump", "run", "ds", "--split", "valid", "-o", "st2", "--device", "cpu"], "run/vocab.parquet",
            "groc train")


@pytest.mark.parametrize("damage", ["truncated", "missing", "foreign"])
def test_damaged_lexicon_copy_of_a_groc_run(pristine, tiny_run, tmp_path, monkeypatch, damage):
    """A GroC run keeps a copy of its lexicon table: damaged or gone, it is named (never a traceback,
    never a model silently built without relations and definitions)."""
    tiny_run.copy(pristine / "ds", tmp_path / "ds")
    tiny_run.copy(tiny_run.small("groc"), tmp_path / "groc-run")
    monkeypatch.chdir(tmp_path)
    lexicon = tmp_path / "groc-run" / "lexicon.parquet"
    if damage == "truncated":
        lexicon.write_bytes(lexicon.read_bytes()[:200])
    elif damage == "missing":
        lexicon.unlink()
    else:
        shutil.copyfile(tmp_path / "groc-run" / "vocab.parquet", lexicon)
    refused(tmp_path, ["eval", "groc-run", "ds", "--split", "valid"], "groc-run/lexicon.parquet", "groc lexicon")
