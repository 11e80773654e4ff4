"""Language model with seven swappable output layers (paper Table 2).

Public API: ``ModelConfig``, ``Lexicon``, ``build_model``, ``LanguageModel``,
``Composed``. See ``lm`` for the training-step protocol.
"""

from .common import Composed
from .config import KINDS, ModelConfig
from .lexicon import Lexicon
from .lm import LanguageModel, build_model

__all__ = ["KINDS", "Composed", "LanguageModel", "Lexicon", "ModelConfig", "build_model"]
