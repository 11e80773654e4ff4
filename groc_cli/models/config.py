"""Model configuration shared by every output-layer kind.

Every field has a default so that ``ModelConfig(**json.load(f))`` round-trips the
``dataclasses.asdict`` of a config written by an earlier stage.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

KINDS = ("lookup", "tied", "bilinear", "deep-residual", "adaptive", "convolutional", "groc")
ACTIVATIONS = ("relu", "selu", "tanh")


def _default_char_filters() -> list[tuple[int, int]]:
    # 256 filters of widths 1-5: about a quarter of the FLOPs of the Józefowicz et al.
    # (2016) bank while still covering affixes; the highway layer and the 3d x d
    # projection after it dominate the cost of composition (see benchmarks/).
    return [(1, 32), (2, 32), (3, 64), (4, 64), (5, 64)]


@dataclass
class ModelConfig:
    """Hyperparameters of the prefix LSTM and the output layer (paper Tables 7-8)."""

    output: str = "tied"
    emb: int = 300
    hidden: int = 1024
    layers: int = 2
    dropout: float = 0.65
    emb_dropout: float = 0.0
    out_dropout: float = 0.0
    out_depth: int = 1
    out_activation: str = "relu"
    projection_reg: float = 0.0
    cutoffs: list[int] | None = None
    adaptive_div: float = 4.0
    correction: int = 128
    relations: bool = True
    definitions: bool = True
    max_relations: int = 3  # paper B.1
    max_definition_words: int = 10  # paper B.1
    char_emb: int = 16
    char_filters: list[tuple[int, int]] = field(default_factory=_default_char_filters)
    highway_layers: int = 1
    max_word_chars: int = 20
    init_range: float = 0.05
    update_prob: float = 1.0
    compose_chunk: int = 16384  # strings per chunk when composing without autograd

    def __post_init__(self) -> None:
        # JSON turns tuples into lists; normalise so configs compare equal after a round trip.
        self.char_filters = [(int(w), int(n)) for w, n in self.char_filters]
        if self.cutoffs is not None:
            self.cutoffs = [int(c) for c in self.cutoffs]
        self.validate()

    def validate(self) -> None:
        if self.output not in KINDS:
            raise ValueError(f"output must be one of {', '.join(KINDS)}, got {self.output!r}")
        if self.out_activation not in ACTIVATIONS:
            raise ValueError(f"out_activation must be one of {', '.join(ACTIVATIONS)}, got {self.out_activation!r}")
        for name in ("emb", "hidden", "layers", "char_emb", "max_word_chars", "compose_chunk"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.out_depth <= 4:
            raise ValueError(f"out_depth must be in 0..4 (paper Table 7), got {self.out_depth}")
        for name in ("dropout", "emb_dropout", "out_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if not 0.0 <= self.update_prob <= 1.0:
            raise ValueError(f"update_prob must be in [0, 1], got {self.update_prob}")
        if not self.projection_reg >= 0 or self.projection_reg == float("inf"):
            raise ValueError(f"projection_reg must be >= 0, got {self.projection_reg}")
        if not 0 <= self.init_range < float("inf"):
            raise ValueError(f"init_range must be a finite number >= 0, got {self.init_range}")
        if not 1 <= self.adaptive_div < float("inf"):
            raise ValueError(f"adaptive_div must be >= 1, got {self.adaptive_div}")
        for name in ("correction", "highway_layers"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
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
