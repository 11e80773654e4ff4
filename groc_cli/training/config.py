"""Training settings (``TrainConfig``): optimisation, schedule and budget of a run (paper B.1).

Torch-free, as ``models/config.py`` is, so that the train command's help is built without loading torch;
``training.loop`` runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..errors import SettingError
from ..settings import SEED_MAX, check_fields, setting

OPTIMIZERS = ("adam", "sgd")
SCHEDULES = ("plateau", "epochs")


@dataclass
class TrainConfig:
    """Optimisation, schedule and budget of a training run (paper B.1). Each field is one
    setting: its flag, help and bounds are generated from it (groc_cli/settings.py)."""

    optimizer: str = setting("adam", "Optimizer: 'adam' (paper B.1) or 'sgd', plain SGD without momentum (Zaremba et al. "
                             "2014; Press & Wolf's small models).", choices=OPTIMIZERS)
    lr: float = setting(1e-3, "Learning rate (paper B.1: Adam 1e-3). The loss is a per-token mean: the SGD rate 1.0 of "
                        "code that sums the loss over BPTT steps (Zaremba et al.'s) is `lr` 1.0×BPTT here.",
                        low=0, low_open=True)
    batch_size: int = setting(20, "Parallel streams per step (paper: 20).", low=1)
    eval_batch_size: int = setting(10, "Streams for validation, each from a zero state: on a small valid split "
                                   "its perplexity differs from that of 'groc eval', which reads one stream; 1 "
                                   "gives the same.", low=1)
    bptt: int = setting(35, "Unrolled steps (paper: 35).", low=1)
    clip: float = setting(0.1, "Gradient-norm clip (paper: 0.1; 0 disables). Of the per-token mean loss's gradient: "
                          "a clip c of a loss summed over BPTT steps is c/BPTT here.", low=0)
    max_epochs: int = setting(100, "Most epochs (early stopping usually ends sooner).", low=1)
    schedule: str = setting("plateau", "Learning-rate schedule: 'plateau' (paper B.1: × `lr_decay` after `lr_patience` "
                            "epochs without validation improvement) or 'epochs' (Zaremba et al.: × `lr_decay` after "
                            "every epoch once `lr_decay_after` epochs have passed).", choices=SCHEDULES)
    lr_decay: float = setting(0.1, "Learning-rate factor of a decay (paper B.1: 0.1; Zaremba et al.'s small model: 0.5).",
                              low=0, high=1, low_open=True)
    lr_patience: int = setting(4, "plateau schedule: epochs without validation improvement before decaying the learning "
                               "rate (paper: 4).", low=1)
    lr_decay_after: int = setting(4, "epochs schedule: epochs before the decays start; the learning rate is multiplied "
                                  "by `lr_decay` at the end of each later epoch (Zaremba et al.'s code and the "
                                  "TensorFlow tutorial: 4, so epochs 1-5 run at the full rate, epoch 6 at half).", low=0)
    patience: int = setting(8, "Epochs without validation improvement before stopping (paper: 8).", low=1)
    max_tokens: int | None = setting(None, "Stop after this many training tokens.", low=1)
    max_minutes: float | None = setting(None, "Stop after this many minutes of training.", low=0, low_open=True)
    weight_decay: float = setting(0.0, "The optimizer's L2 penalty on every parameter (authors' code, Adam: 1.2e-6).",
                                  low=0)
    adam_eps: float = setting(1e-8, "Adam's epsilon (authors' code: 1e-9).", low=0, low_open=True)
    ar_alpha: float = setting(0.0, "Activation regularization α·mean(h²) on the last LSTM layer's dropped output "
                              "(Merity et al. 2018; authors' code: 2).", low=0)
    tar_beta: float = setting(0.0, "Temporal activation regularization β·mean((h_t − h_{t−1})²) on the last layer's "
                              "output before dropout (authors' code: 1).", low=0)
    seed: int = setting(1, "Seed for initialisation, dropout and `update_prob` draws.", low=0, high=SEED_MAX)
    graph: bool = setting(True, "On CUDA, run each training step and each validation chunk as one captured CUDA graph "
                          "(the same computation, launched at once; training/graphed.py); off, kernels are launched "
                          "one by one. Ignored on CPU, and where a step cannot be captured (the log says why).")
    amp: bool = setting(False, "bfloat16 mixed precision (autocast) for training and its validation, on CUDA and on "
                        "CPU. On a CPU with AMX, GroC's step (paper-size encoder, 2 x 200, PTB) is about 1.6x faster and "
                        "tied's 1.4x (docs/benchmarks.md); on one without bfloat16 instructions (AMX, AVX512_BF16) "
                        "torch emulates them, and the run warns. Off by default: the convolutional "
                        "output layer diverged under it at the paper's size (docs/reproduction.md).")
    checkpoint_every: int = setting(0, "Also checkpoint every N steps (0: at epoch ends).", low=0)
    checkpoint_minutes: float = setting(5.0, "Also checkpoint when N minutes of training have passed since the last "
                                        "checkpoint (0: never by time), so that a crash or a killed job loses at most "
                                        "that much of an epoch.", low=0)
    log_every: int = setting(100, "Steps between progress lines when stderr is not a terminal.", low=1)
    log_seconds: float = setting(60.0, "When stderr is not a terminal, also a progress line after N seconds without "
                                 "one (0: every `log_every` steps only).", low=0)
    deterministic: bool = setting(False, "Deterministic kernels (slower on GPU).", negation=False)

    def __post_init__(self) -> None:
        check_fields(self)
        # A setting of the other optimizer or schedule would be silently ignored: refuse it.
        for name, owner, chosen in (("adam_eps", "adam", self.optimizer), ("lr_patience", "plateau", self.schedule),
                                    ("lr_decay_after", "epochs", self.schedule)):
            if chosen != owner and getattr(self, name) != _DEFAULTS[name]:
                which = "optimizer" if owner in OPTIMIZERS else "schedule"
                raise SettingError(f"{name} is a setting of {which} {owner}, not of {chosen}")

    def lr_after_epoch(self, epoch: int) -> float | None:
        """The epochs schedule's learning rate for the epoch after ``epoch`` (1-based); None for plateau,
        whose decays follow the validation perplexity."""
        if self.schedule != "epochs":
            return None
        return self.lr * self.lr_decay ** max(0, epoch - self.lr_decay_after)

    @classmethod
    def from_dict(cls, data: dict) -> "TrainConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


_DEFAULTS = {f.name: f.default for f in fields(TrainConfig)}
