"""Crafted or oversized values (issue 30, class 7): a size a config file makes absurd, a memory
limit (RLIMIT_AS, as `ulimit -v`) met while building or training, a trainer.pt that is truncated
or whose fields have other types. Each is one line on stderr naming the file or setting, a
non-zero exit, no traceback and no run directory left behind."""

import resource
import shutil

import pytest
import torch

from tests.conftest import REPO, run_groc

TINY = ["--emb", "8", "--hidden", "8", "--batch-size", "4", "--bptt", "12", "--device", "cpu", "--seed", "3"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("crafted")
    run_groc("prepare", "--train", REPO / "groc_cli" / "data" / "austen-persuasion.txt", "--split", "3000,800",
             "--min-count", "2", "-o", root / "ds", check=True)
    run_groc("train", root / "ds", "-o", root / "run", "--max-tokens", "100", *TINY, check=True)
    return root


@pytest.fixture
def work(trained, tmp_path):
    for name in ("ds", "run"):
        shutil.copytree(trained / name, tmp_path / name)
    return tmp_path


def one_line(r):
    err = r.stderr.decode()
    assert r.returncode != 0 and len(err.splitlines()) == 1 and err.startswith("groc: error: "), err
    assert "Traceback" not in err
    return err


def test_an_absurd_size_from_a_config_file(work):
    (work / "big.toml").write_text("emb = 100000000000000000\n")
    err = one_line(run_groc("train", "ds", "-o", "new", "--config", "big.toml", "--max-tokens", "50", "--device", "cpu",
                            cwd=work))
    assert "--emb 100000000000000000" in err and "smaller" in err
    assert not (work / "new").exists()


def test_a_memory_limit_met_while_building_the_model(work):
    """RLIMIT_AS of 2 GiB (imports fit) and an LSTM of 20,000 units (6.4 GB of weights)."""
    limit = 2 << 30

    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "groc_cli", "train", "ds", "-o", "new", "--max-tokens", "50", "--emb", "8",
                        "--hidden", "20000", "--batch-size", "4", "--bptt", "12", "--device", "cpu"],
                       cwd=work, capture_output=True, preexec_fn=limited)
    err = one_line(r)
    assert "--hidden" in err or "hidden 20000" in err
    assert not (work / "new").exists()


def test_out_of_memory_anywhere_is_one_line():
    """The command line's last resort for an allocation failing inside torch, wherever it happens."""
    from groc_cli.errors import out_of_memory

    assert out_of_memory(RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory"))
    assert out_of_memory(MemoryError())
    assert not out_of_memory(RuntimeError("shape mismatch"))


RESUME = ["train", "ds", "-o", "run", "--resume", "--max-tokens", "200", "--device", "cpu"]


def test_a_truncated_trainer_state(work):
    path = work / "run" / "last" / "trainer.pt"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    err = one_line(run_groc(*RESUME, cwd=work))
    assert "run/last/trainer.pt is truncated or damaged" in err and "re-train" in err


@pytest.mark.parametrize("change", [
    lambda s: s["position"].update(epoch="one"),
    lambda s: s["position"].update(seconds=[1.0]),
    lambda s: s.update(metrics="none"),
    lambda s: s.update(hidden=[1, 2]),
    lambda s: s["rng"].update(torch=torch.zeros(3)),
])
def test_a_trainer_state_with_fields_of_other_types(work, change):
    path = work / "run" / "last" / "trainer.pt"
    saved = torch.load(path, weights_only=True)
    change(saved)
    torch.save(saved, path)
    before = sorted(p.name for p in (work / "run").iterdir())
    err = one_line(run_groc(*RESUME, cwd=work))
    assert "trainer.pt" in err and "cannot resume" in err
    assert sorted(p.name for p in (work / "run").iterdir()) == before
