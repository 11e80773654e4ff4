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
from groc_cli.evaluation.settings import EvalSettings, option_help
from groc_cli.evaluation.states import DumpSettings
from groc_cli.generation import GenerateSettings
from groc_cli.lexicon.extract import LexiconSettings
from groc_cli.models import ModelConfig
from groc_cli.scoring import ScoreSettings
from groc_cli.settings import cli_fields, default_of, flag_of, help_of, meta
from groc_cli.text.prepare import PrepareSettings
from groc_cli.text.tokenizer import TokenizeSettings
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
    "eval": ("eval_command", (EvalSettings,), {}, option_help()),
    "score": ("score", (ScoreSettings,), {}, {}),
    "generate": ("generate", (GenerateSettings,), {}, {}),
    "compare": ("compare_command", (CompareSettings,), {}, {}),
}
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
    for cls in classes:
        for f in cli_fields(cls):
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
            help = help_text(helps.get(f.name, help_of(cls, f)))  # settings it names in backticks as flags
            assert option.help in (escape(help) + choices, escape(help)), (name, f.name, option.help)


@pytest.mark.parametrize("name", STAGES)
def test_no_command_declares_a_setting_by_hand(name):
    """The command function names no setting of its stage as a parameter: its options are generated."""
    function, classes, _, _ = STAGES[name]
    tree = ast.parse((REPO / "groc_cli" / "commands" / f"{name}.py").read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function)
    params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
    assert params & {f.name for cls in classes for f in cli_fields(cls)} == set(), name


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
