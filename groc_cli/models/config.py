"""Model settings: what every language model has (``ModelConfig``), and each output layer's own.

A kind with settings of its own declares them in a subclass of ``ModelConfig`` and registers it
with its layer (``register_output_layer("adaptive", config=AdaptiveConfig)``), as fairseq's
models each own their dataclass. Settings that several kinds share are declared once, in a
mixin here: the character encoder's (groc, convolutional), the residual output network's
(deep-residual, groc) and the regularized projection's (lookup, tied). ``ModelConfig(output=KIND, ...)`` builds KIND's class (as ``Path(...)``
builds a ``PosixPath``), and refuses a setting of another kind:

    ModelConfig(output="adaptive", cutoffs=[2000, 7000])   # an AdaptiveConfig
    ModelConfig(output="tied", cutoffs=[2000, 7000])       # ValueError: cutoffs is a setting of adaptive

Every field has a default, so ``ModelConfig.from_dict(json.load(f))`` round-trips the
``to_dict()`` of a config written by an earlier stage; runs written before the kinds had their
own settings hold every kind's fields, and those of other kinds are dropped when read.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass

from ..errors import SettingError
from ..settings import all_fields, check_fields, setting
from .lexicon import PAPER_DEFINITION_WORDS, PAPER_RELATIONS
from .registry import KINDS, config_of, declare_output_layers, output_kinds

ACTIVATIONS = ("relu", "selu", "tanh")


def _default_char_filters() -> list[tuple[int, int]]:
    # 256 filters of widths 1-5: about a quarter of the FLOPs of the Józefowicz et al.
    # (2016) bank while still covering affixes; the highway layer and the 3d x d
    # projection after it dominate the cost of composition (see benchmarks/).
    return [(1, 32), (2, 32), (3, 64), (4, 64), (5, 64)]


def parse_cutoffs(text: str) -> list[int]:
    """"2000,7000" or "2k,7k" (or a JSON list) as bin edges."""
    try:
        return [int(float(x.strip(" []").lower().replace("k", "e3"))) for x in text.split(",") if x.strip(" []")]
    except ValueError:
        raise ValueError(f"expected increasing integers like 2000,7000 or 2k,7k, got {text!r}") from None


def _char_filters(value) -> list[tuple[int, int]]:
    # JSON turns tuples into lists; normalise so configs compare equal after a round trip.
    pairs = [(int(w), int(n)) for w, n in value]
    if not pairs or any(w < 1 or n < 1 for w, n in pairs):
        raise ValueError(f"must be non-empty (width, count) pairs >= 1, got {pairs}")
    return pairs


def _cutoffs(value) -> list[int]:
    cuts = [int(c) for c in value]
    if any(c < 1 for c in cuts) or sorted(set(cuts)) != cuts:
        raise ValueError(f"must be strictly increasing positive ints, got {cuts}")
    return cuts


#: Named sizes of the prefix LSTM, each a few ModelConfig settings. "paper": the paper's 2 x 1024 with
#: 300-d embeddings and its hidden-unit dropout 0.65 (ModelConfig's defaults, for a GPU); "small":
#: Zaremba et al.'s and Press & Wolf's small model, 2 x 200 with dropout 0.3 on the input embeddings,
#: between the layers and after the last (recipes/table2-cpu.sh's size, at which every Table 2 layer
#: converged on PTB on 2 CPU cores).
SIZES: dict[str, dict[str, int | float]] = {
    "small": {"emb": 200, "hidden": 200, "layers": 2, "dropout": 0.3, "emb_dropout": 0.3},
    "paper": {"emb": 300, "hidden": 1024, "layers": 2, "dropout": 0.65, "emb_dropout": 0.0},
}


@dataclass
class ModelConfig:
    """Hyperparameters every language model has: the prefix LSTM (paper Table 7 and B.1), the output
    layer's kind, its output dropout and the initialisation. Each field is one setting: its flag,
    help and bounds are generated from it (groc_cli/settings.py). A kind's own settings are fields
    of its subclass (``config_class(kind)``)."""

    output: str = setting("tied", "Output layer.", flag="--output-layer", choices=KINDS)
    emb: int = setting(300, "Embedding size (paper: 300 PTB, 256 WikiText-2).", low=1)
    hidden: int = setting(1024, "LSTM units of all but the last layer (paper: 1024).", low=1)
    layers: int = setting(2, "LSTM layers; the last has `emb` units.", low=1)
    dropout: float = setting(0.65, "Hidden-unit dropout (paper: 0.65).", low=0, high=1, high_open=True)
    emb_dropout: float = setting(0.0, "Locked dropout on input embeddings (authors' code: 0.4, awd-lstm-lm's "
                                 "dropouti).", low=0, high=1, high_open=True)
    layer_dropout: float | None = setting(None, "Locked dropout between LSTM layers (default: `dropout`; authors' "
                                          "code: 0.25, awd-lstm-lm's dropouth); `dropout` stays the rate after the "
                                          "last layer.", low=0, high=1, high_open=True)
    out_dropout: float = setting(0.0, "Variational dropout on output embeddings (Table 7 r).", low=0, high=1,
                                 high_open=True)
    init_range: float = setting(0.05, "Uniform initialisation range (paper: 0.05).", low=0)

    #: The setting that picks the subclass (commands/_settings.resolve builds ``class_for`` it).
    KIND_SETTING = "output"

    def __new__(cls, *args, **values):
        if cls is ModelConfig and not args:
            kind = values.get("output", _default_kind())
            cls = ModelConfig.class_for(kind)
            _check_names(cls, kind, values)
        return super().__new__(cls)

    def __getnewargs_ex__(self):
        # copy and pickle rebuild a config through __new__: keep its class.
        return (), {"output": self.output}

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        check_fields(self)
        if self.output in KINDS and type(self) is not config_class(self.output):
            raise ValueError(f"output {self.output!r} has the settings {config_class(self.output).__name__}, not "
                             f"{type(self).__name__}: build it with ModelConfig(output={self.output!r}, ...)")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ModelConfig":
        """The config of ``data["output"]``'s kind. Fields of other kinds are dropped (a run written
        before each kind had its own settings holds them all); a name no kind has is a ValueError."""
        target = ModelConfig.class_for(data.get("output"))
        known = {f.name for f in dataclasses.fields(target)}
        unknown = sorted(set(data) - known - {f.name for f in all_fields(ModelConfig)})
        if unknown:
            raise ValueError(f"unknown model config fields: {', '.join(unknown)}")
        return ModelConfig(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def class_for(cls, kind: str | None) -> type:
        """The settings class of ``kind`` (the default kind's for None; ModelConfig for an unknown kind,
        which then fails ``output``'s choices)."""
        kind = _default_kind() if kind is None else kind
        return config_class(kind) if kind in KINDS else ModelConfig

    @classmethod
    def settings_classes(cls) -> list[type]:
        """ModelConfig and each registered kind's class: the command line offers all their fields."""
        return list(dict.fromkeys([ModelConfig, *(config_class(k) for k in output_kinds())]))

    @classmethod
    def kind_settings(cls, kind: str | None) -> set[str]:
        """The settings output layer ``kind`` takes (``settings.kind_applies``)."""
        return {f.name for f in dataclasses.fields(cls.class_for(kind))}

    @classmethod
    def kinds_with_setting(cls, name: str) -> str:
        return ", ".join(kinds_with(name))

    @classmethod
    def setting_scope(cls, name: str) -> str | None:
        """The kinds a setting belongs to ("deep-residual, groc"), or None for every kind's."""
        if name in {f.name for f in dataclasses.fields(ModelConfig)}:
            return None
        return ", ".join(kinds_with(name)) or None


def config_class(kind: str) -> type:
    """The settings class of output layer ``kind`` (``ModelConfig`` for a kind with none of its own)."""
    return config_of(kind) or ModelConfig


def kinds_with(name: str) -> list[str]:
    """The registered kinds that have setting ``name``."""
    return [k for k in output_kinds() if name in {f.name for f in dataclasses.fields(config_class(k))}]


def _default_kind() -> str:
    """``output``'s default, as its field declares it."""
    return ModelConfig.__dataclass_fields__["output"].default


def _check_names(cls: type, kind: str, values: dict) -> None:
    known = {f.name for f in dataclasses.fields(cls)}
    for name in values:
        if name not in known:
            owners = kinds_with(name)
            if owners:
                raise SettingError(f"{name} is a setting of output {', '.join(owners)}, not of {kind}")
            raise ValueError(f"unknown model setting {name!r}")


# -- settings that several kinds share, declared once --------------------------------------------

@dataclass
class ResidualOutputSettings:
    """The depth-k residual output network (paper Eq. 4): deep-residual and groc."""

    out_depth: int = setting(1, "Residual output network depth k.", low=0, high=4)
    out_activation: str = setting("relu", "Activation of the output network (and GroC's bias).", choices=ACTIVATIONS)


@dataclass
class CharEncoderSettings:
    """The character encoder (char-CNN + highway, ``chars.py``): groc and convolutional."""

    char_emb: int = setting(16, "Character embedding size of the char-CNN.", low=1, cli=False)
    char_filters: list[tuple[int, int]] = setting(help="Char-CNN (width, filters) pairs.", cli=False,
                                                  default_factory=_default_char_filters, check=_char_filters)
    char_init: str = setting("authors", "Initialisation of the char-CNN: 'authors' (the authors' code: byte embeddings "
                             "N(0, 1), convolution, highway and projection weights in ±0.1, no projection bias), "
                             "'uniform' (byte embeddings in ±`init_range`, paper B.1; PyTorch's bounds for the "
                             "convolution and highway; its composed embeddings start nearly collinear and trained "
                             "6% worse on Emma: docs/reproduction.md, fidelity) or 'normal' (byte embeddings N(0, 1)).",
                             choices=("authors", "uniform", "normal"))
    highway_layers: int = setting(1, "Highway layers after the char-CNN.", low=0)
    char_activation: str = setting("tanh", "Activation after the char-CNN's max-pool (authors' code: selu).",
                                   choices=ACTIVATIONS)
    highway_activation: str = setting("relu", "Activation of the highway layers' transform (authors' code: selu).",
                                      choices=ACTIVATIONS)
    char_projection: bool = setting(False, "Project the surface encoding to `emb` dimensions after the highway (no "
                                    "bias), as the authors' code does (its 1024 -> d projection); GroC's relations, "
                                    "definitions and combination then work in `emb` dimensions.")
    max_word_chars: int = setting(20, "Characters of a word the char-CNN reads.", low=1, cli=False)
    compose_chunk: int = setting(16384, "Strings per chunk when composing without autograd.", low=1, cli=False)


# The built-in kinds' own settings. Each is registered with its layer (tables.py, adaptive.py,
# convolutional.py, groc.py); they live here, beside the mixins they share, so that every model setting
# is declared in one file. Not to spare torch: importing this module imports the package groc_cli.models,
# and with it the layers and torch (a kind's settings class is registered when its layer is).

@dataclass
class ProjectionSettings:
    """Press & Wolf's projection regularization (Sec. 5): lookup and tied."""

    projection_reg: float = setting(0.0, "λ of a d×d projection P before the output embedding, penalised by λ‖P‖² "
                                    "added to the per-token mean loss (Press & Wolf; their code's strength at batch B "
                                    "and BPTT T is 1/(13·B·T), docs/reproduction.md).", low=0)
    projection_init: str = setting("identity", "With `projection_reg`: 'identity' (P = I and no bias, so the untrained "
                                   "model equals the one without P) or 'authors' (Press & Wolf's code: P and a bias "
                                   "after it in U(±`init_range`)).", choices=("identity", "authors"))

    def validate(self) -> None:
        super().validate()
        if self.projection_init != "identity" and not self.projection_reg:
            raise SettingError("projection_init applies to the projection of projection_reg > 0; set projection_reg too")


@dataclass
class LookupConfig(ProjectionSettings, ModelConfig):
    pass


@dataclass
class TiedConfig(ProjectionSettings, ModelConfig):
    pass


@dataclass
class DeepResidualConfig(ResidualOutputSettings, ModelConfig):
    pass


@dataclass
class AdaptiveConfig(ModelConfig):
    cutoffs: list[int] | None = setting(None, "Bin edges, e.g. 2000,7000 (default: 0.2n,0.7n as in Table 7's '253').",
                                        parse=parse_cutoffs, check=_cutoffs)
    adaptive_div: float = setting(4.0, "Capacity divisor per bin.", low=1)


@dataclass
class ConvolutionalConfig(CharEncoderSettings, ModelConfig):
    correction: int = setting(128, "Per-word linear correction size (Table 7 cor).", low=0)


@dataclass
class GroCConfig(CharEncoderSettings, ResidualOutputSettings, ModelConfig):
    relations: bool = setting(True, "Relational encoding (ablation, Table 3).")
    definitions: bool = setting(True, "Definitional encoding (ablation, Table 3).")
    max_relations: int = setting(PAPER_RELATIONS, f"Relations read per word (paper B.1: {PAPER_RELATIONS}).", low=0,
                                 cli=False)
    max_definition_words: int = setting(PAPER_DEFINITION_WORDS, "Definition words read per word (paper B.1: "
                                        f"{PAPER_DEFINITION_WORDS}).", low=0, cli=False)
    bias: str = setting("composed", "The output bias: 'composed', b_v = act(w·e_v + a) (paper Eq. 5; no parameter "
                        "depends on the vocabulary), or 'free', one trained bias per word (the authors' code without "
                        "its predict_bias option, as its Table 2 commands run). A free bias follows the vocabulary by "
                        "string when it changes (finetune, and the `vocab` of eval, score and generate): a word new to "
                        "the model gets the mean bias of the words it had.", choices=("composed", "free"))
    bias_activation: str | None = setting(None, "Activation of the composed bias b_v = act(w·e_v + a) (default: "
                                          "`out_activation`; authors' code: tanh).", choices=ACTIVATIONS)
    bias_dropout: float = setting(0.0, "Dropout on the composed bias's input e_v (authors' code: 0.2).",
                                  low=0, high=1, high_open=True)
    combine: str = setting("concat", "How the surface, relational and definitional encodings make e_x: 'concat', "
                           "W [c; r; d] + b (paper Sec. 3.1, a 3f x d projection), or 'add', W (c + r + d) + b (the "
                           "authors' code's default, an f x d projection).", choices=("concat", "add"))
    update_prob: float = setting(1.0, "Probability a step updates output-embedding parameters (paper B.4).",
                                 low=0, high=1)

    def validate(self) -> None:
        super().validate()
        if self.bias == "free" and (self.bias_activation is not None or self.bias_dropout):
            raise SettingError("bias_activation and bias_dropout shape the composed bias; with bias 'free' leave them unset")


# The built-in output layers: each kind with the module that registers its layer and its settings, in the
# order of the `output` setting's choices. Declared here, they are choices with their settings before any
# layer module (and torch) is imported: the train command's help lists them all without loading one.
declare_output_layers("groc_cli.models.tables", {"lookup": LookupConfig, "tied": TiedConfig, "bilinear": None,
                                                 "deep-residual": DeepResidualConfig})
declare_output_layers("groc_cli.models.adaptive", {"adaptive": AdaptiveConfig})
declare_output_layers("groc_cli.models.convolutional", {"convolutional": ConvolutionalConfig})
declare_output_layers("groc_cli.models.groc", {"groc": GroCConfig})
