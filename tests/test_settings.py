"""Each setting exists once (GUIDE 11): the options are generated from the dataclasses, a run's
config.json starts a new run, and flags and KEY=VALUE override a --config file."""

import ast
import dataclasses
import json
import re
import sys
from pathlib import Path

import pytest

from groc_cli.cli import command as click_command
from groc_cli.commands import SUMMARIES
from groc_cli.models import ModelConfig
from groc_cli.settings import default_of, toml_loads
from groc_cli.training.config import TrainConfig
from tests.conftest import REPO, TINY, run_groc


# Every stage's options are its settings' fields (flag, default, help, choices) and no command function names
# one: tests/test_stages.py, for train, finetune, dump and every other stage.


def test_dump_takes_evals_chunk_and_device():
    """groc dump's settings, in their options' order; its --chunk and --device are eval's, declared once."""
    from groc_cli.evaluation.settings import EvalSettings
    from groc_cli.evaluation.states import DumpSettings

    assert [f.name for f in dataclasses.fields(DumpSettings)] == ["split", "vocab", "dtype", "checkpoint", "chunk",
                                                                  "device", "lexicon"]
    evals = {f.name: f for f in dataclasses.fields(EvalSettings)}
    for name in ("chunk", "device"):
        f = next(f for f in dataclasses.fields(DumpSettings) if f.name == name)
        assert (f.default, f.metadata) == (evals[name].default, evals[name].metadata)


@pytest.mark.parametrize("args,message", [(["--vocab", "all"], "--vocab must be one of model, union, got 'all'"),
                                          (["--dtype", "int8"], "--dtype must be one of float16, float32, got 'int8'")])
def test_a_bad_dump_choice_names_its_flag(tmp_path, args, message):
    r = run_groc("dump", tmp_path / "run", tmp_path / "data", "--split", "valid", "-o", tmp_path / "st", *args)
    lines = r.stderr.decode().strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and message in lines[0], lines
    assert not (tmp_path / "st").exists()


@pytest.fixture(scope="module")
def data(tiny_run):
    """Persuasion, 3000 and 800 tokens (tiny_run's: read-only)."""
    return tiny_run.data(REPO / "groc_cli" / "data" / "austen-persuasion.txt", "3000,800")


def train_json(*args):
    r = run_groc("train", *map(str, args), "--json", check=True)
    return json.loads(r.stdout)


def test_a_runs_config_reproduces_it(data, tmp_path):
    first = train_json(data, "-o", tmp_path / "a", *TINY, "--max-epochs", "1", "--dropout", "0.3")
    again = train_json(data, "-o", tmp_path / "b", "--config", tmp_path / "a" / "config.json")
    assert again["best_valid_ppl"] == first["best_valid_ppl"]
    assert (tmp_path / "a" / "best" / "model.safetensors").read_bytes() == (tmp_path / "b" / "best" / "model.safetensors").read_bytes()


def test_flags_override_the_file_and_key_value_overrides_both(data, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("[model]\nemb = 16\nhidden = 24\ndropout = 0.1\n[train]\nlr = 0.002\nmax_tokens = 300\nbatch_size = 4\n")
    train_json(data, "-o", tmp_path / "r", "--config", config, "--lr", "0.003", "dropout=0.2", "train.batch_size=2")
    saved = json.loads((tmp_path / "r" / "config.json").read_text())
    assert saved["train"]["lr"] == 0.003 and saved["train"]["max_tokens"] == 300 and saved["train"]["batch_size"] == 2
    assert saved["model"]["dropout"] == 0.2 and saved["model"]["emb"] == 16 and saved["model"]["hidden"] == 24


@pytest.mark.parametrize("args,message", [
    (["bogus=1"], "unknown setting 'bogus'"),
    (["lr=fast"], "lr: expected float, got 'fast'"),
    (["model.lr=0.1"], "unknown setting 'model.lr'"),
    (["--batch-size", "0"], "--batch-size must be a finite number >= 1, got 0"),
    (["--dropout", "1"], "--dropout must be in [0, 1), got 1.0"),
    (["--output-layer", "table"], "--output-layer must be one of lookup, tied"),
    (["--output", "groc"], "--output is now --output-layer (the output layer's kind): use --output-layer groc"),
])
def test_bad_settings_are_one_line(data, tmp_path, args, message):
    r = run_groc("train", data, "-o", tmp_path / "r", *args)
    lines = r.stderr.decode().strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and message in lines[0], lines
    assert not (tmp_path / "r").exists()


def test_size_paper_is_the_defaults_and_small_is_the_cpu_size():
    from groc_cli.models import SIZES

    defaults = {f.name: default_of(f) for f in dataclasses.fields(ModelConfig)}
    assert {name: defaults[name] for name in SIZES["paper"]} == SIZES["paper"]
    assert SIZES["small"] == {"emb": 200, "hidden": 200, "layers": 2, "dropout": 0.3, "emb_dropout": 0.3}


def test_size_sets_the_model_a_setting_flag_wins_over_it_and_it_over_the_file(data, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("[model]\nemb = 16\nhidden = 24\ndropout = 0.1\n[train]\nmax_tokens = 200\nbatch_size = 4\n")
    train_json(data, "-o", tmp_path / "r", "--config", config, "--size", "small", "--hidden", "32", "--bptt", "12")
    model = json.loads((tmp_path / "r" / "config.json").read_text())["model"]
    assert (model["emb"], model["hidden"], model["layers"], model["dropout"], model["emb_dropout"]) == (200, 32, 2, 0.3, 0.3)
    r = run_groc("train", data, "-o", tmp_path / "r", "--resume", "--size", "small")
    assert r.returncode != 0 and r.stderr.decode().strip() == "groc: error: --resume continues with the run's own sizes: drop --size"


def test_finetune_takes_no_model_setting(data, tiny_run, tmp_path):
    r = run_groc("finetune", tiny_run("tied", data=data, max_tokens=200), data, "-o", tmp_path / "f", "emb=32")
    assert r.returncode == 2 and "emb is a model setting, which this command takes from its run" in r.stderr.decode()


def test_paper_configs_are_valid_settings():
    configs = sorted((REPO / "recipes" / "configs").glob("*/*.toml"))
    # seven layers, three GroC ablations and GroC with the 256-filter encoder, penn and wikitext2
    assert len(configs) == 22
    for path in configs:
        data = toml_loads(path.read_text())
        model, trained = ModelConfig(**data["model"]), TrainConfig(**data["train"])
        assert model.emb == (300 if path.parent.name == "penn" else 256) and trained.bptt == 35
        # One dropout rate on the inputs, between the layers and after the last (the PTB A/B of
        # recipes/table2-cpu.sh decided it; docs/reproduction.md).
        assert model.emb_dropout == model.dropout == 0.65 and model.layer_dropout is None, path
    groc = toml_loads((REPO / "recipes" / "configs" / "penn" / "groc.toml").read_text())["model"]
    assert groc["out_depth"] == 0 and groc["out_dropout"] == 0.2  # Table 8, penn


MESSAGES = {"GrocError", "ValueError", "OutputBusy", "DiskFull", "DamagedInput", "print", "log", "BadParameter"}
# Flags of other programs that groc's messages name.
FOREIGN = {"--nproc_per_node"}


def test_every_flag_an_error_names_exists():
    options = set(FOREIGN) | {"--help", "--version", "--debug"}
    for command in map(click_command, SUMMARIES):
        for p in command.params:
            options.update(o for o in p.opts + p.secondary_opts if o.startswith("--"))
    named = {}
    for path in (REPO / "groc_cli").rglob("*.py"):
        for call in ast.walk(ast.parse(path.read_text())):
            if isinstance(call, ast.Call) and getattr(call.func, "id", getattr(call.func, "attr", None)) in MESSAGES:
                for node in ast.walk(call):
                    if isinstance(node, ast.Constant) and isinstance(node.value, str):
                        for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9_-]*", node.value):
                            named[flag] = f"{path.name}:{node.lineno}"
    assert {flag: where for flag, where in named.items() if flag not in options} == {}


def test_a_flag_not_made_by_its_name_is_a_model_or_training_setting():
    """--help writes a setting named in backticks as its flag without importing the evaluation's and
    generation's settings (and torch): that holds while every setting whose flag is not the one its
    name makes (`output`: --output-layer) is the model's or training's."""
    from groc_cli.commands._settings import made_flag, model_flags, setting_flags

    own = {name: flag for name, flag in setting_flags().items() if flag != made_flag(name)}
    assert own == {"output": "--output-layer"}
    assert all(model_flags()[name] == flag for name, flag in own.items())


@pytest.mark.parametrize("args,message", [
    (["--cutoffs", "2k,7k"], "--cutoffs is a setting of --output-layer adaptive, not of tied"),
    (["--output-layer", "groc", "--correction", "4"], "--correction is a setting of --output-layer convolutional, not of groc"),
    (["correction=4"], "override 'correction=4': correction is a setting of --output-layer convolutional, not of tied"),
    (["--output-layer", "adaptive", "--out-depth", "2"], "--out-depth is a setting of --output-layer deep-residual, groc, "
                                                         "not of adaptive"),
])
def test_a_setting_of_another_output_layer_is_refused(data, tmp_path, args, message):
    r = run_groc("train", data, "-o", tmp_path / "r", *TINY, *args)
    lines = r.stderr.decode().strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and message in lines[0], lines
    assert not (tmp_path / "r").exists()


def test_a_config_file_of_another_output_layer_is_refused(data, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("[model]\noutput = 'tied'\nrelations = false\n")
    r = run_groc("train", data, "-o", tmp_path / "r", *TINY, "--config", config)
    assert r.returncode == 2 and f"--config {config}: relations is a setting of --output-layer groc, not of tied" \
        in r.stderr.decode()


def test_a_run_written_with_every_kinds_settings_still_loads_and_reruns(data, tmp_path):
    # Runs written before each output layer had its own settings hold every kind's fields in config.json.
    first = train_json(data, "-o", tmp_path / "a", *TINY, "--max-epochs", "1")
    before = json.loads(run_groc("eval", tmp_path / "a", data, "--split", "valid", check=True).stdout)
    path = tmp_path / "a" / "config.json"
    saved = json.loads(path.read_text())
    assert "cutoffs" not in saved["model"] and "projection_reg" in saved["model"]  # tied's own, no other kind's
    saved["model"].update(cutoffs=None, adaptive_div=4.0, correction=128, relations=True, update_prob=1.0)
    path.write_text(json.dumps(saved))
    scored = json.loads(run_groc("eval", tmp_path / "a", data, "--split", "valid", check=True).stdout)
    assert scored["perplexity"] == before["perplexity"]
    again = train_json(data, "-o", tmp_path / "b", "--config", path)
    assert again["best_valid_ppl"] == first["best_valid_ppl"]


def test_eval_takes_a_config_file_and_overrides(data, tiny_run, tmp_path):
    tiny_run.copy(tiny_run("tied", data=data, max_tokens=400), tmp_path / "r")  # a copy: eval records itself in it
    config = tmp_path / "local.toml"
    config.write_text('cache = "local"\ntheta = 0.5\ncache_size = 300\nsplit = "valid"\n')

    def evaluate(*args):
        return json.loads(run_groc("eval", tmp_path / "r", data, *map(str, args), check=True).stdout)

    flags = evaluate("--split", "valid", "--cache", "local", "--theta", "0.5", "--cache-size", "300")
    assert evaluate("--config", config)["perplexity"] == flags["perplexity"]
    overridden = evaluate("--config", config, "--theta", "0.1", "cache_size=100")
    assert overridden["settings"]["theta"] == 0.1 and overridden["settings"]["cache_size"] == 100
    assert overridden["perplexity"] == evaluate("--split", "valid", "--cache", "local", "--theta", "0.1",
                                                "--cache-size", "100")["perplexity"]
    r = run_groc("eval", tmp_path / "r", data, "--config", config, "thet=3")
    assert r.returncode == 2 and "override 'thet=3': unknown setting 'thet'" in r.stderr.decode()


def test_toml_configs_read_on_python_3_10_through_tomli(monkeypatch, tmp_path):
    """Python 3.10 (which pyproject.toml allows) has no tomllib: every `--config X.toml`, and so every
    recipe, stopped there with ModuleNotFoundError. tomli is its dependency there."""
    tomllib = pytest.importorskip("tomllib")  # this test stands 3.11's parser in for tomli
    from groc_cli.settings import read_config

    monkeypatch.setitem(sys.modules, "tomllib", None)  # `import tomllib` fails as on 3.10
    monkeypatch.setitem(sys.modules, "tomli", tomllib)  # the package tomllib came from
    config = tmp_path / "c.toml"
    config.write_text("[model]\nemb = 32\n")
    assert read_config(config) == ({"model": {"emb": 32}}, False)
    project = toml_loads((REPO / "pyproject.toml").read_text())["project"]
    assert "tomli>=1.1; python_version < '3.11'" in project["dependencies"]
