"""Command-line options generated from settings dataclasses (groc_cli/settings.py), and the
resolution of a command's settings: defaults < --config FILE < flags given < KEY=VALUE."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape

from .. import settings as S
from ..errors import SETTING_NAME, GrocError, SettingError


def with_settings(*classes: type, defaults: dict | None = None, helps: dict | None = None, skip: tuple = (),
                  after: str | None = None, only: dict | None = None):
    """Decorate a command function: one typer option per command-line field of each class, after
    the function's own parameters (or after its parameter ``after``, its input and output paths,
    for --help to list the settings before --force and --json); the command receives them as
    keyword arguments. `defaults` and `helps` replace a field's default or help for this command
    (finetune's 3 epochs); `only` ({class: names}) offers some of a class's settings (score's of
    eval's: the caches that score lines). An own option declared with ``placed_after`` is listed
    after that setting's option (eval's --grid-out after --grid).

    Returns a new function (the decorated one is left as it is): a command whose options depend on
    a registry (eval's caches) is decorated when it is registered, and a command with settings in
    two places in its --help stacks two decorators (generate's)."""
    defaults, helps, only = defaults or {}, helps or {}, only or {}

    def decorate(fn):
        signature = inspect.signature(fn, eval_str=True)
        own = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        # The flags a help may name, known without importing every settings class (prepare's
        # --help, which loads no torch): the command's own options', then its fields'.
        names = {p.name: max(p.default.param_decls, key=len) for p in own
                 if getattr(p.default, "param_decls", None)}
        names.update({f.name: S.flag_of(f) for cls in classes for f in S.all_fields(cls)})
        generated = []
        for cls in classes:
            hints = S.hints(cls)
            for f in S.cli_fields(cls):
                if f.name in skip or (cls in only and f.name not in only[cls]):
                    continue
                generated.append(_parameter(f, hints[f.name], defaults.get(f.name, S.default_of(f)),
                                            helps.get(f.name, S.help_of(cls, f)), names))
        at = len(own) if after is None else [p.name for p in own].index(after) + 1
        rest = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own[at:]]
        parameters = own[:at] + _placed(generated, rest)

        @functools.wraps(fn)
        def command(*args, **kwargs):
            return fn(*args, **kwargs)

        command.__signature__ = signature.replace(parameters=parameters)
        command.__annotations__ = {p.name: p.annotation for p in parameters}
        return command

    return decorate


def placed_after(setting: str, option: Any) -> Any:
    """A command's own ``option``, listed in --help right after the option of ``setting`` (one of
    the settings ``with_settings`` generates), not with the command's other own options."""
    option.placed_after = setting
    return option


def _placed(generated: list[inspect.Parameter], rest: list[inspect.Parameter]) -> list[inspect.Parameter]:
    """The generated options, each followed by the own options placed after it, then the other own options."""
    placed = [p for p in rest if getattr(p.default, "placed_after", None)]
    missing = {p.default.placed_after for p in placed} - {p.name for p in generated}
    if missing:
        raise TypeError(f"an option is placed after {sorted(missing)[0]!r}, which is not a setting of this command")
    ordered = []
    for p in generated:
        ordered += [p, *(q for q in placed if q.default.placed_after == p.name)]
    return ordered + [p for p in rest if p not in placed]


def settings_of(ctx, cls: type, values: dict) -> Any:
    """``cls`` built from the values of its options among ``values`` (a command's generated
    options), its checks' messages naming flags."""
    names = {f.name for f in S.all_fields(cls)}
    with setting_errors(ctx):
        return cls(**{name: value for name, value in values.items() if name in names})


def _parameter(f: dataclasses.Field, hint: Any, default: Any, help: str, names: dict | None = None) -> inspect.Parameter:
    m = S.meta(f)
    help = escape(help_text(help, names))  # --help is rich markup: "W [c; r; d] + b" is text, not a style
    flag = S.flag_of(f)
    if m["parse"] is not None:  # typed as text on the command line, parsed into the field's type
        annotation, shown = Optional[str], None if default is None else ",".join(map(str, default))
        option = typer.Option(shown, flag, help=help)
    elif hint is bool or hint == Optional[bool]:
        annotation = bool
        negation = f"--{m['negation']}" if isinstance(m["negation"], str) else f"--no-{flag[2:]}"
        decls = (f"{flag}/{negation}",) if m["negation"] else (flag,)
        option = typer.Option(default, *decls, *_short(m), help=help)
    else:
        annotation = hint
        choices = f" One of: {', '.join(m['choices'])}." if m["choices"] else ""
        option = typer.Option(default, flag, *_short(m), help=help + choices, metavar=m.get("metavar"))
    return inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation)


def _short(m: dict) -> tuple[str, ...]:
    return (m["short"],) if m.get("short") else ()


def flags(ctx) -> dict[str, str]:
    """Each option of the command by its parameter (setting) name, with its flag."""
    return command_flags(ctx.command)


def command_flags(command) -> dict[str, str]:
    """Each option of click command ``command`` by its parameter (setting) name, with its flag."""
    return {p.name: max(p.opts, key=len) for p in command.params if p.opts and p.opts[0].startswith("-")}


def given(ctx) -> dict[str, str]:
    """The options given on the command line (not left at their defaults), with their flags."""
    return {name: flag for name, flag in flags(ctx).items()
            if getattr(ctx.get_parameter_source(name), "name", "DEFAULT") != "DEFAULT"}


@contextlib.contextmanager
def setting_errors(ctx, catch: tuple = (ValueError, SettingError)):
    """The library's validation names a setting ("lr must be ...", "`cache` ..."); say the command's
    flag instead. Around a library call that does more than validate, catch SettingError only, or
    GrocError: any error of the library, whose settings in backticks become flags (its type kept)."""
    try:
        yield
    except catch as exc:
        if isinstance(exc, GrocError):
            exc.args = (with_flags(exc, flags(ctx), first=isinstance(exc, SettingError)),)
            raise
        raise GrocError(with_flags(exc, flags(ctx), first=True)) from None


def with_flags(exc: BaseException | str, names: dict[str, str], first: bool = False, fallback=None) -> str:
    """The message of ``exc`` (an exception or a log line) as the command says it: each setting named in backticks written as its
    flag (``names``: the running command's, else any setting's flag, else the flag its name makes:
    prepare's `train` in train's "prepare it with `train`"), and, with
    ``first``, a message that starts with a setting's name (``check_fields``'s "lr must be ...")
    starting with its flag. The one place where a setting's name becomes a flag (cli.py's handler
    calls it for an error raised outside ``setting_errors``). ``fallback`` replaces the lookup of a name
    that is not in ``names`` (default: ``flag_of_name``)."""
    text = exc.text if isinstance(exc, GrocError) else str(exc)  # a log line is its own text
    name, _, rest = text.partition(" ")
    if first and name in names:
        text = f"{names[name]} {rest}"
    fallback = fallback or flag_of_name
    return SETTING_NAME.sub(lambda m: names.get(m[1]) or fallback(m[1]), text)


@functools.cache
def setting_flags() -> dict[str, str]:
    """Every setting's flag by its name: the model's and training's (``model_flags``), generation's, and
    eval's with its caches' (for a name a message gives that is not an option of the running command)."""
    from ..evaluation.settings import EvalSettings
    from ..generation_settings import GenerateSettings

    others = {f.name: S.flag_of(f) for cls in (GenerateSettings, EvalSettings) for f in S.all_fields(cls)}
    return {**model_flags(), **others}


def flag_of_name(name: str) -> str:
    """The flag of the setting or option ``name`` whatever the command: the setting's, else the
    flag its name makes (another command's option: prepare's `train`, eval's `states`)."""
    return setting_flags().get(name) or made_flag(name)


def made_flag(name: str) -> str:
    """The flag a setting's or option's name makes: `max_epochs` is --max-epochs."""
    return "--" + name.replace("_", "-")


@functools.cache
def model_flags() -> dict[str, str]:
    """The model's and training's settings by name, with their flags: known without importing torch
    (their classes are torch-free), and the only settings whose flag is not the one their name makes
    (`output` is --output-layer; a test holds every settings class to it)."""
    from ..models.config import ModelConfig
    from ..training.config import TrainConfig

    return {f.name: S.flag_of(f) for cls in (ModelConfig, TrainConfig) for f in S.all_fields(cls)}


def help_text(help: str, names: dict[str, str] | None = None) -> str:
    """A setting's help as its option shows it: the settings it names in backticks as flags (``names``:
    the command's own, where known; a model or training setting by its flag; another name, eval's
    `states` or `cache`, by the flag its name makes). Nothing here imports the evaluation's or
    generation's settings, and so torch: a command's --help loads no more than its own settings."""
    if "`" not in help:
        return help
    return with_flags(help, names or {}, fallback=lambda name: model_flags().get(name) or made_flag(name))


CONFIG = typer.Option(None, "--config", help="Settings from a JSON or TOML file (a run's config.json works); flags "
                      "and KEY=VALUE arguments override it.")
OVERRIDES = typer.Argument(None, metavar="[KEY=VALUE]...", help="Override any setting, e.g. lr=0.0005 out_depth=0 "
                           "char_filters='[[1,32],[2,64]]' (after the flags' values and the --config file's).")


def resolve(ctx, sections: dict[str, type], values: dict, config: Path | None, overrides: list[str] | None,
            fixed: tuple = (), origin: dict[str, str] | None = None,
            preset: tuple[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Build each section's dataclass from its defaults, then the --config file, then ``preset`` (a
    flag naming several settings at once, as (its text, {setting: value})), then the flags given
    on the command line, then KEY=VALUE overrides. `fixed` names sections the command does not let
    a file or override change (finetune keeps its model's settings).

    A section whose class has a subclass per kind (ModelConfig: one per output layer) is built as
    its kind's class; a setting of another kind is refused when given (by a flag, a file or an
    override), except from a run's own config.json, whose other kinds' settings are dropped (a run
    written before each kind had its own settings holds them all). ``origin``, when given, gets the
    settings given by a flag, a file or an override, each with where it came from."""
    owner = {f.name: name for name, cls in sections.items() for f in S.all_fields(cls)}
    chosen: dict[str, dict] = {name: {} for name in sections}
    origin = {} if origin is None else origin
    explicit = given(ctx)

    def put(key: str, value: Any, where: str, strict: bool = True) -> None:
        section, _, name = key.rpartition(".")
        if name not in owner or (section and owner[name] != section):
            known = ", ".join(sorted(owner))
            raise GrocError(f"{where}: unknown setting {key!r} (settings: {known})")
        if owner[name] in fixed:
            raise GrocError(f"{where}: {name} is a {owner[name]} setting, which this command takes from its run")
        try:
            chosen[owner[name]][name] = S.coerce(sections[owner[name]], name, value)
        except ValueError as exc:
            raise GrocError(f"{where}: {name}: {exc}") from None
        if strict:
            origin[name] = where
        else:
            origin.pop(name, None)

    for name, value in values.items():  # the options' values: the fields' defaults unless given
        if name in owner and owner[name] not in fixed:
            put(name, _from_option(sections[owner[name]], name, value), explicit.get(name, name), name in explicit)
    if config is not None:
        try:
            data, from_run = S.read_config(config)
        except ValueError as exc:
            raise GrocError(str(exc)) from None
        try:
            entries = S.config_entries(data, from_run, sections, fixed)
        except ValueError as exc:
            raise GrocError(f"--config {config}: {exc}") from None
        for key, value in entries:
            put(key, value, f"--config {config}", not from_run)
    if preset is not None:  # a preset is a flag: it wins over the file, a setting's own flag over it
        where, chosen_values = preset
        for name, value in chosen_values.items():
            if name not in explicit:
                put(name, value, where)
    for name, value in values.items():  # flags given on the command line win over the file
        if name in owner and name in explicit and (config is not None or preset is not None):
            put(name, _from_option(sections[owner[name]], name, value), explicit[name])
    for text in overrides or ():
        try:
            key, value = S.parse_override(text)
        except ValueError as exc:
            raise GrocError(str(exc)) from None
        put(key, value, f"override {text!r}")
    built = {}
    with setting_errors(ctx):
        for name, cls in sections.items():
            if name not in fixed:
                built[name] = cls(**_of_kind(ctx, cls, chosen[name], origin))
    return built


def _of_kind(ctx, cls: type, values: dict, origin: dict[str, str]) -> dict:
    """``values`` without the settings of kinds other than the one they choose (``S.kind_applies``:
    the output layer's, the cache's); one of those given explicitly is a GrocError naming it."""
    found = S.inapplicable(cls, values, set(origin))
    if found is not None:
        name, kinds = found
        names = flags(ctx)
        kind = values.get(cls.KIND_SETTING)
        where = origin[name] if origin[name] == names.get(name) else f"{origin[name]}: {name}"
        raise GrocError(f"{where} is a setting of {names.get(cls.KIND_SETTING, cls.KIND_SETTING)} {kinds}, not of "
                        f"{kind}; drop it or choose one of those")
    return values


def _from_option(cls: type, name: str, value: Any) -> Any:
    f = next(f for f in S.all_fields(cls) if f.name == name)
    if S.meta(f).get("parse") is not None and isinstance(value, str):
        return S.meta(f)["parse"](value)
    return value


def option_default(fn, name: str) -> Any:
    """The default of a command's option (for the test that options equal their dataclass fields)."""
    default = inspect.signature(fn).parameters[name].default
    return getattr(default, "default", default)
