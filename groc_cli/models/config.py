"""Model configuration shared by every output-layer kind.

Every field has a default so that ``ModelConfig(**json.load(f))`` round-trips the
``dataclasses.asdict`` of a config written by an earlier stage.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from ..settings import check_fields, setting
from .registry import KINDS

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


@dataclass
class ModelConfig:
    """Hyperparameters of the prefix LSTM and the output layer (paper Tables 7-8). Each field is
    one setting: its flag, help and bounds are generated from it (groc_cli/settings.py)."""

    output: str = setting("tied", "Output layer.", flag="--output-layer", choices=KINDS)
    emb: int = setting(300, "Embedding size (paper: 300 PTB, 256 WikiText-2).", low=1)
    hidden: int = setting(1024, "LSTM units of all but the last layer (paper: 1024).", low=1)
    layers: int = setting(2, "LSTM layers; the last has --emb units.", low=1)
    dropout: float = setting(0.65, "Hidden-unit dropout (paper: 0.65).", low=0, high=1, high_open=True)
    emb_dropout: float = setting(0.0, "Locked dropout on input embeddings (authors' code: 0.4, awd-lstm-lm's "
                                 "dropouti).", low=0, high=1, high_open=True)
    layer_dropout: float | None = setting(None, "Locked dropout between LSTM layers (default: --dropout; authors' "
                                          "code: 0.25, awd-lstm-lm's dropouth); --dropout stays the rate after the "
                                          "last layer.", low=0, high=1, high_open=True)
    out_dropout: float = setting(0.0, "Variational dropout on output embeddings (Table 7 r).", low=0, high=1,
                                 high_open=True)
    out_depth: int = setting(1, "Residual output network depth k (deep-residual, groc).", low=0, high=4)
    out_activation: str = setting("relu", "Activation of the output network and the GroC bias.",
                                 choices=ACTIVATIONS)
    projection_reg: float = setting(0.0, "tied: λ of a d×d projection penalised by λ‖P‖² (Press & Wolf).", low=0)
    cutoffs: list[int] | None = setting(None, "adaptive: bin edges, e.g. 2000,7000 (default: 0.2n,0.7n as in Table 7's "
                                        "'253').", parse=parse_cutoffs)
    adaptive_div: float = setting(4.0, "adaptive: capacity divisor per bin.", low=1)
    correction: int = setting(128, "convolutional: per-word linear correction size (Table 7 cor).", low=0)
    relations: bool = setting(True, "groc: relational encoding (ablation, Table 3).")
    definitions: bool = setting(True, "groc: definitional encoding (ablation, Table 3).")
    max_relations: int = setting(3, "groc: relations read per word (paper B.1: 3).", low=0, cli=False)
    max_definition_words: int = setting(10, "groc: definition words read per word (paper B.1: 10).", low=0, cli=False)
    char_emb: int = setting(16, "Character embedding size of the char-CNN.", low=1, cli=False)
    char_filters: list[tuple[int, int]] = setting(help="Char-CNN (width, filters) pairs.", cli=False,
                                                  default_factory=_default_char_filters)
    char_init: str = setting("uniform", "Initialisation of the char-CNN (groc, convolutional): 'uniform' (byte "
                             "embeddings in ±--init-range, paper B.1; PyTorch's bounds for the convolution and "
                             "highway), 'normal' (byte embeddings N(0, 1)), or 'authors' (the authors' code: byte "
                             "embeddings N(0, 1), convolution, highway and projection weights in ±0.1, no "
                             "projection bias; docs/reproduction.md, fidelity).", choices=("uniform", "normal", "authors"))
    bias_activation: str | None = setting(None, "groc: activation of the composed bias b_v = act(w·e_v + a) "
                                          "(default: --out-activation; authors' code: tanh).", choices=ACTIVATIONS)
    bias_dropout: float = setting(0.0, "groc: dropout on the composed bias's input e_v (authors' code: 0.2).",
                                  low=0, high=1, high_open=True)
    highway_layers: int = setting(1, "Highway layers after the char-CNN (groc, convolutional).", low=0)
    char_activation: str = setting("tanh", "Activation after the char-CNN's max-pool (groc, convolutional; "
                                   "authors' code: selu).", choices=ACTIVATIONS)
    highway_activation: str = setting("relu", "Activation of the highway layers' transform (groc, convolutional; "
                                      "authors' code: selu).", choices=ACTIVATIONS)
    combine: str = setting("concat", "groc: how the surface, relational and definitional encodings make e_x: "
                           "'concat', W [c; r; d] + b (paper Sec. 3.1, a 3f x d projection), or 'add', W (c + r + d) "
                           "+ b (the authors' code's default, an f x d projection).", choices=("concat", "add"))
    max_word_chars: int = setting(20, "Characters of a word the char-CNN reads.", low=1, cli=False)
    init_range: float = setting(0.05, "Uniform initialisation range (paper: 0.05).", low=0)
    update_prob: float = setting(1.0, "groc: probability a step updates output-embedding parameters (paper B.4).",
                                 low=0, high=1)
    compose_chunk: int = setting(16384, "Strings per chunk when composing without autograd.", low=1, cli=False)

    def __post_init__(self) -> None:
        # JSON turns tuples into lists; normalise so configs compare equal after a round trip.
        self.char_filters = [(int(w), int(n)) for w, n in self.char_filters]
        if self.cutoffs is not None:
            self.cutoffs = [int(c) for c in self.cutoffs]
        self.validate()

    def validate(self) -> None:
        check_fields(self)
        if not self.char_filters or any(w < 1 or n < 1 for w, n in self.char_filters):
            raise ValueError(f"char_filters must be non-empty (width, count) pairs >= 1, got {self.char_filters}")
        if self.cutoffs is not None and (
            any(c < 1 for c in self.cutoffs) or sorted(set(self.cutoffs)) != self.cutoffs
        ):
            raise ValueError(f"cutoffs must be strictly increasing positive ints, got {self.cutoffs}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ModelConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown model config fields: {', '.join(unknown)}")
        return cls(**data)
