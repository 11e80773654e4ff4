"""The output layers by kind (the ``output`` setting): each layer class registers itself under the
names it serves and declares, as class attributes, what it needs and what it can do.

    @register_output_layer("groc")
    class GroCOutput(OutputLayer):
        needs_lexicon = True
        composes_unseen_words = True
        sparse_updates = True

Training and evaluation ask the registry (``output_layer_class(config.output).needs_lexicon``)
instead of comparing the kind's name, so a new output layer is one module under ``models/`` with
its settings as a ``ModelConfig`` subclass, declared with its module in ``config.py``
(``declare_output_layers``); see docs/extending.md. The capabilities and their defaults are
documented on ``OutputLayer`` (``common.py``).

A declared kind is a choice of ``output``, with its settings, before its module is imported: the
command line offers every kind and its settings without loading torch, and the first
``output_layer_class(kind)`` imports the module, whose decorator registers the class. A layer
registered outside the package (a script, a test) is declared by its decorator.

This module imports no other module of groc_cli, so that ``config.py`` can take the ``output``
setting's choices from it and the layers, which import ``config.py``, can register here without an
import circle.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

# kind -> layer class, in the order the kinds were registered (the order of the ``output`` setting's choices).
_LAYERS: dict[str, type] = {}
# kind -> its settings class (a ModelConfig subclass), for kinds that have settings of their own.
_CONFIGS: dict[str, type] = {}
# kind -> the module that registers its layer, for the kinds declared before their module is imported (the built-in
# ones, in the order of the ``output`` setting's choices).
_DECLARED: dict[str, str] = {}


def declare_output_layers(module: str, configs: dict[str, type | None]) -> None:
    """Kinds whose layer module ``module`` (an absolute module name) registers when imported, each with its
    settings class (None: ``ModelConfig``'s settings only), known before that import."""
    for kind, config in configs.items():
        if kind in _DECLARED or kind in _LAYERS:
            raise ValueError(f"output layer {kind!r} is already declared")
        _DECLARED[kind] = module
        if config is not None:
            _CONFIGS[kind] = config


def _load(kind: str) -> None:
    """Import the module of declared ``kind`` (its decorator registers the layer)."""
    importlib.import_module(_DECLARED[kind])
    if kind not in _LAYERS:
        raise ValueError(f"module {_DECLARED[kind]} does not register output layer {kind!r}")


def register_output_layer(*kinds: str, config: type | dict[str, type] | None = None):
    """Class decorator: the decorated ``OutputLayer`` subclass serves ``output`` KIND for each
    of ``kinds`` (one class may serve several, as ``TableOutput`` does lookup, tied, bilinear and
    deep-residual). ``config`` is the kinds' settings class (a ``ModelConfig`` subclass), or one per
    kind by name; a kind without one has ``ModelConfig``'s settings only, and a declared kind has the
    settings declared with it (``config`` left out, or the same). A kind already taken by another class
    (a declared kind: by the class its module registers) is a ValueError."""
    if not kinds or not all(isinstance(k, str) and k for k in kinds):
        raise ValueError("register_output_layer needs one or more non-empty kind names")
    configs = config if isinstance(config, dict) else {kind: config for kind in kinds if config is not None}
    if set(configs) - set(kinds):
        raise ValueError(f"config names kinds this layer does not serve: {', '.join(sorted(set(configs) - set(kinds)))}")

    def decorate(cls: type) -> type:
        for kind in kinds:
            if kind in _DECLARED and configs.get(kind, _CONFIGS.get(kind)) is not _CONFIGS.get(kind):
                raise ValueError(f"output layer {kind!r} has the settings declared with it, not {configs[kind].__name__}")
            if kind in _DECLARED and kind not in _LAYERS and cls.__module__ != _DECLARED[kind]:
                _load(kind)  # another class claims a declared kind: the declared one is its owner
            if _LAYERS.get(kind, cls) is not cls:
                raise ValueError(f"output layer {kind!r} is already registered by {_LAYERS[kind].__qualname__}")
        for kind in kinds:
            _LAYERS[kind] = cls
            if kind not in _DECLARED:
                _CONFIGS.pop(kind, None)
        _CONFIGS.update(configs)
        return cls

    return decorate


def config_of(kind: str) -> type | None:
    """The settings class registered for ``kind`` (None: the kind has ModelConfig's settings only)."""
    return _CONFIGS.get(kind)


def output_layer_class(kind: str) -> type:
    """The class registered for ``output`` kind (a declared kind's module imported first); ValueError
    naming the known kinds otherwise."""
    if isinstance(kind, str) and kind in _DECLARED and kind not in _LAYERS:
        _load(kind)
    try:
        return _LAYERS[kind]
    except (KeyError, TypeError):
        raise ValueError(f"unknown output layer {kind!r}; choose from {', '.join(output_kinds())}") from None


def output_kinds() -> tuple[str, ...]:
    """The declared kinds in the order of their declaration, then the other registered kinds in the order
    of their registration."""
    return tuple(dict.fromkeys([*_DECLARED, *_LAYERS]))


class _Kinds(Sequence):
    """A live, read-only view of the registered kinds: ``ModelConfig.output``'s choices, so that a
    layer registered after ``ModelConfig`` was defined (a plug-in, a test's) is a valid choice."""

    def __getitem__(self, index):
        return output_kinds()[index]

    def __len__(self) -> int:
        return len(output_kinds())

    def __contains__(self, kind: object) -> bool:
        return isinstance(kind, str) and (kind in _DECLARED or kind in _LAYERS)

    def __iter__(self):
        return iter(output_kinds())

    def __repr__(self) -> str:
        return f"KINDS{output_kinds()!r}"


#: The registered output-layer kinds (a live view; ``tuple(KINDS)`` for a snapshot).
KINDS = _Kinds()
