"""The environment record (groc_cli/environment.py) in every output that issue 31 names: a run's
config.json, an evaluation's JSON, a dump's meta.json and the quickstart's summary."""

import json

import pytest

from groc_cli.environment import FIELDS, describe, environment
from tests.conftest import REPO, run_groc


def check_record(record: dict, device: str = "cpu") -> None:
    assert sorted(record) == sorted(FIELDS)
    for name in ("groc", "python", "torch", "numpy", "pyarrow", "platform", "cpu"):
        assert isinstance(record[name], str) and record[name], name
    assert isinstance(record["cpu_flags"], list)
    assert isinstance(record["threads"], int) and record["threads"] >= 1
    assert record["device"] == device and (record["gpu"] is None) == (device == "cpu")


def test_the_record_holds_every_field():
    record = environment(threads=3)
    check_record(record)
    assert record["threads"] == 3 and record["wordnet"] is None
    assert json.loads(json.dumps(record)) == record
    assert "3 threads" in describe(record) and record["torch"] in describe(record)


def test_the_cpus_vector_extensions_are_read_from_cpuinfo(monkeypatch, tmp_path):
    from groc_cli import cpu

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n"
                       "flags\t\t: fpu sse4_2 avx avx2 fma\n\nprocessor\t: 1\nvendor_id\t: AuthenticAMD\n")
    real_open = open
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: real_open(cpuinfo if path == "/proc/cpuinfo" else path, *a, **k))
    cpu.cpuinfo.cache_clear()
    try:
        record, vendor = environment(), cpu.cpuinfo().vendor  # the vendor decides the CPU's matmul library
    finally:
        cpu.cpuinfo.cache_clear()
    assert record["cpu"] == "AMD EPYC 7B13" and record["cpu_flags"] == ["sse4_2", "avx", "avx2", "fma"]
    assert vendor == "AuthenticAMD"
    assert "AMD EPYC 7B13 (AVX2)" in describe(record)


def test_without_cpuinfo_the_record_names_platforms_processor_and_products_stay_torchs(monkeypatch):
    """macOS and Windows have no /proc/cpuinfo: no vendor, no flags, and auto keeps torch's products."""
    import platform

    from groc_cli import cpu
    from groc_cli.models import kernels

    real_open = open

    def no_cpuinfo(path, *a, **k):
        if path == "/proc/cpuinfo":
            raise FileNotFoundError(path)
        return real_open(path, *a, **k)

    monkeypatch.setattr("builtins.open", no_cpuinfo)
    monkeypatch.setattr(platform, "processor", lambda: "arm")
    monkeypatch.setattr(kernels.torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    cpu.cpuinfo.cache_clear()
    kernels._auto.cache_clear()
    try:
        info, record = cpu.cpuinfo(), environment()
    finally:
        cpu.cpuinfo.cache_clear()
        kernels._auto.cache_clear()
    assert info == cpu.CpuInfo("arm", "", frozenset())
    assert record["cpu"] == "arm" and record["cpu_flags"] == [] and record["cpu_matmul"] == "torch"
    assert "arm (no AVX2)" in describe(record)


@pytest.mark.slow
def test_runs_evaluations_and_dumps_record_their_environment(tmp_path, tiny_run):
    # tiny_run's dataset and lexicon (read-only), and a copy of its GroC run (eval records itself in it)
    data = tiny_run.data(REPO / "groc_cli" / "data" / "austen-persuasion.txt", "3000,500,500")
    (tmp_path / "data").symlink_to(data)
    (tmp_path / "lex.parquet").symlink_to(tiny_run.lexicon(data))
    tiny_run.copy(tiny_run("groc", data=data, max_tokens=48), tmp_path / "groc")
    config = json.loads((tmp_path / "groc" / "config.json").read_text())
    check_record(config["environment"])
    assert config["environment"]["wordnet"]  # the lexicon's WordNet version
    assert config["environment"]["threads"] == 1  # OMP_NUM_THREADS=1 in tests
    result = json.loads(run_groc("eval", tmp_path / "groc", tmp_path / "data", check=True).stdout)
    check_record(result["environment"])
    assert result["states_environment"] is None
    dumped = json.loads(run_groc("dump", tmp_path / "groc", tmp_path / "data", "--split", "test", "-o", tmp_path / "states",
                                 check=True).stdout)
    check_record(dumped["environment"])
    result = json.loads(run_groc("eval", tmp_path / "groc", tmp_path / "data", "--states", tmp_path / "states",
                                 check=True).stdout)
    assert result["states_environment"] == dumped["environment"]
    # a run's config.json still starts a new run (its environment is a record, not a setting)
    r = run_groc("train", tmp_path / "data", "-o", tmp_path / "again", "--config", tmp_path / "groc" / "config.json",
                 "--lexicon", tmp_path / "lex.parquet", check=True)
    assert r.returncode == 0
    run_groc("finetune", tmp_path / "groc", tmp_path / "data", "-o", tmp_path / "ft", "--max-tokens", "24",
             "--batch-size", "4", "--bptt", "12", "--eval-batch-size", "4", check=True)
    check_record(json.loads((tmp_path / "ft" / "config.json").read_text())["environment"])
