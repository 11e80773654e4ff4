"""`groc train` / `groc finetune` through the real CLI on slices of PTB, with tiny models."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest
import torch
from safetensors.torch import load_file

from tests.conftest import TINY, run_env, run_groc

# GroC's char-CNN at 48 filters instead of the default 256, for tests that train GroC for the checks, not the model.
SMALL_FILTERS = "char_filters=[[1,16],[2,16],[3,16]]"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, data_dir, tiny_run):
    """a, b: PTB slices; lex.parquet: their lexicon; lex-b.parquet: b's (tiny_run's, linked here: read-only)."""
    root = tmp_path_factory.mktemp("tiny")
    a = tiny_run.data(data_dir / "ptb" / "ptb.valid.txt", "2500,800")
    b = tiny_run.data(data_dir / "ptb" / "ptb.test.txt", "5000,800")
    for name, path in (("a", a), ("b", b), ("lex.parquet", tiny_run.lexicon(a, b)),
                       ("lex-b.parquet", tiny_run.lexicon(b))):
        (root / name).symlink_to(path)
    text = (data_dir / "ptb" / "ptb.test.txt").read_text().splitlines()
    (root / "b-text.txt").write_text("\n".join(text[:200]) + "\n")  # b's first lines, for a small target domain
    return root


@pytest.mark.slow
def test_train_writes_a_complete_run(tiny, tmp_path):
    run = tmp_path / "run"
    result = run_groc("train", tiny / "a", "-o", run, "--output-layer", "tied", "--max-epochs", "2", "--json", *TINY, check=True)
    summary = json.loads(result.stdout)  # stdout holds exactly one JSON object
    assert summary["epochs"] == 2 and summary["stop_reason"] == "max-epochs"
    assert "|Θ|" in result.stderr.decode() and "valid ppl" in result.stderr.decode()
    config = json.loads((run / "config.json").read_text())
    dataset = json.loads((tiny / "a" / "manifest.json").read_text())
    assert config["dataset"]["checksum"] == dataset["checksum"]
    assert config["parameters"] == summary["parameters"] > 0
    metrics = pq.read_table(run / "metrics.parquet").to_pylist()
    assert [m["epoch"] for m in metrics] == [1, 2]
    for m in metrics:
        assert m["valid_ppl"] > 1 and m["tokens_per_s"] > 0 and m["lr"] == pytest.approx(1e-3)
    assert metrics[1]["train_loss"] < metrics[0]["train_loss"]
    assert summary["best_valid_ppl"] == pytest.approx(min(m["valid_ppl"] for m in metrics))
    for d in ("best", "last"):
        assert (run / d / "model.safetensors").exists()
    vocab = pq.read_table(run / "vocab.parquet").column("word").to_pylist()
    assert len(vocab) == dataset["vocab_size"]
    again = run_groc("train", tiny / "a", "-o", run, *TINY)
    assert again.returncode != 0 and "--resume" in again.stderr.decode()


@pytest.mark.slow
def test_groc_parameter_count_does_not_depend_on_vocabulary(tiny, tmp_path):
    counts = []
    for name in ("a", "b"):
        r = run_groc("train", tiny / name, "-o", tmp_path / name, "--output-layer", "groc", "--lexicon", tiny / "lex.parquet",
                     "--max-tokens", "200", "--json", *TINY, check=True)
        counts.append(json.loads(r.stdout)["parameters"])
    sizes = [json.loads((tiny / n / "manifest.json").read_text())["vocab_size"] for n in ("a", "b")]
    assert sizes[0] != sizes[1] and counts[0] == counts[1]
    tied = [json.loads(run_groc("train", tiny / n, "-o", tmp_path / f"t{n}", "--max-tokens", "100", "--json", *TINY,
                                check=True).stdout)["parameters"] for n in ("a", "b")]
    assert tied[0] != tied[1]


@pytest.mark.slow
def test_mismatched_lexicon_and_dataset_are_refused_before_training(tiny, tmp_path):
    run = tmp_path / "run"
    r = run_groc("train", tiny / "a", "-o", run, "--output-layer", "groc", "--lexicon", tiny / "lex-b.parquet", *TINY)
    assert r.returncode != 0 and "another vocabulary" in r.stderr.decode() and not run.exists()
    r = run_groc("train", tiny / "a", "-o", run, "--output-layer", "groc", *TINY)
    assert r.returncode != 0 and "--lexicon" in r.stderr.decode() and not run.exists()
    r = run_groc("train", tmp_path / "nowhere", "-o", run, *TINY)
    assert r.returncode != 0 and "not a directory" in r.stderr.decode() and not run.exists()
    run_groc("train", tiny / "a", "-o", run, "--max-tokens", "100", *TINY, check=True)
    r = run_groc("train", tiny / "b", "-o", run, "--resume", *TINY)
    assert r.returncode != 0 and "another dataset" in r.stderr.decode()


@pytest.mark.slow
def test_resume_takes_a_setting_of_the_runs_own_output_layer_again(tiny, tmp_path):
    """A recipe resumes with the flags it started with (less --config): --bias free without --output-layer was
    checked against the default layer, tied, and refused, so the interrupted GroC row could not go on."""
    run, lex = tmp_path / "run", ("--lexicon", tiny / "lex.parquet")
    run_groc("train", tiny / "a", "-o", run, "--output-layer", "groc", *lex, "--bias", "free", "--max-epochs", "1",
             *TINY, SMALL_FILTERS, check=True)
    again = run_groc("train", tiny / "a", "-o", run, "--resume", *lex, "--bias", "free", "--max-epochs", "2", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["epochs"] == 2
    other = run_groc("train", tiny / "a", "-o", run, "--resume", "--bias", "composed", "--max-epochs", "3")
    assert other.returncode == 2 and "--bias composed (the run has free)" in other.stderr.decode()
    tied = run_groc("train", tiny / "a", "-o", run, "--resume", "--output-layer", "tied", "--bias", "free")
    assert tied.returncode == 2 and "--bias is a setting of --output-layer groc, not of tied" in tied.stderr.decode()
    missing = run_groc("train", tiny / "a", "-o", tmp_path / "none", "--resume", "--bias", "free")
    assert missing.returncode == 2 and missing.stderr.decode().endswith("not a directory; create it with "
                                                                          f"'groc train DATASET -o {tmp_path / 'none'}'\n")


@pytest.mark.slow
def test_amp_trains_under_bfloat16_autocast_on_cpu_too(tiny, tmp_path):
    """--amp was ignored on CPU; it is bfloat16 autocast there as on CUDA: the run records it, and GroC (whose
    char-CNN kernels keep their sums in float32) trains to a validation perplexity near float32's, not the same.
    On a CPU whose torch has AVX2 kernels only, oneDNN has no bfloat16 LSTM: --amp crashed there in the first
    forward; the LSTM now runs in float32. A 48-filter char-CNN keeps the test short: such a CPU computes
    bfloat16 products in software, which made the default 256 filters cost two minutes here (this tiny model
    then lands 0.4% from float32 after two epochs)."""
    results = {}
    for amp in ((), ("--amp",)):
        run = tmp_path / f"run{len(amp)}"
        out = run_groc("train", tiny / "a", "-o", run, "--output-layer", "groc", "--lexicon", tiny / "lex.parquet",
                       "--max-epochs", "2", "--json", *amp, *TINY, SMALL_FILTERS, check=True)
        results[bool(amp)] = json.loads(out.stdout)["best_valid_ppl"]
        assert json.loads((run / "config.json").read_text())["train"]["amp"] is bool(amp)
    assert results[True] != results[False] and results[True] == pytest.approx(results[False], rel=0.05)


def test_amp_on_a_cpu_without_bfloat16_instructions_says_it_trains_slower(tmp_path, monkeypatch, capsys):
    from groc_cli.models import ModelConfig, build_model
    from groc_cli.training import loop

    model = build_model(ModelConfig(output="tied", emb=8, hidden=8), ["a", "b", "<unk>", "<eos>"])
    cols = torch.zeros(20, 2, dtype=torch.long)
    for bf16 in (True, False, None):  # None: the CPU's flags are unknown (no /proc/cpuinfo), so nothing is said
        monkeypatch.setattr(loop, "has_bf16", lambda bf16=bf16: bf16)
        loop.Trainer(model, cols, None, loop.TrainConfig(amp=True), tmp_path, torch.device("cpu"))
        assert ("without bfloat16 instructions" in capsys.readouterr().err) is (bf16 is False)
    loop.Trainer(model, cols, None, loop.TrainConfig(amp=False), tmp_path, torch.device("cpu"))
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_non_finite_loss_stops_and_keeps_last_good_checkpoint(tiny, tmp_path):
    from groc_cli.models import ModelConfig, build_model
    from groc_cli.text.dataset import open_dataset
    from groc_cli.training.data import batchify, model_ids
    from groc_cli.training.loop import NonFiniteLoss, TrainConfig, Trainer

    ds = open_dataset(tiny / "a")
    model = build_model(ModelConfig(output="tied", emb=16, hidden=24), ds.vocab)
    config = TrainConfig(batch_size=4, bptt=12, checkpoint_every=2)
    trainer = Trainer(model, batchify(model_ids(ds.vocab, ds, "train"), 4), None, config, tmp_path, torch.device("cpu"))

    def poison(t, steps):
        if t.pos.step == 3:  # after the checkpoint at step 2
            with torch.no_grad():
                next(t.model.parameters()).fill_(float("nan"))

    with pytest.raises(NonFiniteLoss, match="step 4"):
        trainer.train(progress=poison)
    saved = torch.load(tmp_path / "last" / "trainer.pt", weights_only=True)
    assert saved["position"]["step"] == 2
    weights = load_file(tmp_path / "last" / "model.safetensors")
    assert all(torch.isfinite(t).all() for t in weights.values())


def _weights(run):
    return load_file(run / "last" / "model.safetensors")


def _metrics(run):
    """Per-epoch and per-step metrics without the wall-clock columns."""
    rows = pq.read_table(run / "metrics.parquet").to_pylist()
    steps = pq.read_table(run / "steps.parquet", columns=["step", "epoch", "tokens", "loss", "lr", "grad_norm"])
    return [{k: v for k, v in r.items() if k not in ("seconds", "tokens_per_s")} for r in rows], steps.to_pylist()


@pytest.mark.slow
def test_resume_after_kill_matches_uninterrupted_run(tiny, tmp_path):
    # Bitwise equality needs the same summation order: one thread in every run, on the CPU
    # (CUDA's atomic-add kernels sum in no fixed order, so on a GPU it holds only to rounding).
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    args = ["--output-layer", "groc", "--lexicon", tiny / "lex.parquet", "--update-prob", "0.5", "--max-epochs", "2",
            "--checkpoint-every", "3", "--device", "cpu", *TINY]
    full = tmp_path / "full"
    run_groc("train", tiny / "a", "-o", full, *args, SMALL_FILTERS, check=True, env=env)

    cut = tmp_path / "cut"
    cmd = [sys.executable, "-m", "groc_cli", "train", str(tiny / "a"), "-o", str(cut), *map(str, args), SMALL_FILTERS]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=run_env(env))
    deadline = time.time() + 120
    trainer = cut / "last" / "trainer.pt"
    while time.time() < deadline and proc.poll() is None:
        if trainer.exists() and torch.load(trainer, weights_only=True)["position"]["step"] >= 6:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the first run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert torch.load(trainer, weights_only=True)["position"]["epoch"] == 1  # killed part way through epoch 1
    run_groc("train", tiny / "a", "-o", cut, "--resume", *args, check=True, env=env)

    a, b = _weights(full), _weights(cut)
    assert a.keys() == b.keys()
    differing = [k for k in a if not torch.equal(a[k], b[k])]
    assert differing == []
    assert _metrics(full) == _metrics(cut)


@pytest.mark.slow
def test_finetune_unions_vocabularies(tiny, tiny_run, tmp_path):
    base = tiny_run("groc", data=tiny / "a", lexicon=tiny / "lex.parquet", max_tokens=300)  # read, not written
    # The target domain: 1,200 tokens of b's text (two epochs of GroC over all of b's 5,000 cost a minute of CPU).
    target = tmp_path / "b-small"
    run_groc("prepare", "--train", tiny / "b-text.txt", "--split", "1200,400", "-o", target, check=True)
    ft = tmp_path / "ft"
    r = run_groc("finetune", base, target, "-o", ft, "--max-epochs", "2", "--json", *TINY[4:], check=True)
    summary = json.loads(r.stdout)
    a = pq.read_table(base / "vocab.parquet").column("word").to_pylist()
    b = json.loads((target / "manifest.json").read_text())
    union = pq.read_table(ft / "vocab.parquet").column("word").to_pylist()
    assert union[: len(a)] == a and len(union) > len(a) and len(union) < len(a) + b["vocab_size"]
    assert summary["parameters"] == json.loads((base / "config.json").read_text())["parameters"]
    rows = pq.read_table(ft / "metrics.parquet").to_pylist()
    assert len(rows) == 2 and all(r["valid_loss"] and r["train_loss"] for r in rows)
    tied = tiny_run("tied", data=tiny / "a", max_tokens=300)
    r = run_groc("finetune", tied, target, "-o", tmp_path / "tied-ft", "--max-epochs", "1", "--json", *TINY[4:], check=True)
    assert json.loads(r.stdout)["parameters"] > json.loads((tied / "config.json").read_text())["parameters"]


@pytest.mark.slow
def test_two_process_data_parallel_matches_one_process(tiny, tmp_path):
    # Two CPU processes (gloo), also on a machine with one GPU, which cannot host two NCCL ranks.
    common = [*TINY, "--dropout", "0", "--max-epochs", "1", "--device", "cpu"]  # TINY's batch: 4 in each process
    single = tmp_path / "single"
    run_groc("train", tiny / "a", "-o", single, *common, "--batch-size", "8", check=True)  # the last one counts
    ddp = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29533",
                        "-m", "groc_cli", "train", str(tiny / "a"), "-o", str(ddp), *common, "--json"],
                       capture_output=True, env=env)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    assert len([line for line in r.stdout.decode().splitlines() if line.startswith("{")]) == 1  # rank 0 only
    one, two = pq.read_table(single / "metrics.parquet").to_pylist(), pq.read_table(ddp / "metrics.parquet").to_pylist()
    assert one[0]["tokens"] == two[0]["tokens"]
    assert two[0]["valid_loss"] == pytest.approx(one[0]["valid_loss"], rel=1e-4)


def test_more_processes_than_gpus_is_a_one_line_error_before_any_work(monkeypatch):
    """torchrun --nproc_per_node 2 on a one-GPU machine: the second process says why at once
    instead of failing inside NCCL."""
    from groc_cli.errors import GrocError
    from groc_cli.training import api

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(api.dist, "init_process_group", lambda **kw: pytest.fail("process group started"))
    with pytest.raises(GrocError, match="only 1 CUDA device"):
        api.init_distributed(torch.device("cuda"))


def test_weights_in_one_flat_buffer_save_and_load(tmp_path):
    """On CUDA, cuDNN packs an LSTM's weights into one flat buffer: the checkpoint must store
    those views as separate tensors (safetensors' save_model refused them), and runs saved by
    earlier versions (save_model's format) must still load."""
    from safetensors.torch import save_model

    from groc_cli.models import ModelConfig, build_model
    from groc_cli.run_storage import load_weights, save_weights

    def model(seed):
        torch.manual_seed(seed)
        return build_model(ModelConfig(output="tied", emb=8, hidden=12), ["<unk>", "<eos>", "a", "cat"])

    packed = model(0)
    lstm = [p for n, p in packed.named_parameters() if n.startswith("rnns.")]
    flat = torch.cat([p.detach().reshape(-1) for p in lstm])
    offset = 0
    for p in lstm:  # every LSTM weight becomes a view into one storage, as cuDNN's
        p.data = flat[offset : offset + p.numel()].view_as(p)
        offset += p.numel()
    save_weights(packed, tmp_path / "new")
    save_model(model(1), str(tmp_path / "model.safetensors"))  # an earlier version's checkpoint
    for directory, source in ((tmp_path / "new", packed), (tmp_path, model(1))):
        loaded = model(2)
        load_weights(loaded, directory)
        for (name, a), b in zip(source.state_dict().items(), loaded.state_dict().values()):
            assert torch.equal(a, b), name


def test_a_damaged_checkpoint_is_a_one_line_error(tmp_path):
    from groc_cli.errors import GrocError
    from groc_cli.models import ModelConfig, build_model
    from groc_cli.run_storage import load_weights

    (tmp_path / "best").mkdir()
    (tmp_path / "best" / "model.safetensors").write_bytes(b"garbage")
    model = build_model(ModelConfig(output="tied", emb=8, hidden=12), ["<unk>", "<eos>", "a"])
    with pytest.raises(GrocError, match="not a readable checkpoint"):
        load_weights(model, tmp_path / "best")


@pytest.mark.slow
def test_train_and_finetune_are_one_job_with_two_starts(tiny, data_dir, tmp_path):
    """`train` and `finetune` are one library job, `run_training`, started from a new model or from
    a trained run: the same checks refuse the same mistakes before any work, and --resume extends
    either run's budget."""
    from groc_cli.errors import GrocError
    from groc_cli.models import ModelConfig
    from groc_cli.training.api import TrainJob, run_training
    from groc_cli.training.loop import TrainConfig

    config = TrainConfig(batch_size=4, eval_batch_size=4, bptt=12, seed=3, max_tokens=150, log_every=1000)
    run_groc("prepare", "--test", data_dir / "ptb" / "ptb.valid.txt", "-o", tmp_path / "test-only", check=True)
    new, tuned = tmp_path / "new", tmp_path / "tuned"
    starts = {new: (tiny / "a", dict(model_config=ModelConfig(output="tied", emb=16, hidden=24))),
              tuned: (tiny / "b", dict(source_run=new))}
    for run, (data, start) in starts.items():
        summary = run_training(TrainJob(dataset=data, output_dir=run, device="cpu"), config, **start)
        assert summary["run"] == str(run) and summary["tokens"] >= 150
    recorded = json.loads((tuned / "config.json").read_text())
    assert recorded["stage"] == "finetune" and recorded["finetuned_from"]["path"] == str(new)
    assert json.loads((new / "config.json").read_text())["stage"] == "train"
    for run, (data, start) in starts.items():
        with pytest.raises(GrocError, match="already exists; pass resume to continue it or force"):
            run_training(TrainJob(dataset=data, output_dir=run, device="cpu"), config, **start)
        with pytest.raises(GrocError, match="has no train split"):
            run_training(TrainJob(dataset=tmp_path / "test-only", output_dir=tmp_path / "x", device="cpu"), config, **start)
        with pytest.raises(GrocError, match="on another dataset"):
            run_training(TrainJob(dataset=tiny / ("b" if data.name == "a" else "a"), output_dir=run, device="cpu",
                                  resume=True), config, **start)
        longer = TrainConfig(**{**dataclasses.asdict(config), "max_tokens": 300})
        summary = run_training(TrainJob(dataset=data, output_dir=run, device="cpu", resume=True), longer, **start)
        assert summary["tokens"] >= 300 and pq.read_table(run / "metrics.parquet").num_rows >= 1
        # A setting of the caller's that differs from the run's is refused, as on the command line.
        faster = TrainConfig(**{**dataclasses.asdict(longer), "lr": 0.01})
        with pytest.raises(GrocError, match=r"run's own settings, and lr 0.01 \(the run has 0.001\)"):
            run_training(TrainJob(dataset=data, output_dir=run, device="cpu", resume=True), faster, **start)
    with pytest.raises(TypeError, match="not both"):
        run_training(TrainJob(dataset=tiny / "a", output_dir=tmp_path / "y"), config)
