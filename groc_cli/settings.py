"""Settings that exist once: a dataclass field carries its default, help, flag, choices and
bounds; the command-line options are generated from the fields (as fairseq's
`gen_parser_from_dataclass`), and a config file or `key=value` overrides fill the same fields
(as torchtune's configs). GUIDE 11.

    lr: float = setting(1e-3, "Adam learning rate (paper B.1: 1e-3).", low=0, low_open=True)

The library validates with `check_fields` and names the setting in its messages ("lr must
be ..."); the commands say the flag instead (`commands/_settings.py`).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from pathlib import Path
from typing import Any, Callable

from .errors import SettingError
from .json_input import parse_json
from .formats import RUN_FORMAT

MISSING = dataclasses.MISSING


def setting(default: Any = MISSING, help: str = "", *, flag: str | None = None, short: str | None = None,
            negation: bool | str = True, choices: tuple | None = None, low: float | None = None, high: float | None = None,
            low_open: bool = False, high_open: bool = False, parse: Callable[[str], Any] | None = None,
            default_factory: Callable[[], Any] | None = None, cli: bool = True,
            check: Callable[[Any], Any] | None = None, metavar: str | None = None) -> Any:
    """A dataclass field with what the command line and validation need to know about it.

    flag: the option's name (default: two dashes, then the field name with dashes); short: a
    one-letter alias ("-j"); negation: booleans get an option and its negative ("no-" before the
    name), or the negative's own name ("keep-case", which the option spells with two dashes),
    or (False) a plain switch; choices: allowed values; low/high: bounds
    (`*_open`: strict); parse: turns the option's text into the value (e.g. "2k,7k" into
    [2000, 7000]); cli False: settable from a config file only; check: takes a value that is
    not None and returns it as the field keeps it (JSON's lists back into tuples), or raises
    ValueError("must be ...") without the name, which `check_fields` puts first; metavar: what
    the option's help shows for its value (a word list, a directory or 'model')."""
    meta = {"help": help, "flag": flag, "short": short, "negation": negation, "choices": choices, "low": low, "high": high,
            "low_open": low_open, "high_open": high_open, "parse": parse, "cli": cli, "check": check, "metavar": metavar}
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata={"groc": meta})
    return dataclasses.field(default=default, metadata={"groc": meta})


def same_as(cls: type, name: str, help: str | None = None) -> Any:
    """The setting ``name`` declared by ``cls``, for another stage's settings that mean the same
    thing: a field with its default, help and bounds, declared once (dump's chunk is eval's);
    ``help`` says what it means for that stage instead (generate's prompts for score's lines)."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    metadata = f.metadata if help is None else {"groc": {**meta(f), "help": help}}
    return dataclasses.field(default=f.default, default_factory=f.default_factory, metadata=metadata)


def meta(f: dataclasses.Field) -> dict:
    return f.metadata.get("groc", {})


def flag_of(f: dataclasses.Field) -> str:
    return meta(f).get("flag") or "--" + f.name.replace("_", "-")


def default_of(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not MISSING else f.default


def check_fields(obj: Any) -> None:
    """Each field's choices, bounds and check (whose value the field then keeps); NaN and
    infinities fail every bound. Raises SettingError (a ValueError) naming the field first."""
    types_of = None
    for f in dataclasses.fields(obj):
        m, value = meta(f), getattr(obj, f.name)
        if value is None or not m:
            continue
        if types_of is None:
            types_of = _hints_or_empty(type(obj))
        check_type(f.name, value, types_of.get(f.name))
        if m.get("check") is not None:
            try:
                value = m["check"](value)
            except SettingError:  # a check that names its settings itself
                raise
            except (ValueError, TypeError) as exc:
                raise SettingError(f"{f.name} {exc}") from None
            setattr(obj, f.name, value)
        if m["choices"] is not None and value not in m["choices"]:
            raise SettingError(f"{f.name} must be one of {', '.join(map(str, m['choices']))}, got {value!r}")
        if (m["low"] is None and m["high"] is None) or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        below = m["low"] is not None and not (value > m["low"] if m["low_open"] else value >= m["low"])
        above = m["high"] is not None and not (value < m["high"] if m["high_open"] else value <= m["high"])
        if below or above or (isinstance(value, float) and not math.isfinite(value)):
            raise SettingError(f"{f.name} must be {_range(m)}, got {value}")


def _range(m: dict) -> str:
    low, high = _number(m["low"]), _number(m["high"])
    if m["low"] is not None and m["high"] is not None:
        return f"in {'(' if m['low_open'] else '['}{low}, {high}{')' if m['high_open'] else ']'}"
    if m["low"] is not None:
        return f"a finite number {'>' if m['low_open'] else '>='} {low}"
    return f"a finite number {'<' if m['high_open'] else '<='} {high}"


def _number(value) -> str:
    return str(value) if value is None or isinstance(value, int) else f"{value:g}"


#: The largest seed: torch's generators take an unsigned 64-bit seed (a larger one was a raw
#: "Overflow when unpacking long long").
SEED_MAX = 2**64 - 1

#: What a setting of a simple type accepts, with the words its message uses. The command line
#: parses its text into these; the Python API passes values as they are, and a str where an int
#: belongs reached torch ("manual_seed expected a long, but got str").
_SIMPLE_TYPES: dict[type, tuple[Callable[[Any], bool], str]] = {
    bool: (lambda v: isinstance(v, bool), "True or False"),
    int: (lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number"),
    float: (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number"),
    str: (lambda v: isinstance(v, str), "a str"),
    Path: (lambda v: isinstance(v, (str, Path)), "a path (str or Path)"),
}


def _hints_or_empty(cls: type) -> dict[str, Any]:
    try:
        return hints(cls)
    except Exception:  # a hint that does not resolve checks nothing, as before
        return {}


def check_type(name: str, value: Any, hint: Any) -> None:
    """SettingError unless ``value`` (not None) is of ``hint``'s simple type (int, float, bool, str,
    Path, or a union of them with None); other hints accept anything."""
    if value is None:
        return
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union else (hint,)
    options = [t for t in options if t is not type(None)]
    if not options or not all(t in _SIMPLE_TYPES for t in options):
        return
    if any(_SIMPLE_TYPES[t][0](value) for t in options):
        if isinstance(value, str) and "\x00" in value:
            raise SettingError(f"{name} must not contain a NUL character, got {value!r}")
        return
    raise SettingError(f"{name} must be {' or '.join(_SIMPLE_TYPES[t][1] for t in options)}, got "
                       f"{type(value).__name__} {value!r}"[:200])


def all_fields(cls: type) -> list[dataclasses.Field]:
    """The settings (fields declared with `setting`) of ``cls``, or, for a class whose settings are
    spread over several (``settings_classes()``: ModelConfig's kinds, EvalSettings' caches), of
    each of those once (in the order of ``cls.in_order`` where it has one: EvalSettings' caches after
    its cache weight); a name two of them declare differently is a TypeError."""
    classes = cls.settings_classes() if hasattr(cls, "settings_classes") else [cls]
    seen: dict[str, dataclasses.Field] = {}
    for c in classes:
        for f in dataclasses.fields(c):
            if not meta(f):
                continue
            first = seen.setdefault(f.name, f)
            if first is not f and (default_of(first), meta(first)) != (default_of(f), meta(f)):
                raise TypeError(f"{c.__name__} declares the setting {f.name!r} again; declare it once, in a "
                                "mixin that the classes sharing it inherit")
    return cls.in_order(list(seen.values())) if hasattr(cls, "in_order") else list(seen.values())


def cli_fields(cls: type) -> list[dataclasses.Field]:
    return [f for f in all_fields(cls) if meta(f).get("cli")]


def hints(cls: type) -> dict[str, Any]:
    if hasattr(cls, "settings_classes"):
        return {k: v for c in reversed(cls.settings_classes()) for k, v in typing.get_type_hints(c).items()}
    return typing.get_type_hints(cls)


def help_of(cls: type, f: dataclasses.Field) -> str:
    """A setting's help, after the kinds it belongs to where only some have it ("adaptive: Bin edges ...")."""
    scope = cls.setting_scope(f.name) if hasattr(cls, "setting_scope") else None
    return f"{scope}: {meta(f)['help']}" if scope else meta(f)["help"]


# -- config files and key=value overrides ---------------------------------------------------------

def toml_loads(text: str) -> dict:
    """TOML text as a dict: Python 3.11's tomllib, or on 3.10 tomli, the package it came from
    (a dependency there), imported only when a TOML file is read."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads(text)


def read_config(path: Path) -> tuple[dict, bool]:
    """A JSON or TOML file of settings: flat (`lr = 0.001`) or in sections (`[train]`, `[model]`;
    a run's own config.json is one). Returns ({section or "": {name: value}}, whether the file is a
    run's config.json)."""
    path = Path(path)
    kind = "TOML" if path.suffix == ".toml" else "JSON"
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"`config` {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"`config` {path} is not {kind} text: byte {exc.start} is not UTF-8 (a binary file?)") from None
    try:
        if path.suffix == ".toml":
            data = toml_loads(text)
        else:
            data = parse_json(text)
    except RecursionError:  # tomllib recurses into nested arrays and tables
        raise ValueError(f"`config` {path} is not valid TOML (nested too deeply)") from None
    except ValueError as exc:
        raise ValueError(f"`config` {path} is not valid {kind} ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"`config` {path} must hold a table of settings")
    from_run = data.get("format") == RUN_FORMAT
    if from_run:  # a run's config.json: its settings are its sections
        data = {k: v for k, v in data.items() if isinstance(v, dict)}
    return data, from_run


def config_entries(data: dict, from_run: bool, sections: dict[str, type], fixed: tuple = ()) -> list[tuple[str, Any]]:
    """The settings a config file gives a command whose settings are ``sections`` ({name: class}), as
    (key, value) with key "section.name" or a flat "name". A table that is none of the command's
    sections (a misspelt ``[trian]``, a ``[train]`` in an eval config) or one of its ``fixed``
    sections (finetune's model) is a ValueError naming it, as an unknown flat key is: a setting
    silently dropped would run something the user did not ask for. A run's own config.json
    (``from_run``) describes the run as well: its other tables are left out, not refused."""
    entries = []
    for key, value in data.items():
        if not isinstance(value, dict):
            entries.append((key, value))
        elif key in sections and key not in fixed:
            entries.extend((f"{key}.{name}", inner) for name, inner in value.items())
        elif not from_run:
            if key in fixed:
                raise ValueError(f"section [{key}] cannot be set here: this command takes its {key} settings from "
                                 "its run; remove the section")
            offered = ", ".join(f"[{name}]" for name in sections if name not in fixed) or "none"
            raise ValueError(f"unknown section [{key}]: this command reads {offered} (or flat settings); "
                             "rename or remove it")
    return entries


def kind_applies(cls: type, values: dict) -> set[str] | None:
    """The settings of ``cls`` that apply to the kind ``values`` choose, for a class whose settings
    depend on a kind (``KIND_SETTING`` and ``kind_settings``: a model's output layer, eval's cache);
    None where all apply."""
    if not hasattr(cls, "kind_settings"):
        return None
    return cls.kind_settings(values.get(cls.KIND_SETTING))


def inapplicable(cls: type, values: dict, explicit: set[str]) -> tuple[str, str] | None:
    """The first setting in ``explicit`` (given by a flag, a file or an override) that the chosen
    kind does not take, with the kinds that do take it; settings left at their defaults are removed
    from ``values`` instead (they would be dropped, and nobody asked for them)."""
    applies = kind_applies(cls, values)
    if applies is None:
        return None
    for name in [n for n in values if n not in applies]:
        if name in explicit:
            return name, cls.kinds_with_setting(name)
        del values[name]
    return None


def parse_override(text: str) -> tuple[str, str]:
    name, eq, value = text.partition("=")
    if not eq or not name.strip():
        raise ValueError(f"{text!r} is not a KEY=VALUE override (e.g. lr=0.0005 or train.lr=0.0005)")
    return name.strip(), value.strip()


def coerce(cls: type, name: str, value: Any) -> Any:
    """A value from a file or an override, as the field wants it (text through the field's parse,
    JSON-like text to numbers, booleans and lists)."""
    f = next(f for f in all_fields(cls) if f.name == name)
    hint = hints(cls)[name]
    if isinstance(value, str):
        if meta(f).get("parse") is not None:
            return meta(f)["parse"](value)
        if hint is not str:
            lowered = value.lower()
            if lowered in ("true", "false"):
                value = lowered == "true"
            else:
                try:
                    value = parse_json(value)
                except ValueError:
                    pass
    return _typed(hint, value)


def _typed(hint: Any, value: Any) -> Any:
    """`value` if it fits the field's type (an int fits a float field), else ValueError."""
    if value is None:
        return
    options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    if value is None and type(None) in options:
        return None
    for option in options:
        base = typing.get_origin(option) or option
        if base is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if base is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if base in (bool, str, list, tuple, dict) and isinstance(value, base):
            return value
        if base is list and isinstance(value, tuple):
            return list(value)
        if base is Path and isinstance(value, (str, Path)):
            return Path(value)
    wanted = " or ".join(getattr(typing.get_origin(o) or o, "__name__", str(o)) for o in options)
    raise ValueError(f"expected {wanted}, got {value!r}")
