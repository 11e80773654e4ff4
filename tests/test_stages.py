"""Every stage is `run(settings) -> record` (GUIDE 11 and 14): each command has a settings class
whose fields generate its options, each option's default and help are its field's, and no
command function declares a setting's option by hand. A command added without a settings class
(or an entry in EXEMPT, with the reason) fails here."""

import ast
import dataclasses

import pytest
from rich.markup import escape

from groc_cli.cli import command as click_command
from groc_cli.commands import SUMMARIES
from groc_cli.commands._settings import help_text
from groc_cli.evaluation.compare import CompareSettings
from groc_cli.evaluation.settings import EvalSettings, cache_setting_names, line_cache_kinds, option_help
from groc_cli.evaluation.states import DumpSettings
from groc_cli.generation_settings import GenerateInput, GenerateSettings
from groc_cli.lexicon.extract import LexiconSettings
from groc_cli.models import ModelConfig
from groc_cli.scoring import ScoreSettings
from groc_cli.settings import cli_fields, default_of, flag_of, help_of, meta
from groc_cli.text.prepare import PrepareSettings
from groc_cli.text.tokenizer import TextInput, TokenizeSettings
from groc_cli.training.loop import TrainConfig
from tests.conftest import REPO


#: Each stage: its command function (in groc_cli/commands/<stage>.py), its settings classes, and the
#: defaults and helps its command gives some fields instead of theirs (finetune's 3 epochs; eval's
#: --cache and --grid, which list the registered caches).
STAGES = {
    "tokenize": ("tokenize", (TokenizeSettings,), {}, {}),
    "prepare": ("prepare", (PrepareSettings,), {}, {}),
    "lexicon": ("lexicon", (LexiconSettings,), {}, {}),
    "train": ("train", (ModelConfig, TrainConfig), {}, {}),
    "finetune": ("finetune", (TrainConfig,), {"max_epochs": 3},
                 {"max_epochs": "Epochs on the target domain (paper 5.1: 3)."}),
    "dump": ("dump", (DumpSettings,), {"split": ...}, {}),
    "eval": ("eval_command", (EvalSettings,), {"split": None, "vocab": None}, option_help()),
    "score": ("score", (ScoreSettings, EvalSettings), {}, {"cache": None}),
    "generate": ("generate", (GenerateInput, GenerateSettings), {}, {}),
    "compare": ("compare_command", (CompareSettings,), {}, {}),
}
#: The settings a stage offers of a class it takes only some of from (score: eval's cache, its weight and the
#: settings of the caches that score lines as they come); a help of None above: the command's own (score's
#: --cache lists those caches).
ONLY = {"score": {EvalSettings: {"cache", "cache_weight", *cache_setting_names(line_cache_kinds()[1:])}}}


def offered(name: str) -> list[tuple[type, dataclasses.Field]]:
    """Each setting stage ``name`` offers as an option, with its class."""
    only = ONLY.get(name, {})
    return [(cls, f) for cls in STAGES[name][1] for f in cli_fields(cls) if cls not in only or f.name in only[cls]]
#: Stages whose settings class is on its way: one line each, moved to STAGES when it lands.
PENDING: dict[str, str] = {}
#: Commands that are not stages, and why they have no settings class.
EXEMPT = {
    "runs": "a view of finished runs (table, JSON or CSV): its options choose the presentation, and no artifact or "
            "record of a later stage depends on them",
    "plot": "a picture of finished runs' curves: its options (smoothing, title) choose the presentation, and no "
            "artifact or record of a later stage depends on them",
}


def test_every_command_is_a_stage_with_settings_or_says_why_not():
    assert set(STAGES).isdisjoint(PENDING) and set(STAGES).isdisjoint(EXEMPT) and set(PENDING).isdisjoint(EXEMPT)
    assert set(SUMMARIES) == set(STAGES) | set(PENDING) | set(EXEMPT)
    for name, (_, classes, _, _) in STAGES.items():
        assert classes and all(dataclasses.is_dataclass(c) and cli_fields(c) for c in classes), name


def _shown(f: dataclasses.Field, default):
    """A default as its option holds it: a parsed setting's as the text it is parsed from."""
    return ",".join(map(str, default)) if meta(f)["parse"] is not None and default is not None else default


@pytest.mark.parametrize("name", [*STAGES, *PENDING])
def test_every_option_of_a_stage_is_its_field(name):
    if name in PENDING:
        pytest.skip(PENDING[name])
    _, classes, defaults, helps = STAGES[name]
    options = {p.name: p for p in click_command(name).params}
    for cls, f in offered(name):
        option = options.get(f.name)
        assert option is not None, f"groc {name} has no option for the setting {f.name}"
        m = meta(f)
        assert flag_of(f) in option.opts, (name, f.name, option.opts)
        if m["short"]:
            assert m["short"] in option.opts, (name, f.name, option.opts)
        if isinstance(m["negation"], str) and option.is_flag:
            assert f"--{m['negation']}" in option.secondary_opts, (name, f.name, option.secondary_opts)
        default = defaults.get(f.name, default_of(f))
        if default is ...:  # a command's required option (dump's --split)
            assert option.required, (name, f.name)
        else:
            assert option.default == _shown(f, default), (name, f.name)
        choices = f" One of: {', '.join(m['choices'])}." if m["choices"] and m["parse"] is None else ""
        if helps.get(f.name, "") is None:  # the command's own help (score's --cache)
            continue
        help = help_text(helps.get(f.name, help_of(cls, f)))  # settings it names in backticks as flags
        assert option.help in (escape(help) + choices, escape(help)), (name, f.name, option.help)
        assert option.metavar == m["metavar"], (name, f.name, option.metavar)


def _function(name: str) -> ast.FunctionDef:
    """The command function of stage ``name``, as its source declares it."""
    tree = ast.parse((REPO / "groc_cli" / "commands" / f"{name}.py").read_text())
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == STAGES[name][0])


@pytest.mark.parametrize("name", STAGES)
def test_every_option_of_a_stage_is_a_setting_or_its_function_s_own(name):
    """The options of a stage are its settings' (generated) and the parameters its command function
    declares (inputs, outputs, presentation), each once: no command function declares a setting's
    option by hand, and no option is built anywhere else (a layout tuple, a second list of options)."""
    fn = _function(name)
    own = {a.arg for a in fn.args.args + fn.args.kwonlyargs} - {"ctx"}
    settings = [f.name for _, f in offered(name)]
    options = [p.name for p in click_command(name).params if p.name != "help"]
    assert len(settings) == len(set(settings)) and own.isdisjoint(settings), name
    assert sorted(options) == sorted(own | set(settings)), name


def test_score_and_generate_read_text_with_the_same_settings():
    """--tokenize and --lower are declared once (TextInput) and checked once, for score's lines and
    generate's prompts alike."""
    for cls in (ScoreSettings, GenerateInput):
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for f in dataclasses.fields(TextInput):
            assert default_of(fields[f.name]) == default_of(f), (cls, f.name)
            assert {**meta(fields[f.name]), "help": ""} == {**meta(f), "help": ""}, (cls, f.name)
        with pytest.raises(ValueError, match="^lower applies with tokenize only"):
            cls(lower=True)


def test_no_command_function_is_over_30_lines():
    """A command function parses, calls its stage and prints; anything longer belongs in the library
    or in a helper beside it (counted from its ``def``: its signature, docstring and body; an option's
    long help is declared once beside it)."""
    for name in STAGES:
        fn = _function(name)
        length = fn.end_lineno - fn.lineno + 1
        assert length <= 30, f"{name}.py: {fn.name} is {length} lines"


#: Library functions allowed more than 8 parameters, with the reason.
WIDE = {
    "settings.py:setting": "a field declaration, as dataclasses.field: every keyword is optional and names one "
                           "property of the option",
}


def test_no_library_function_takes_over_8_parameters_or_runs_over_80_lines():
    """Outside the command layer a function that needs more than 8 values or 80 lines is doing
    several things: its values belong in a settings class, a plan or a small class, its steps in
    functions of their own."""
    found = []
    for path in sorted((REPO / "groc_cli").rglob("*.py")):
        if "commands" in path.relative_to(REPO / "groc_cli").parts:
            continue
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            args = fn.args
            names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
            params = len(names) - (names[:1] in (["self"], ["cls"]))
            length = fn.end_lineno - fn.lineno + 1
            key = f"{path.name}:{fn.name}"
            if (params > 8 and key not in WIDE) or length > 80:
                found.append(f"{path.relative_to(REPO)}:{fn.lineno} {fn.name}: {params} parameters, {length} lines")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("cls_path,values,message", [
    ("groc_cli.text.prepare:PrepareSettings", {"lower": True}, "lower applies while tokenizing"),
    ("groc_cli.text.prepare:PrepareSettings", {"min_count": 0}, "min_count must be a finite number >= 1, got 0"),
    ("groc_cli.text.prepare:PrepareSettings", {"errors": "ignore"}, "errors 'ignore': expected 'strict' or 'replace'"),
    ("groc_cli.lexicon.extract:LexiconSettings", {"keep_fraction": 1.5}, "keep_fraction must be in [0, 1], got 1.5"),
    ("groc_cli.evaluation.compare:CompareSettings", {"names": "a"}, "names 'a': give two names"),
    ("groc_cli.evaluation.compare:CompareSettings", {"column": "x"}, "column must be one of final, model"),
    ("groc_cli.scoring:ScoreSettings", {"lower": True}, "lower applies with tokenize only"),
    ("groc_cli.text.tokenizer:TokenizeSettings", {"jobs": 0}, "jobs must be a finite number >= 1, got 0"),
])
def test_the_settings_name_the_setting_that_fixes_a_value(cls_path, values, message):
    """The library's checks name the setting (the command layer turns the name into its flag): a
    field's own check raises ValueError, a check of fields together SettingError (both caught by
    the command's ``setting_errors``)."""
    import importlib

    from groc_cli.errors import SettingError

    module, _, name = cls_path.partition(":")
    with pytest.raises((ValueError, SettingError)) as caught:
        getattr(importlib.import_module(module), name)(**values)
    assert str(caught.value).startswith(message)


def test_the_lexicon_limits_are_the_models():
    """The paper's 3 relations and 10 definition words are declared once: what `groc lexicon` lists
    by default is what a GroC model reads by default."""
    from groc_cli.lexicon.extract import LexiconSettings
    from groc_cli.models.config import GroCConfig

    lexicon, model = LexiconSettings(), GroCConfig(output="groc")
    assert (lexicon.max_relations, lexicon.max_definition) == (model.max_relations, model.max_definition_words) == (3, 10)
