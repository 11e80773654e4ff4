"""Values that cannot be right, and memory or disk limits (issue 91, sections 2 and 3): a weights
file whose header declares another dtype, per-token tables with impossible values or column types,
a FAISS index trained on another model's states, JSON nested absurdly deep or with huge integers,
an allocation failure reported as damage. Each is one line on stderr naming the file (or the
setting), a non-zero exit and nothing half-written."""

import json
from pathlib import Path
import shutil
import struct

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import run_groc


@pytest.fixture(scope="module")
def built(tmp_path_factory, tiny_run):
    """ds: tiny_run.small_data() (linked here: read-only); run and other: copies of two tiny_run.small()
    runs on it (seeds 3 and 4; copies, as eval records itself in each); a.parquet and b.parquet: their
    per-token tables of the valid split."""
    root = tmp_path_factory.mktemp("untrusted")
    (root / "ds").symlink_to(tiny_run.small_data())
    for name, seed in (("run", 3), ("other", 4)):
        tiny_run.copy(tiny_run.small(seed=seed), root / name)
    for name, table in (("run", "a.parquet"), ("other", "b.parquet")):
        run_groc("eval", root / name, root / "ds", "--split", "valid", "--device", "cpu", "--per-token", root / table,
                 check=True)
    return root


@pytest.fixture
def work(built, tmp_path, monkeypatch):
    for name in ("ds", "run", "other"):
        shutil.copytree(built / name, tmp_path / name)
    for name in ("a.parquet", "b.parquet"):
        shutil.copyfile(built / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def listing(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def one_line(r, *names):
    err = r.stderr.decode()
    assert r.returncode != 0 and len(err.splitlines()) == 1 and err.startswith("groc: error: "), err
    assert "Traceback" not in err
    for name in names:
        assert str(name) in err, err
    return err


EVAL = ["eval", "run", "ds", "--split", "valid", "--device", "cpu"]


# -- weights -------------------------------------------------------------------------------------

def safetensors_header(path):
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + n]), data[8 + n:]


def write_safetensors(path, header, body):
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + body)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["I32", "U32"])
def test_weights_whose_header_declares_another_dtype(work, dtype):
    """Same bytes, read as another type of the same width: before, perplexity inf."""
    path = work / "run" / "best" / "model.safetensors"
    header, body = safetensors_header(path)
    name = next(k for k, v in header.items() if k != "__metadata__" and v["dtype"] == "F32")
    header[name]["dtype"] = dtype
    write_safetensors(path, header, body)
    err = one_line(run_groc(*EVAL), "run/best/model.safetensors")
    assert "dtype" in err and name in err and "re-train" in err


@pytest.mark.slow
def test_weights_whose_values_changed_after_writing(work):
    """A tensor's bytes edited in place (a careful forgery keeps every value finite): the checksum the
    file's metadata records no longer matches."""
    path = work / "run" / "best" / "model.safetensors"
    header, body = safetensors_header(path)
    name = next(k for k, v in header.items() if k != "__metadata__" and v["dtype"] == "F32")
    start = header[name]["data_offsets"][0]
    body = body[:start] + struct.pack("<f", 0.125) + body[start + 4:]
    write_safetensors(path, header, body)
    err = one_line(run_groc(*EVAL), "run/best/model.safetensors")
    assert "checksum" in err


@pytest.mark.slow
def test_weights_record_the_checksum_of_their_tensors(work):
    from safetensors.torch import load_file

    from groc_cli.run_storage import read_weights_metadata, tensors_checksum

    path = work / "run" / "best" / "model.safetensors"
    assert read_weights_metadata(path)["tensors_sha256"] == tensors_checksum(load_file(str(path)))


# -- per-token tables for compare ----------------------------------------------------------------

def rewrite_column(path, column, values, type=None):
    """Replace one column of a per-token table, keeping its provenance (a careful forgery)."""
    table = pq.read_table(path)
    array = pa.array(values, type=type)
    table = table.set_column(table.column_names.index(column), pa.field(column, array.type), array)
    pq.write_table(table.replace_schema_metadata(pq.read_schema(path).metadata), path)


def column_values(path, column):
    return pq.read_table(path, columns=[column]).column(column).to_numpy().copy()


@pytest.mark.slow
@pytest.mark.parametrize("column, value", [
    ("final_logp", float("nan")), ("final_logp", float("inf")), ("final_logp", float("-inf")), ("final_logp", 0.5),
    ("train_freq", -3), ("position", -1),
])
def test_compare_refuses_impossible_values(work, column, value):
    values = column_values(work / "b.parquet", column)
    values[7] = value
    rewrite_column(work / "b.parquet", column, values)
    err = one_line(run_groc("compare", "a.parquet", "b.parquet", "--freq-from", "b"), "b.parquet", repr(column))
    assert "row 7" in err


@pytest.mark.slow
def test_compare_refuses_a_missing_value(work):
    values = column_values(work / "a.parquet", "final_logp").tolist()
    values[3] = None
    rewrite_column(work / "a.parquet", "final_logp", values, pa.float64())
    one_line(run_groc("compare", "a.parquet", "b.parquet"), "a.parquet", "'final_logp'", "null")


@pytest.mark.slow
@pytest.mark.parametrize("column, values", [
    ("final_logp", lambda v: [str(x) for x in v]),
    ("train_freq", lambda v: [float(x) for x in v]),
    ("position", lambda v: [str(x) for x in v]),
    ("word", lambda v: list(range(len(v)))),
])
def test_compare_refuses_columns_of_the_wrong_type(work, column, values):
    rewrite_column(work / "a.parquet", column, values(column_values(work / "a.parquet", column).tolist()))
    one_line(run_groc("compare", "a.parquet", "b.parquet"), "a.parquet", repr(column))


@pytest.mark.slow
def test_compare_takes_narrower_types_as_the_records_keep_them(work):
    """float32 log-probabilities and int32 counts (docs/records' per-token tables) are the same kind."""
    rewrite_column(work / "a.parquet", "final_logp", column_values(work / "a.parquet", "final_logp"), pa.float32())
    rewrite_column(work / "a.parquet", "train_freq", column_values(work / "a.parquet", "train_freq"), pa.int32())
    r = run_groc("compare", "a.parquet", "b.parquet", "--json")
    assert r.returncode == 0, r.stderr.decode()


# -- JSON nested absurdly deep, or with huge integers ------------------------------------------------

DEEP = "[" * 100000 + "]" * 100000
HUGE = "1" + "0" * 5000


@pytest.mark.slow
@pytest.mark.parametrize("text", [DEEP, '{"format": "groc-run", "model": ' + DEEP + "}", '{"seed": ' + HUGE + "}",
                                  '{"epochs": 1e999}'])
def test_a_run_config_with_absurd_json(work, text):
    (work / "run" / "config.json").write_text(text)
    err = one_line(run_groc(*EVAL), "run/config.json")
    assert "RecursionError" not in err and "set_int_max_str_digits" not in err


@pytest.mark.slow
@pytest.mark.parametrize("name", ["config.json", "summary.json"])
@pytest.mark.parametrize("text", [DEEP, '{"epochs": ' + HUGE + "}"])
def test_groc_runs_reports_the_bad_run_and_lists_the_others(work, name, text):
    (work / "other" / name).write_text(text)
    r = run_groc("runs", ".", "--json")
    assert r.returncode == 0 and "Traceback" not in r.stderr.decode(), r.stderr.decode()
    rows = {Path(row["run"]).name: row for row in json.loads(r.stdout)} if r.stdout.startswith(b"[") else {
        Path(row["run"]).name: row for row in map(json.loads, r.stdout.decode().splitlines())}
    assert rows["run"]["status"] == "done"
    assert rows["other"]["status"].startswith("damaged"), rows["other"]


@pytest.mark.slow
@pytest.mark.parametrize("text", [DEEP, '{"stage": "eval", "n": ' + HUGE + "}"])
def test_compare_of_a_table_whose_metadata_is_absurd_json(work, text):
    table = pq.read_table(work / "a.parquet")
    pq.write_table(table.replace_schema_metadata({b"groc": text.encode()}), work / "a.parquet")
    err = one_line(run_groc("compare", "a.parquet", "b.parquet"), "a.parquet")
    assert "not a Parquet file" not in err and "provenance" in err


@pytest.mark.slow
@pytest.mark.parametrize("suffix, text", [(".json", DEEP), (".toml", "a = " + "[" * 100000 + "]" * 100000),
                                          (".json", '{"emb": ' + HUGE + "}")])
def test_a_config_file_with_absurd_nesting_or_numbers(work, suffix, text):
    (work / f"c{suffix}").write_text(text)
    one_line(run_groc("train", "ds", "-o", "new", "--config", f"c{suffix}", "--max-tokens", "50", "--device", "cpu"),
             f"--config c{suffix}")
    assert not (work / "new").exists()


@pytest.mark.slow
def test_a_binary_config_file_names_the_file_and_the_flag(work):
    (work / "c.json").write_bytes(bytes(range(256)) * 4)
    err = one_line(run_groc("train", "ds", "-o", "new", "--config", "c.json", "--max-tokens", "50", "--device", "cpu"),
                   "--config c.json")
    assert "UTF-8" in err and not (work / "new").exists()


# -- memory, disk, threads, figures ----------------------------------------------------------------

@pytest.mark.slow
def test_an_allocation_failing_while_reading_a_healthy_file_is_not_damage(work, capsys, monkeypatch):
    """pyarrow's ArrowMemoryError is an ArrowException too: a memory limit met while reading a run's
    vocabulary called it damaged and advised re-training with --force."""
    from groc_cli import cli

    real = pq.ParquetFile.read

    def refused(self, *args, **kwargs):
        if "vocab.parquet" in str(getattr(self, "_groc_path", "")) or kwargs.get("columns") == ["word", "count"]:
            raise pa.ArrowMemoryError("malloc of size 1048576 failed")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read", refused)
    assert cli.main(EVAL) == 1
    err = capsys.readouterr().err
    assert err.startswith("groc: error: out of memory") and len(err.splitlines()) == 1, err
    assert "damaged" not in err and "re-train" not in err and "--force" not in err and "vocab.parquet" in err


@pytest.mark.parametrize("exc", [MemoryError(), RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: "
                                                             "can't allocate memory: you tried to allocate 8 bytes"),
                                 RuntimeError("std::bad_alloc"), ImportError("libtorch_cpu.so: failed to map segment "
                                                                            "from shared object")])
def test_damage_raised_while_an_allocation_failed_is_out_of_memory(exc):
    from groc_cli.errors import DamagedInput, OutOfMemory, out_of_memory

    try:
        try:
            raise exc
        except Exception:
            raise DamagedInput("run/vocab.parquet", "is damaged (malloc failed)", "re-train the run") from None
    except Exception as raised:
        assert isinstance(raised, OutOfMemory) and not isinstance(raised, DamagedInput)
        assert "run/vocab.parquet" in str(raised) and "damaged" not in str(raised)
    assert out_of_memory(exc)
    assert isinstance(DamagedInput("f", "is truncated", "rebuild it"), DamagedInput)  # outside a handler: damage


def test_a_full_disk_message_says_what_is_true():
    from groc_cli.artifacts.diskfull import DiskFull

    assert "more than 0 bytes" not in str(DiskFull("out.parquet", 0, free=0))
    assert "before its first bytes" in str(DiskFull("out.parquet", 0, free=0))
    assert "needs 5,000 bytes" in str(DiskFull("st/hidden.npy", 5000, free=10, exact=True))
    assert "more than the 4,096 bytes written" in str(DiskFull("out.parquet", 4096, free=0))


def test_a_full_disk_outside_an_output_names_the_path_and_the_free_bytes():
    import errno

    from groc_cli.cli import _disk_full

    line = _disk_full(OSError(errno.ENOSPC, "No space left on device", "/tmp/x/out.json"))
    assert line.startswith("groc: error: no space left") and "/tmp/x/out.json" in line and "bytes free" in line


@pytest.mark.slow
@pytest.mark.parametrize("value", ["abc", "0", "-1", "2,", "1.5"])
def test_a_malformed_omp_num_threads_is_groc_s_own_line(work, value):
    r = run_groc(*EVAL, env={"OMP_NUM_THREADS": value})
    err = one_line(r, "OMP_NUM_THREADS")
    assert "libgomp" not in err and r.returncode == 2 and not r.stdout


@pytest.mark.slow
def test_an_empty_omp_num_threads_is_unset_without_libgomp_s_complaint(work):
    r = run_groc(*EVAL, env={"OMP_NUM_THREADS": ""})
    assert r.returncode == 0 and "libgomp" not in r.stderr.decode(), r.stderr.decode()


@pytest.mark.slow
@pytest.mark.parametrize("name, magic", [("f.jpg", b"\xff\xd8"), ("f.pdf", b"%PDF"), ("f.svg", b"<?xml"),
                                         ("f.png", b"\x89PNG")])
def test_figures_are_written_in_the_format_their_name_says(work, name, magic):
    pytest.importorskip("matplotlib")
    r = run_groc("compare", "a.parquet", "b.parquet", "--plot", name)
    assert r.returncode == 0, r.stderr.decode()
    assert (work / name).read_bytes().startswith(magic)
    r = run_groc("plot", "run", "-o", "curve-" + name)
    assert r.returncode == 0, r.stderr.decode()
    assert (work / ("curve-" + name)).read_bytes().startswith(magic)


@pytest.mark.slow
def test_a_figure_name_of_another_format_is_refused(work):
    one_line(run_groc("compare", "a.parquet", "b.parquet", "--plot", "f.gif"), "f.gif", ".png")
    one_line(run_groc("plot", "run", "-o", "f.docx"), "f.docx", ".png")
    assert not (work / "f.gif").exists() and not (work / "f.docx").exists()
