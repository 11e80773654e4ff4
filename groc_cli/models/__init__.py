"""Language model with swappable output layers (paper Table 2: seven built in).

Public API: ``ModelConfig`` (``config_class(kind)``: a kind's own settings), ``Lexicon``,
``build_model``, ``LanguageModel``, ``Composed``; the output-layer registry
(``register_output_layer``, ``output_layer_class``, ``KINDS``) and the interface a layer implements
(``OutputLayer``, ``SoftmaxComposed``; docs/extending.md). See ``lm`` for the
training-step protocol.
"""

from .common import Composed, OutputLayer, SoftmaxComposed
from .config import SIZES, ModelConfig, config_class
from .lexicon import Lexicon
from .registry import KINDS, output_kinds, output_layer_class, register_output_layer

# The built-in output layers register themselves when imported; the order of these imports
# is the order of --output-layer's choices. A new layer module is imported here.
from . import tables, adaptive, convolutional, groc  # noqa: E402,F401,I001

from .lm import LanguageModel, build_model  # noqa: E402

__all__ = ["KINDS", "SIZES", "Composed", "LanguageModel", "Lexicon", "ModelConfig", "OutputLayer", "SoftmaxComposed",
           "build_model", "config_class", "output_kinds", "output_layer_class", "register_output_layer"]
