"""The output-layer registry: built-in layers and their capabilities, a new layer defined only
here going through training, finetuning, evaluation and loading untouched (the promise of
docs/extending.md), and no kind names compared outside models/."""

from __future__ import annotations

import ast
import dataclasses
import math
import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from groc_cli.models import (KINDS, ModelConfig, OutputLayer, SoftmaxComposed, build_model, output_kinds,
                             output_layer_class, register_output_layer)
from groc_cli.models import registry
from groc_cli.models.common import remap_rows, replace_parameter, uniform_
from groc_cli.settings import setting

PACKAGE = Path(__file__).resolve().parents[2] / "groc_cli"
BUILT_IN = ("lookup", "tied", "bilinear", "deep-residual", "adaptive", "convolutional", "groc")


def test_built_in_layers_in_the_order_of_the_choices():
    assert tuple(KINDS) == output_kinds() == BUILT_IN
    assert list(KINDS) == list(BUILT_IN) and len(KINDS) == 7 and KINDS[-1] == "groc" and "tied" in KINDS
    with pytest.raises(ValueError, match="unknown output layer 'nope'; choose from lookup, tied"):
        output_layer_class("nope")


def test_capabilities_of_the_built_in_layers():
    groc = output_layer_class("groc")
    assert groc.needs_lexicon and groc.composes_unseen_words and groc.sparse_updates
    for kind in BUILT_IN[:-1]:
        layer = output_layer_class(kind)
        assert not (layer.needs_lexicon or layer.composes_unseen_words or layer.sparse_updates), kind
    assert {output_layer_class(k).__name__ for k in BUILT_IN[:4]} == {"TableOutput"}


def test_a_kind_is_registered_once():
    class Other(OutputLayer):
        pass

    with pytest.raises(ValueError, match="'groc' is already registered by GroCOutput"):
        register_output_layer("groc")(Other)
    assert output_layer_class("groc").__name__ == "GroCOutput"
    with pytest.raises(ValueError):
        register_output_layer()


def test_the_built_in_kinds_and_their_settings_are_known_before_torch():
    """Importing groc_cli.models loads no layer module: the built-in kinds are declared with their settings
    (the choices and flags of `groc train --help`), and a kind's module, with torch, is imported by the
    first output_layer_class of that kind."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from groc_cli.models import KINDS, ModelConfig, output_layer_class\n"
            "assert 'torch' not in sys.modules\n"
            "print(','.join(KINDS), type(ModelConfig(output='groc', out_depth=2)).__name__)\n"
            "assert 'torch' not in sys.modules and 'groc_cli.models.groc' not in sys.modules\n"
            "print(output_layer_class('groc').__name__, 'groc_cli.models.tables' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [",".join(BUILT_IN), "GroCConfig", "GroCOutput", "False"]


def test_a_declared_kind_keeps_the_settings_declared_with_it():
    class Other(OutputLayer):
        pass

    with pytest.raises(ValueError, match="'adaptive' has the settings declared with it, not ScaledTiedConfig"):
        register_output_layer("adaptive", config=ScaledTiedConfig)(Other)
    with pytest.raises(ValueError, match="'adaptive' is already declared"):
        registry.declare_output_layers("elsewhere", {"adaptive": None})
    assert output_layer_class("adaptive").__name__ == "AdaptiveOutput"


# -- an eighth output layer, defined only in this test -------------------------------------------

@dataclasses.dataclass
class ScaledTiedConfig(ModelConfig):
    """The layer's own setting, beside what every language model has."""

    scale_reg: float = setting(1e-3, "Penalty λ·s² on the log-temperature s.", low=0)


class ScaledTiedOutput(OutputLayer):
    """Tied embeddings with one learned temperature: logits = (h . E_v) * exp(s) + b_v."""

    def __init__(self, config, vocab, generator=None) -> None:
        super().__init__(config, vocab)
        r = config.init_range
        self.embedding = nn.Parameter(uniform_(torch.empty(len(vocab), config.emb), r, generator))
        self.bias = nn.Parameter(uniform_(torch.empty(len(vocab)), r, generator))
        self.log_scale = nn.Parameter(torch.zeros(()))

    def embed(self, ids, composed):
        return F.embedding(ids, self.embedding)

    def compose(self, grad: bool = True) -> SoftmaxComposed:
        with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
            return SoftmaxComposed(self.embedding * self.log_scale.exp(), self.bias, grad=grad)

    def regularization(self):
        return self.config.scale_reg * self.log_scale.pow(2)

    def set_vocab(self, words, counts=None, generator=None) -> None:
        for name in ("embedding", "bias"):
            replace_parameter(self, name, remap_rows(getattr(self, name), self.vocab, words, self.config.init_range,
                                                     generator))
        self.vocab = list(words)


@pytest.fixture
def scaled_tied():
    """ScaledTiedOutput registered as --output-layer scaled-tied for one test."""
    register_output_layer("scaled-tied", config=ScaledTiedConfig)(ScaledTiedOutput)
    try:
        yield "scaled-tied"
    finally:
        registry._LAYERS.pop("scaled-tied", None)
        registry._CONFIGS.pop("scaled-tied", None)


def _sentences(rng: random.Random, words: list[str], n: int) -> list[list[str]]:
    return [[rng.choice(words) for _ in range(rng.randint(3, 9))] for _ in range(n)]


def _dataset(root: Path, name: str, words: list[str], unseen: list[str], seed: int) -> Path:
    from groc_cli.text.dataset import prepare_dataset

    rng = random.Random(seed)
    test = _sentences(rng, words, 30) + [[w, "the", w] for w in unseen]  # test-only words: new in union mode
    prepare_dataset({"train": _sentences(rng, words, 200), "valid": _sentences(rng, words, 40), "test": test},
                    root / name)
    return root / name


@pytest.mark.slow
def test_a_new_output_layer_needs_nothing_in_training_or_evaluation(scaled_tied, tmp_path):
    from groc_cli import load_run
    from groc_cli.evaluation.perplexity import EvalSettings, evaluate
    from groc_cli.training.api import TrainJob, run_training
    from groc_cli.training.loop import TrainConfig
    from groc_cli.run_storage import Run

    assert scaled_tied in KINDS and KINDS[-1] == scaled_tied
    config = ModelConfig(output=scaled_tied, emb=8, hidden=12, dropout=0.1, scale_reg=0.01)
    assert type(config) is ScaledTiedConfig and config.scale_reg == 0.01
    with pytest.raises(ValueError, match="scale_reg is a setting of output scaled-tied, not of tied"):
        ModelConfig(output="tied", scale_reg=0.01)
    words = "the a cat dog sat on mat ran big small house tree".split()
    data = _dataset(tmp_path, "data", words, ["zebra", "quokka"], seed=0)
    train = TrainConfig(batch_size=4, eval_batch_size=4, bptt=8, max_epochs=2, seed=3, log_every=1000)

    summary = run_training(TrainJob(dataset=data, output_dir=tmp_path / "run", device="cpu"), train, model_config=config)
    assert summary["epochs"] == 2 and math.isfinite(summary["best_valid_ppl"])
    run = Run(tmp_path / "run")
    assert run.model_config == config and run.read_lexicon() is None  # its own setting saved and read back
    model, vocab, _ = run.build("best")
    assert isinstance(model.output_layer, ScaledTiedOutput) and float(model.output_layer.log_scale.detach()) != 0.0
    assert set(model.state_dict()) == set(build_model(config, vocab).state_dict())

    closed = evaluate(tmp_path / "run", data, EvalSettings(split="test", device="cpu"))
    union = evaluate(tmp_path / "run", data, EvalSettings(split="test", vocab="union", device="cpu"))
    assert math.isfinite(closed["perplexity"]) and math.isfinite(union["perplexity"])
    assert 1 < closed["perplexity"] < len(vocab) * 3
    # Like the table layers, it gives unseen words no mass of its own: eval mixes in the uniform share.
    assert union["settings"]["uniform_weight"] == 0.01
    with pytest.raises(Exception, match="^downweight_new applies to GroC models with vocab union only"):
        evaluate(tmp_path / "run", data, EvalSettings(split="test", vocab="union", downweight_new=0.5, device="cpu"))

    scores = load_run(tmp_path / "run").score(["the cat sat", "the zebra ran"])
    assert all(math.isfinite(s.log_prob) for s in scores)

    target = _dataset(tmp_path, "target", words + ["yak", "emu"], [], seed=1)
    run_training(TrainJob(dataset=target, output_dir=tmp_path / "tuned", device="cpu"),
                 TrainConfig(batch_size=4, eval_batch_size=4, bptt=8, max_epochs=1, seed=3), source_run=tmp_path / "run")
    tuned, tuned_vocab, _ = Run(tmp_path / "tuned").build("best")
    assert {"yak", "emu"} <= set(tuned_vocab) and tuned.output_layer.embedding.size(0) == len(tuned_vocab)
    assert math.isfinite(evaluate(tmp_path / "tuned", target, EvalSettings(split="test", device="cpu"))["perplexity"])


def test_a_layer_unregistered_is_no_choice(scaled_tied):
    ModelConfig(output=scaled_tied)
    registry._LAYERS.pop(scaled_tied)
    with pytest.raises(ValueError, match="output must be one of lookup, .*, groc, got 'scaled-tied'"):
        ModelConfig(output=scaled_tied)


# -- no kind names outside models/ ------------------------------------------------------------------

def _kind_comparisons(source: str, where: str) -> list[str]:
    """Comparisons (==, !=, in, not in) and match cases against an output layer's kind as a literal."""

    def literals(node) -> set:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        return set()

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            named = set().union(*(literals(n) for n in [node.left, *node.comparators])) & set(BUILT_IN)
        elif isinstance(node, ast.MatchValue):
            named = literals(node.value) & set(BUILT_IN)
        else:
            continue
        if named:
            found.append(f"{where}:{node.lineno} compares with {sorted(named)}")
    return found


def test_training_evaluation_api_and_commands_compare_no_kind_names():
    paths = [PACKAGE / "api.py", *(PACKAGE / "evaluation").rglob("*.py"), *(PACKAGE / "training").rglob("*.py"),
             *(PACKAGE / "commands").rglob("*.py")]
    assert len(paths) > 20
    hits = [hit for path in sorted(paths) for hit in _kind_comparisons(path.read_text(), path.name)]
    assert hits == [], "ask output_layer_class(kind) for a capability instead"


def test_the_scan_sees_each_form_of_comparison():
    source = ('if kind != "groc" or run.output in ("adaptive", "x") or "size" == n:\n    pass\n'
              'match k:\n    case "tied":\n        pass\n')
    assert sorted(_kind_comparisons(source, "probe")) == ["probe:1 compares with ['adaptive']",
                                                          "probe:1 compares with ['groc']",
                                                          "probe:4 compares with ['tied']"]


def test_each_kind_has_its_own_settings():
    from groc_cli.models import config_class

    assert {k: config_class(k).__name__ for k in BUILT_IN} == {
        "lookup": "LookupConfig", "tied": "TiedConfig", "bilinear": "ModelConfig",
        "deep-residual": "DeepResidualConfig", "adaptive": "AdaptiveConfig", "convolutional": "ConvolutionalConfig",
        "groc": "GroCConfig"}
    shared = {f.name for f in dataclasses.fields(ModelConfig)}
    own = {k: {f.name for f in dataclasses.fields(config_class(k))} - shared for k in BUILT_IN}
    assert own["adaptive"] == {"cutoffs", "adaptive_div"} and own["tied"] == own["lookup"] == {"projection_reg", "projection_init"}
    assert own["convolutional"] == {"correction"} | (own["groc"] & own["convolutional"])
    assert {"char_filters", "char_init", "highway_layers"} <= own["groc"] & own["convolutional"]
    assert own["deep-residual"] == {"out_depth", "out_activation"} <= own["groc"]
    assert not own["bilinear"]
    assert ModelConfig(output="groc", relations=False).relations is False
    for kind, name, value in (("tied", "cutoffs", [5]), ("adaptive", "relations", False), ("groc", "correction", 4),
                              ("lookup", "out_depth", 2)):
        with pytest.raises(ValueError, match=f"{name} is a setting of output"):
            ModelConfig(output=kind, **{name: value})


def test_a_setting_is_declared_once():
    from groc_cli.settings import all_fields

    @dataclasses.dataclass
    class Again(ModelConfig):
        cutoffs: list[int] | None = setting(None, "another declaration of adaptive's cutoffs")

    class Layer(ScaledTiedOutput):
        pass

    register_output_layer("again", config=Again)(Layer)
    try:
        with pytest.raises(TypeError, match="declares the setting 'cutoffs' again"):
            all_fields(ModelConfig)
    finally:
        registry._LAYERS.pop("again")
        registry._CONFIGS.pop("again")
