"""``groc eval``'s settings (and ``groc dump``'s, ``DumpSettings``): its own fields here, each registered cache's from the cache's own
Settings dataclass (``caches.registry``), all given flat: ``EvalSettings(cache="local", theta=0.5)``.
Messages name the settings in backticks (``errors``): the API's users read names, the command flags.

The command-line options are generated from both (``commands/eval.py``); ``as_dict`` lists
every setting, the caches' after ``cache_weight``, as in the JSON summary's ``settings``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..caches import CACHE_KINDS, setting_fields
from ..caches.registry import grid_name
from ..errors import SettingError
from ..settings import check_fields, default_of, flag_of, same_as, setting

#: The values of ``vocab``: the model's closed vocabulary, or its union with the split's types.
VOCAB_MODES = ("model", "union")

#: Fields of EvalSettings that are not settings.
_STATE = ("caches",)


@dataclass(init=False)
class EvalSettings:
    """Every ``groc eval`` setting; keyword arguments name any of them, the caches' included.

    ``caches`` holds the registered caches' settings by name (one value for a setting several
    caches declare); ``of(cls)`` is one cache's Settings. What the evaluation decides from them
    (the default uniform weight, the parsed ``grid``) is its plan's (``perplexity.EvalPlan``)."""

    split: str = setting("test", "Split to evaluate: train, valid or test (default: test, or the split of `states`).")
    vocab: str = setting("model", "model: closed vocabulary, unknown words -> <unk> (default, or that of `states`). "
                         "union: the model's vocabulary plus every type of the split (paper 5.1).")
    uniform_weight: float | None = setting(None, "u in p = (1-u) p_model + u/|vocab|. Default 0.01 for table models "
                                           "with `vocab` union (they give new words no mass), else 0.")
    downweight_new: float = setting(1.0, "GroC, `vocab` union: multiply the probability of words outside the training "
                                    "vocabulary by F and renormalise (before any cache).")
    cache: str = setting("none", "none or a registered cache kind (the option's help: ``option_help``).")
    cache_weight: float = setting(0.1, "w in p = (1-w) p_model + w p_cache: the cache's share. Grave et al. 2017c's λ "
                                  "is this share; the GroC paper's λ is 1 minus it.")
    grid: str | None = setting(None, "Cache settings scored in one pass (the option's help: ``option_help``).")
    lexicon: Path | None = setting(None, "GroC: use this lexicon table instead of the run's own, for every word "
                                   "(other coverage, Table 4; relations of new words in `vocab` union). Words it has "
                                   "no row for are composed from characters alone, counted in one warning.")
    checkpoint: str = setting("best", "best or last.")
    chunk: int = setting(256, "Positions run through the LSTM at once (results do not depend on it).")
    device: str = setting("auto", "auto, cpu, cuda or cuda:N.")
    caches: dict = dataclasses.field(default_factory=dict)

    def __init__(self, **values: Any):
        for f in dataclasses.fields(self):
            if f.name not in _STATE:
                setattr(self, f.name, values.pop(f.name, default_of(f)))
        self.caches = {f.name: values.pop(f.name, default_of(f)) for f, _ in setting_fields()}
        if values:
            raise TypeError(f"EvalSettings got an unexpected keyword argument {next(iter(values))!r}")

    def __getattr__(self, name: str) -> Any:  # only for names that are not attributes: the caches'
        caches = self.__dict__.get("caches", {})
        if name in caches:
            return caches[name]
        raise AttributeError(f"EvalSettings has no setting {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.__dict__.get("caches", {}):
            self.caches[name] = value
        else:
            super().__setattr__(name, value)

    #: The setting that picks which caches' settings apply (``settings.kind_applies``).
    KIND_SETTING = "cache"

    #: Eval's own settings that mix in a cache: without one (``cache="none"``) they mean nothing.
    CACHE_MIXING = ("cache_weight",)

    @classmethod
    def kind_settings(cls, kind: str | None) -> set[str]:
        """Eval's own settings and those of cache ``kind`` (none: no cache's, nor the cache's
        weight): ``knn`` with ``cache="local"`` is refused, not dropped."""
        own = {f.name for f in dataclasses.fields(cls) if f.name not in _STATE}
        chosen = CACHE_KINDS.get(kind)
        if chosen is None:
            return own - set(cls.CACHE_MIXING)
        return own | {f.name for f in dataclasses.fields(chosen.Settings)}

    @classmethod
    def kinds_with_setting(cls, name: str) -> str:
        return ", ".join(kind for kind, c in CACHE_KINDS.items()
                         if name in cls.CACHE_MIXING or name in {f.name for f in dataclasses.fields(c.Settings)})

    @classmethod
    def in_order(cls, fields: list[dataclasses.Field]) -> list[dataclasses.Field]:
        """Its settings (``fields``) in the order of its options and ``as_dict``: the caches' after
        ``cache_weight``, in the registry's order (``setting_fields``)."""
        own = [f.name for f in dataclasses.fields(cls) if f.name not in _STATE]
        caches = [f.name for f, _ in setting_fields()]
        clash = sorted(set(own) & set(caches))
        if clash:
            raise TypeError(f"a cache's setting {clash[0]!r} is also a groc eval setting; rename it")
        by_name = {f.name: f for f in fields}
        at = own.index("cache_weight") + 1
        return [by_name[name] for name in own[:at] + caches + own[at:] if name in by_name]

    @classmethod
    def settings_classes(cls) -> list[type]:
        """EvalSettings and each registered cache's Settings: every setting of groc eval
        (``settings.all_fields``; a config file or KEY=VALUE may name any)."""
        return [cls, *(kind.Settings for kind in CACHE_KINDS.values())]

    def of(self, cls: type) -> Any:
        """The Settings of cache class ``cls`` (defaults for one registered after these settings)."""
        return cls.Settings(**{f.name: self.caches.get(f.name, default_of(f)) for f in dataclasses.fields(cls.Settings)})

    def as_dict(self) -> dict:
        d: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name not in _STATE:
                d[f.name] = getattr(self, f.name)
            if f.name == "cache_weight":
                d.update(self.caches)
        return {k: str(v) if isinstance(v, Path) else v for k, v in d.items()}


#: The dtypes ``groc dump`` stores hidden states in.
DTYPES = ("float16", "float32")


@dataclass
class DumpSettings:
    """What ``groc dump`` writes of a run on a split; its command-line options are generated from
    these fields (``commands/dump.py``). ``DumpSettings(split="valid", vocab="union")``."""

    split: str = setting(help="Split to dump: train, valid or test.")
    vocab: str = setting("model", "model or union (as 'groc eval --vocab'); union also stores each position's "
                         "probability mass on new words (GroC) for `downweight_new`.", choices=VOCAB_MODES)
    dtype: str = setting("float16", "Hidden states as float16 (half the disk; caches then see rounded states) or "
                         "float32 (same results as 'groc eval' without `states`).", choices=DTYPES)
    checkpoint: str = setting("best", "Which weights of the run: best (lowest validation perplexity) or last.",
                              choices=("best", "last"))
    chunk: int = same_as(EvalSettings, "chunk")
    device: str = same_as(EvalSettings, "device")
    lexicon: Path | None = setting(None, "GroC: use this lexicon table instead of the run's own (recorded in "
                                   "meta.json).")

    def __post_init__(self) -> None:
        check_fields(self)


def flags() -> dict[str, str]:
    """Each setting's flag by its name: EvalSettings' and every registered cache's."""
    fields = [f for f in dataclasses.fields(EvalSettings) if f.name not in _STATE]
    return {f.name: flag_of(f) for f in fields + [f for f, _ in setting_fields()]}


def cache_kinds() -> tuple[str, ...]:
    """The values of ``cache``: none and every registered kind."""
    return ("none", *CACHE_KINDS)


def line_cache_kinds() -> tuple[str, ...]:
    """The caches of ``groc score`` and ``load_run``, which score lines as they come: none and every
    registered kind that does not need the stream's length first (``needs_length``)."""
    return ("none", *(kind for kind, cls in CACHE_KINDS.items() if not cls.needs_length))


def cache_setting_names(kinds) -> set[str]:
    """The settings of the registered caches ``kinds`` (those of ``groc score``'s caches)."""
    return {f.name for kind in kinds for f in dataclasses.fields(CACHE_KINDS[kind].Settings)}


def option_help() -> dict[str, str]:
    """The help of ``cache`` and ``grid``, which list the registered caches and their grid settings."""
    kinds = [f"{kind} ({cls.source})" if cls.source else kind for kind, cls in CACHE_KINDS.items()]
    names = [f"{', '.join(grid_name(f) for f in dataclasses.fields(cls.Settings) if f.name in cls.grid)} ({kind})"
             for kind, cls in CACHE_KINDS.items() if cls.grid]
    return {"cache": f"none, {', '.join(kinds[:-1])} or {kinds[-1]}.",
            "grid": "Score every combination in one pass, e.g. 'cache-weight=0.05,0.1;theta=0.1,0.5'. Names: cache-weight "
                    f"(any cache), {', '.join(names)}; the others keep their flag's value."}


def check_unit(name: str, value: float | None, low_open: bool = False) -> None:
    """Setting ``name``'s weight in [0, 1] (``low_open``: in (0, 1]); None passes."""
    if value is None:
        return
    ok = (0.0 < value <= 1.0) if low_open else (0.0 <= value <= 1.0)
    if not ok or math.isnan(value):
        raise SettingError(f"`{name}` {value}: must be in {'(0, 1]' if low_open else '[0, 1]'}")


def check_vocab(vocab: str) -> None:
    """Setting ``vocab``, one of VOCAB_MODES (``groc eval``'s and ``groc dump``'s check)."""
    if vocab not in VOCAB_MODES:
        raise SettingError(f"`vocab` {vocab!r}: expected one of {', '.join(VOCAB_MODES)}")


def check_reading(checkpoint: str, chunk: int) -> None:
    """The settings by which ``groc eval`` and ``groc dump`` read a run's checkpoint (one check for both)."""
    if checkpoint not in ("best", "last"):
        raise SettingError(f"`checkpoint` {checkpoint!r}: expected best or last")
    if chunk < 1:
        raise SettingError(f"`chunk` {chunk}: must be >= 1")


def check_split(dataset, split: str) -> None:
    """Setting ``split`` names one of ``dataset``'s splits (eval's and dump's check)."""
    if not dataset.has_split(split):
        have = ", ".join(dataset.manifest["splits"]) or "none"
        raise SettingError(f"dataset {dataset.path} has no {split} split (it has: {have}); choose another `split`")
