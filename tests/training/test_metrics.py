"""Training curves (issue 17): per-step metrics written as training goes and kept by a killed run,
a resumed run whose budget is spent, the budget-aware ETA, and `groc plot`."""

import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

from groc_cli.commands._training_flags import StepProgress
from tests.conftest import REPO, TINY, default_signals, run_env, run_groc

COLUMNS = ["step", "epoch", "tokens", "loss", "objective", "lr", "grad_norm", "tokens_per_s", "seconds"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("metrics")
    run_groc("prepare", "--train", REPO / "groc_cli" / "data" / "austen-persuasion.txt", "--split", "6000,1000",
             "-o", root / "data", check=True)
    return root / "data"


def steps(run):
    return pq.read_table(run / "steps.parquet").to_pydict()


@pytest.mark.slow
def test_every_step_is_logged_and_a_killed_run_keeps_its_log(data, tmp_path):
    run = tmp_path / "run"
    args = ["train", data, "-o", run, *TINY, "--max-epochs", "1000", "--patience", "1000", "--checkpoint-every", "20"]
    proc = subprocess.Popen([sys.executable, "-m", "groc_cli", *map(str, args)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=run_env(), preexec_fn=default_signals)
    deadline = time.monotonic() + 120
    while not (run / "last" / "trainer.pt").exists():  # the log is written before each checkpoint
        assert proc.poll() is None and time.monotonic() < deadline, "no checkpoint was written"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed = steps(run)
    assert list(killed) == COLUMNS and len(killed["step"]) >= 20
    assert killed["step"] == list(range(1, len(killed["step"]) + 1))
    # Resumed (one epoch in all), the log continues from the checkpoint without gaps or repeats.
    done = json.loads(run_groc("train", data, "-o", run, "--resume", "--max-epochs", "1", "--json", check=True).stdout)
    log = steps(run)
    assert log["step"] == list(range(1, done["steps"] + 1))
    assert log["tokens"][-1] == done["tokens"] and log["tokens"] == sorted(log["tokens"])
    assert all(g > 0 for g in log["grad_norm"]) and all(lr == pytest.approx(1e-3) for lr in log["lr"])
    assert sum(log["loss"][-10:]) < sum(log["loss"][:10])  # it learns


@pytest.mark.slow
def test_a_resumed_run_whose_budget_is_spent_trains_nothing(data, tmp_path):
    run = tmp_path / "run"
    first = json.loads(run_groc("train", data, "-o", run, *TINY, "--max-tokens", "600", "--json", check=True).stdout)
    before = {name: (run / name).read_bytes() for name in ("metrics.parquet", "steps.parquet")}
    again = run_groc("train", data, "-o", run, "--resume", "--json", check=True)
    assert "already spent its budget (--max-tokens 600)" in again.stderr.decode()
    assert json.loads(again.stdout)["steps"] == first["steps"]
    assert {name: (run / name).read_bytes() for name in before} == before


@pytest.mark.slow
def test_a_resumed_run_that_early_stopping_ended_trains_nothing(data, tmp_path):
    """Resuming a finished run with a larger --max-epochs must not train past its early stop (it did:
    one more epoch, and on an improvement, training went on and replaced its best checkpoint)."""
    run = tmp_path / "run"
    args = [*TINY, "--lr", "0.5", "--patience", "2", "--lr-patience", "1", "--max-epochs", "30", "--json"]
    first = json.loads(run_groc("train", data, "-o", run, *args, check=True).stdout)
    assert first["stop_reason"] == "early-stopping" and first["epochs"] < 30
    before = {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != "summary.json"}
    again = run_groc("train", data, "-o", run, "--resume", "--max-epochs", "40", "--json", check=True)
    assert "already ended by early stopping" in again.stderr.decode()
    done = json.loads(again.stdout)
    assert (done["epochs"], done["steps"], done["stop_reason"]) == (first["epochs"], first["steps"], "early-stopping")
    assert {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != "summary.json"} == before


def test_the_eta_stops_at_the_budget():
    pos = SimpleNamespace(epoch_seconds=10.0, epoch_tokens=1000, tokens=1000, seconds=10.0)
    def trainer(**cfg):
        return SimpleNamespace(pos=pos, config=SimpleNamespace(**{"max_tokens": None, "max_minutes": None, **cfg}))
    # 10 of 100 steps in 10 s: the epoch ends in 90 s ...
    assert StepProgress.eta(trainer(), 100, 10) == (90.0, "epoch")
    # ... but 500 tokens more at 100 tokens/s take 5 s, and one minute of budget leaves 50 s.
    assert StepProgress.eta(trainer(max_tokens=1500), 100, 10) == (5.0, "--max-tokens")
    assert StepProgress.eta(trainer(max_minutes=1), 100, 10) == (50.0, "--max-minutes")


def test_the_progress_bar_keeps_the_step_count_and_eta_whole_in_an_80_column_terminal(monkeypatch):
    """A PTB epoch (1,328 steps) in the most common terminal width: rich cut the step count to
    "308/…" to fit the figures beside a full-width bar; now the bar gives way."""
    import io

    from rich.console import Console

    pos = SimpleNamespace(epoch=12, batch=308 * 35, step=16_000, epoch_loss=4.229 * 215_600, epoch_tokens=215_600,
                          epoch_seconds=80.0, tokens=16_000 * 700, seconds=9_000.0)
    trainer = SimpleNamespace(pos=pos, config=SimpleNamespace(bptt=35, max_tokens=None, max_minutes=None))
    for width in (80, 100):
        screen = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
        monkeypatch.setattr("groc_cli.commands._training_flags.err", screen)  # training's stderr, a terminal
        with StepProgress(500) as progress:
            progress(trainer, 1328)
        with screen.capture() as shown:  # the last frame, drawn again once the live display has gone
            screen.print(progress.bar.get_renderable())
        line = shown.get().rstrip("\n")
        assert len(line) <= width and "308/1328 loss 4.229 ppl 68.6 2,695 tok/s ETA 265s" in line, line
        assert line.startswith("epoch 12 ━")  # a bar is still drawn


def test_a_progress_bar_of_eval_or_dump_keeps_its_count_whole_in_a_narrow_terminal(monkeypatch):
    import io

    from rich.console import Console

    import groc_cli.console

    screen = Console(file=io.StringIO(), width=60, force_terminal=True, color_system=None)
    monkeypatch.setattr(groc_cli.console, "err", screen)
    with groc_cli.console.progress("eval test", 10_000_000, "tok") as advance:
        advance(4_000_000)
    shown = screen.file.getvalue()
    assert "4000000/10000000 tok" in shown and "━" in shown, shown  # rich cut it to "4000000/1000…"


@pytest.mark.slow
def test_plot_draws_several_runs(data, tmp_path):
    pytest.importorskip("matplotlib")
    runs = [tmp_path / "a", tmp_path / "b"]
    for run, seed in zip(runs, ("1", "2")):
        run_groc("train", data, "-o", run, *TINY, "--max-epochs", "2", "--seed", seed, check=True)
    png = tmp_path / "curves.png"
    result = json.loads(run_groc("plot", *runs, "-o", png, check=True).stdout)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result["epochs"] == {"a": 2, "b": 2} and result["steps"]["a"] == len(steps(runs[0])["step"]) > 0
    again = run_groc("plot", *runs, "-o", png)
    assert again.returncode == 2 and "--force" in again.stderr.decode()
    not_a_run = run_groc("plot", data, "-o", tmp_path / "x.png")
    assert not_a_run.returncode == 2 and "is not a run directory" in not_a_run.stderr.decode()
    assert not (tmp_path / "x.png").exists()


@pytest.mark.slow
def test_tensorboard_gets_the_same_curves_and_a_resume_writes_each_step_once(data, tmp_path):
    pytest.importorskip("tensorboard")  # an extra that recipes/setup.sh installs
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run, board = tmp_path / "run", tmp_path / "tb"
    run_groc("train", data, "-o", run, *TINY, "--max-epochs", "1", "--tensorboard", board, check=True)
    run_groc("train", data, "-o", run, "--resume", "--max-epochs", "2", "--tensorboard", board, check=True)
    events = EventAccumulator(str(board), size_guidance={"scalars": 0}).Reload()
    logged = steps(run)
    for name in ("loss", "objective", "lr", "grad_norm", "tokens_per_s"):
        got = events.Scalars(f"train/{name}")
        assert [e.step for e in got] == logged["step"], name  # each step once, across the resume
        assert [e.value for e in got] == pytest.approx(logged[name], rel=1e-6), name
    metrics = pq.read_table(run / "metrics.parquet").to_pydict()
    assert len(metrics["epoch"]) == 2 and [e.step for e in events.Scalars("epoch/valid_ppl")] == metrics["epoch"]
    assert [e.value for e in events.Scalars("epoch/valid_ppl")] == pytest.approx(metrics["valid_ppl"], rel=1e-6)


@pytest.mark.slow
def test_tensorboard_without_the_package_is_refused_before_any_work(data, tmp_path):
    code = ("import sys; sys.modules['torch.utils.tensorboard'] = None; sys.argv[0] = 'groc'; "
            "from groc_cli.cli import main; sys.exit(main())")
    args = ["train", data, "-o", tmp_path / "run", *TINY, "--tensorboard", tmp_path / "tb"]
    got = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                         env=run_env())
    assert got.returncode != 0 and "pip install 'groc-cli[tensorboard]'" in got.stderr
    assert len(got.stderr.strip().splitlines()) == 1, got.stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "tb").exists()
