"""The output layers by kind (the ``output`` setting): each layer class registers itself under the
names it serves and declares, as class attributes, what it needs and what it can do.

    @register_output_layer("groc")
    class GroCOutput(OutputLayer):
        needs_lexicon = True
        composes_unseen_words = True
        sparse_updates = True

Training and evaluation ask the registry (``output_layer_class(config.output).needs_lexicon``)
instead of comparing the kind's name, so a new output layer is one module under ``models/``
(imported by ``models/__init__.py``) with its settings as a ``ModelConfig`` subclass, registered
with it (``config=``); see docs/extending.md. The capabilities and their defaults are documented on ``OutputLayer``
(``common.py``).

This module imports nothing, so that ``config.py`` can take the ``output`` setting's choices from it
and the layers, which import ``config.py``, can register here without an import circle.
"""

from __future__ import annotations

from collections.abc import Sequence

# kind -> layer class, in the order the kinds were registered (the order of the ``output`` setting's choices).
_LAYERS: dict[str, type] = {}
# kind -> its settings class (a ModelConfig subclass), for kinds that have settings of their own.
_CONFIGS: dict[str, type] = {}


def register_output_layer(*kinds: str, config: type | dict[str, type] | None = None):
    """Class decorator: the decorated ``OutputLayer`` subclass serves ``output`` KIND for each
    of ``kinds`` (one class may serve several, as ``TableOutput`` does lookup, tied, bilinear and
    deep-residual). ``config`` is the kinds' settings class (a ``ModelConfig`` subclass), or one per
    kind by name; a kind without one has ``ModelConfig``'s settings only. A kind already taken by
    another class is a ValueError."""
    if not kinds or not all(isinstance(k, str) and k for k in kinds):
        raise ValueError("register_output_layer needs one or more non-empty kind names")
    configs = config if isinstance(config, dict) else {kind: config for kind in kinds if config is not None}
    if set(configs) - set(kinds):
        raise ValueError(f"config names kinds this layer does not serve: {', '.join(sorted(set(configs) - set(kinds)))}")

    def decorate(cls: type) -> type:
        for kind in kinds:
            if _LAYERS.get(kind, cls) is not cls:
                raise ValueError(f"output layer {kind!r} is already registered by {_LAYERS[kind].__qualname__}")
        for kind in kinds:
            _LAYERS[kind] = cls
            _CONFIGS.pop(kind, None)
        _CONFIGS.update(configs)
        return cls

    return decorate


def config_of(kind: str) -> type | None:
    """The settings class registered for ``kind`` (None: the kind has ModelConfig's settings only)."""
    return _CONFIGS.get(kind)


def output_layer_class(kind: str) -> type:
    """The class registered for ``output`` kind; ValueError naming the known kinds otherwise."""
    try:
        return _LAYERS[kind]
    except (KeyError, TypeError):
        raise ValueError(f"unknown output layer {kind!r}; choose from {', '.join(_LAYERS)}") from None


def output_kinds() -> tuple[str, ...]:
    """The registered kinds, in registration order."""
    return tuple(_LAYERS)


class _Kinds(Sequence):
    """A live, read-only view of the registered kinds: ``ModelConfig.output``'s choices, so that a
    layer registered after ``ModelConfig`` was defined (a plug-in, a test's) is a valid choice."""

    def __getitem__(self, index):
        return output_kinds()[index]

    def __len__(self) -> int:
        return len(_LAYERS)

    def __contains__(self, kind: object) -> bool:
        return isinstance(kind, str) and kind in _LAYERS

    def __iter__(self):
        return iter(output_kinds())

    def __repr__(self) -> str:
        return f"KINDS{output_kinds()!r}"


#: The registered output-layer kinds (a live view; ``tuple(KINDS)`` for a snapshot).
KINDS = _Kinds()
