"""Crafted or oversized values (issue 30, class 7): a size a config file makes absurd, a memory
limit (RLIMIT_AS, as `ulimit -v`) met while building or training, a trainer.pt that is truncated
or whose fields have other types. Each is one line on stderr naming the file or setting, a
non-zero exit, no traceback and no run directory left behind."""

import json
import resource
import shutil

import pytest
import torch

from tests.conftest import REPO, run_env, run_groc


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_run):
    """ds and run: tiny_run.small_data() and tiny_run.small() (tiny_run's, linked here: read-only)."""
    root = tmp_path_factory.mktemp("crafted")
    (root / "ds").symlink_to(tiny_run.small_data())
    (root / "run").symlink_to(tiny_run.small())
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


@pytest.mark.slow
def test_an_absurd_size_from_a_config_file(work):
    (work / "big.toml").write_text("emb = 100000000000000000\n")
    err = one_line(run_groc("train", "ds", "-o", "new", "--config", "big.toml", "--max-tokens", "50", "--device", "cpu",
                            cwd=work))
    assert "--emb 100000000000000000" in err and "smaller" in err
    assert not (work / "new").exists()


@pytest.mark.slow
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


def vm_peak_of_groc_version() -> int:
    """Bytes of address space a `groc --version` child reached here (VmPeak): the baseline a memory
    limit is set relative to, whatever the interpreter and the environment of this run add."""
    import subprocess
    import sys

    code = ("from groc_cli.cli import main\nmain(['--version'])\n"
            "print(next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmPeak')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, env=run_env())
    return int(r.stdout.split()[-1]) * 1024


@pytest.mark.slow
def test_a_memory_limit_met_while_dumping(tmp_path):
    """RLIMIT_AS at the baseline plus 1.5 GiB: torch, numpy and FAISS load (0.8 GiB above it here), the
    dump's 2 GB of float32 states do not (1M predictions of 512 dimensions). Before: a traceback where
    the weights' memory map failed, "Cannot allocate memory" alone where the states' did."""
    import subprocess
    import sys

    text = (REPO / "groc_cli" / "data").glob("*.txt")
    (tmp_path / "big.txt").write_text("".join(p.read_text(encoding="utf-8") for p in sorted(text)) * 3, encoding="utf-8")
    (tmp_path / "small.txt").write_text((REPO / "groc_cli" / "data" / "austen-persuasion.txt").read_text()[:20000])
    run_groc("prepare", "--train", "small.txt", "--test", "big.txt", "--min-count", "2", "-o", "ds", cwd=tmp_path, check=True)
    run_groc("train", "ds", "-o", "run", "--max-tokens", "50", "--emb", "512", "--hidden", "8", "--batch-size", "4",
             "--bptt", "12", "--device", "cpu", cwd=tmp_path, check=True)
    states = 4 * 512 * json.loads((tmp_path / "ds" / "manifest.json").read_text())["splits"]["test"]["tokens"]
    assert states > 2e9
    if shutil.disk_usage(tmp_path).free < states + (1 << 30):  # dump checks the space before it maps anything
        pytest.skip("needs 3 GB of free disk beside the test's temporary directory")
    limit = vm_peak_of_groc_version() + (3 << 29)

    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    r = subprocess.run([sys.executable, "-m", "groc_cli", "dump", "run", "ds", "--split", "test", "--dtype", "float32",
                        "-o", "st", "--device", "cpu"], cwd=tmp_path, capture_output=True, preexec_fn=limited,
                       env=run_env(), timeout=300)
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err, err
    assert [line for line in err.splitlines() if line.startswith("groc: error: ")] == err.splitlines()[-1:], err
    assert "out of memory" in err and "raise the limit" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.txt", "ds", "run", "small.txt"]  # no st, no .st.incomplete-*


def test_out_of_memory_anywhere_is_one_line():
    """The command line's last resort for an allocation failing inside torch, wherever it happens."""
    from groc_cli.errors import out_of_memory

    assert out_of_memory(RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory"))
    assert out_of_memory(MemoryError())
    assert not out_of_memory(RuntimeError("shape mismatch"))
    assert out_of_memory(OSError(12, "Cannot allocate memory"))  # a memory map refused (numpy's open_memmap)
    assert out_of_memory(RuntimeError("unable to mmap 17517184 bytes from file <model.safetensors>: Cannot allocate "
                                      "memory (12)"))
    assert not out_of_memory(OSError(28, "No space left on device"))


RESUME = ["train", "ds", "-o", "run", "--resume", "--max-tokens", "200", "--device", "cpu"]


@pytest.mark.slow
def test_a_truncated_trainer_state(work):
    path = work / "run" / "last" / "trainer.pt"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    err = one_line(run_groc(*RESUME, cwd=work))
    assert "run/last/trainer.pt is truncated or damaged" in err and "re-train" in err


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["score", "generate"])
def test_a_memory_limit_anywhere_in_score_and_generate_is_one_line_never_damage(trained, tmp_path, stage):
    """Under address-space limits from the one at which torch loads up (each at which groc starts), `score` and
    `generate` said a healthy run's vocabulary "is damaged" and advised re-training it (pyarrow's worker threads
    could not start), then died of SIGSEGV (139), or aborted on std::bad_alloc (134). Each limit now gives the
    result, or the one out-of-memory line and status 1."""
    import subprocess
    import sys

    args = {"score": ["score", trained / "run", "-"], "generate": ["generate", trained / "run", "she was", "--seed", "1",
                                                                    "--max-tokens", "5"]}[stage]
    # From the address space at which torch itself has loaded (below it, torch's import aborts before groc runs).
    code = "import torch\nprint(next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmPeak')))"
    base = int(subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, env=run_env()).stdout) * 1024
    seen, starts = set(), False
    for extra_mb in range(0, 481, 40):
        limit = base + (extra_mb << 20)

        def limited():
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        # Whether groc and the stage's own modules load at all (not --version, which loads FAISS: the stages do
        # not). Under a limit groc loads torch first, so this costs a torch import: asked until it first works,
        # since what loads under one limit loads under every larger one.
        if not starts:
            starts = subprocess.run([sys.executable, "-m", "groc_cli", stage, "--help"], capture_output=True,
                                    preexec_fn=limited, env=run_env(), timeout=120).returncode == 0
        if not starts:  # too little for Python to load groc itself: nothing groc can say
            continue
        r = subprocess.run([sys.executable, "-m", "groc_cli", *map(str, args)], input=b"she was here .\n",
                           capture_output=True, preexec_fn=limited, env=run_env(), timeout=120)
        err = r.stderr.decode()
        assert "damaged" not in err and "Traceback" not in err and "--force" not in err, (extra_mb, err)
        if r.returncode == 0:
            seen.add("result")
            continue
        assert r.returncode == 1 and len(err.splitlines()) == 1 and "out of memory" in err, (extra_mb, r.returncode, err)
        seen.add("out of memory")
    assert seen == {"result", "out of memory"}  # the sweep crossed the limit at which the stage fits
