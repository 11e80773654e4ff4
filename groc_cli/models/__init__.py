"""Language model with swappable output layers (paper Table 2: seven built in).

Public API: ``ModelConfig`` (``config_class(kind)``: a kind's own settings), ``Lexicon``,
``build_model``, ``LanguageModel``, ``Composed``; the output-layer registry
(``register_output_layer``, ``output_layer_class``, ``KINDS``) and the interface a layer implements
(``OutputLayer``, ``SoftmaxComposed``; docs/extending.md). See ``lm`` for the
training-step protocol.

Importing the package loads no torch: the settings, the lexicon and the registry are torch-free,
and the rest is imported on first use (``groc_cli.models.build_model``), as each output layer's
module is on the first ``output_layer_class`` of its kind. So a command's help, built from the
settings, starts without torch.
"""

from __future__ import annotations

from ..lazy import lazy_exports
from .config import SIZES, ModelConfig, config_class
from .lexicon import Lexicon
from .registry import KINDS, output_kinds, output_layer_class, register_output_layer

# name -> the module that defines it, imported on first use (torch).
_LAZY = {"Composed": "common", "OutputLayer": "common", "SoftmaxComposed": "common", "LanguageModel": "lm",
         "build_model": "lm"}
__getattr__ = lazy_exports(__name__, _LAZY)

__all__ = ["KINDS", "SIZES", "Composed", "LanguageModel", "Lexicon", "ModelConfig", "OutputLayer", "SoftmaxComposed",
           "build_model", "config_class", "output_kinds", "output_layer_class", "register_output_layer"]
