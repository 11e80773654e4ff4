"""A cache defined only here runs through `groc eval` end to end: registered with its settings
and grid setting, it gets its options, its checks (naming its flag) and `--grid`, and the
evaluation runs it without knowing it (docs/extending.md); `groc score` and `load_run` run it
too, through the same evaluation code. Tiny runs from conftest.py."""

import dataclasses
import json
import math

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from groc_cli.caches import CACHE_KINDS, ConfiguredCache, register_cache, setting_fields
from groc_cli.cli import command as click_command
from groc_cli.commands import eval as eval_command
from groc_cli.commands import score as score_command
from groc_cli.errors import GrocError, SettingError
from groc_cli.evaluation.perplexity import EvalSettings, evaluate
from groc_cli.settings import cli_fields, default_of, flag_of, setting
from tests.evaluation.conftest import groc1


@dataclasses.dataclass
class DecaySettings:
    decay: float = setting(0.9, "decay: a word seen n positions ago counts decay^n.")


class DecayCache(ConfiguredCache):
    """p_cache(w) ∝ Σ_{i < t, y_i = w} decay^(t - 1 - i): a unigram cache that forgets, one
    column per decay."""

    kind = "decay"
    Settings = DecaySettings
    grid = ("decay",)
    needs_hidden = False

    def __init__(self, decays):
        self.decays = [float(d) for d in decays]
        self.settings = [{"kind": "decay", "decay": d} for d in self.decays]
        self.config = {"kind": "decay", "decays": self.decays}
        self._seen: list[int] = []

    @classmethod
    def check(cls, s, values, chosen):
        for d in values["decay"]:
            if not 0 < d < 1:
                raise ValueError(f"`decay` {d}: must be in (0, 1)")

    @classmethod
    def from_settings(cls, s, values, ctx, first_states=None):
        return cls(values["decay"])

    def __len__(self):
        return len(self._seen)

    @property
    def nbytes(self):
        return 8 * len(self._seen)

    def score(self, hidden, targets):
        assert hidden is None  # needs_hidden False
        out = np.full((len(targets), len(self.decays)), np.nan)
        for j, y in enumerate(np.asarray(targets)):
            seen = np.array(self._seen)
            for p, d in enumerate(self.decays):
                if len(seen):
                    w = d ** np.arange(len(seen) - 1, -1, -1, dtype=np.float64)
                    with np.errstate(divide="ignore"):
                        out[j, p] = np.log(w[seen == y].sum()) - np.log(w.sum())
            self._seen.append(int(y))
        return out


@pytest.fixture
def decay():
    register_cache(DecayCache)
    yield DecayCache
    CACHE_KINDS.pop("decay")


def app(command=eval_command):
    """`groc eval` (or the command of module ``command``), its options generated now (with the
    registered caches')."""
    single = typer.Typer()
    command.register(single)
    return single


def cli(*args, command=eval_command):
    """`groc eval` (or ``command``) in-process."""
    result = CliRunner().invoke(app(command), [str(a) for a in args])
    if result.exception is not None:
        raise result.exception
    return result


@pytest.mark.slow
def test_a_cache_defined_in_a_test_runs_through_groc_eval_and_its_grid(runs, decay):
    args = (runs / "tied", runs / "a", "--split", "valid", "--device", "cpu", "--cache", "decay")
    assert "--decay" in cli("--help").stdout
    options = {p.name: p for p in typer.main.get_command(app()).params}
    assert options["decay"].default == 0.9 and options["decay"].help == DecaySettings.__dataclass_fields__["decay"].metadata[
        "groc"]["help"]
    assert options["cache"].help == "none, unigram, local (Grave et al. 2017c), unbounded (Grave et al. 2017a) or decay."
    assert "bandwidth-scale (unbounded), decay (decay); the others" in options["grid"].help
    out = json.loads(cli(*args, "--decay", "0.5", "--cache-weight", "0.2").stdout)
    assert math.isfinite(out["perplexity"]) and out["perplexity"] < out["model_perplexity"]
    assert out["settings"]["decay"] == 0.5 and out["settings"]["cache"] == "decay"
    assert out["cache_config"] == {"kind": "decay", "decays": [0.5]}
    # The same function in-process, the cache's setting given by name.
    alone = evaluate(runs / "tied", runs / "a", EvalSettings(split="valid", device="cpu", cache="decay", decay=0.5,
                                                             cache_weight=0.2))
    assert alone["perplexity"] == out["perplexity"]

    grid = json.loads(cli(*args, "--grid", "decay=0.3,0.6,0.9").stdout)
    assert [row["decay"] for row in grid["grid"]] == [0.3, 0.6, 0.9]
    assert all(math.isfinite(row["perplexity"]) for row in grid["grid"])
    for row in grid["grid"]:
        one = evaluate(runs / "tied", runs / "a", EvalSettings(split="valid", device="cpu", cache="decay",
                                                               decay=row["decay"]))
        assert row["perplexity"] == pytest.approx(one["perplexity"], rel=1e-12)
    assert grid["settings"]["grid"] == {"decay": [0.3, 0.6, 0.9]}
    both = json.loads(cli(*args, "--grid", "decay=0.3,0.9;cache-weight=0.1,0.2").stdout)
    assert {(r["decay"], r["cache_weight"]) for r in both["grid"]} == {(d, w) for d in (0.3, 0.9) for w in (0.1, 0.2)}


@pytest.mark.slow
def test_a_cache_defined_in_a_test_runs_through_groc_score_and_load_run(runs, decay, data_dir, tmp_path):
    """The same cache through `groc score` and `load_run(...).score_stream`: its option, its check (the
    flag, or the setting's name) and its scores, which are eval's on the same lines read as one stream."""
    from groc_cli import load_run

    lines = (data_dir / "ptb" / "ptb.test.txt").read_text(encoding="utf-8").splitlines()[:25]
    text = tmp_path / "text.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    # eval reads a split's first token as context only; score reads each line after <eos>
    (tmp_path / "split.txt").write_text("\n" + text.read_text(encoding="utf-8"), encoding="utf-8")
    groc1("prepare", "--train", text, "--test", tmp_path / "split.txt", "-o", tmp_path / "data", check=True)
    settings = dict(cache="decay", decay=0.5, cache_weight=0.2)
    out = evaluate(runs / "tied", tmp_path / "data", EvalSettings(split="test", vocab="model", device="cpu", **settings))
    expected = -out["nll"] * out["tokens"]

    options = {p.name: p for p in typer.main.get_command(app(score_command)).params}
    assert options["decay"].default == 0.9 and options["decay"].opts == ["--decay"]
    assert options["cache"].help.startswith("none, unigram, local or decay, as 'groc eval --cache'")
    flags = ["--cache", "decay", "--decay", "0.5", "--cache-weight", "0.2", "--threads", "1"]
    stdout = cli(runs / "tied", text, "--one-stream", "--vocab", "model", *flags, command=score_command).stdout
    table = [row.split("\t") for row in stdout.splitlines()[1:]]
    assert len(table) == len(lines) and sum(int(t[1]) for t in table) == out["tokens"]
    assert sum(float(t[0]) for t in table) == pytest.approx(expected, rel=1e-6, abs=1e-3)

    run = load_run(runs / "tied", vocab="model")
    scores = list(run.score_stream(lines, reset=False, **settings))
    assert [s.log_prob for s in scores] == pytest.approx([float(t[0]) for t in table], abs=1e-5)
    assert sum(s.log_prob for s in scores) == pytest.approx(expected, rel=1e-9)
    plain = sum(s.log_prob for s in run.score_stream(lines, reset=False))
    assert plain != pytest.approx(expected, abs=1e-3)  # the cache did something

    with pytest.raises(GrocError) as info:
        cli(runs / "tied", text, "--cache", "decay", "--decay", "1.5", command=score_command)
    assert str(info.value) == "--decay 1.5: must be in (0, 1)"
    with pytest.raises(SettingError) as info:
        run.score_stream(lines, cache="decay", decay=1.5)  # checked before any line is read
    assert str(info.value) == "decay 1.5: must be in (0, 1)"


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["--cache", "decay", "--decay", "1.5"], "--decay 1.5: must be in (0, 1)"),
    (["--cache", "decay", "--grid", "decay=0.5,2"], "--decay 2.0: must be in (0, 1)"),
    (["--cache", "local", "--grid", "decay=0.5"], "--grid: decay does not apply to the local cache (it applies to: decay)"),
    (["--cache", "lru"], "--cache 'lru': expected one of none, unigram, local, unbounded, decay"),
])
def test_its_checks_name_its_flags(runs, decay, args, message):
    with pytest.raises(GrocError) as info:
        cli(runs / "tied", runs / "a", "--split", "valid", "--device", "cpu", *args)
    assert str(info.value) == message


def test_registered_settings_keep_one_declaration_each(decay):
    assert [f.name for f, _ in setting_fields()][-1] == "decay"
    assert list(EvalSettings().as_dict())[6:8] == ["theta", "cache_size"]  # the caches' follow cache_weight

    @dataclasses.dataclass
    class Other:
        cache_size: int | None = setting(5, "another default for the unigram and local caches' setting")

    class Clash(DecayCache):
        kind = "clash"
        Settings = Other
        grid = ()

    with pytest.raises(TypeError, match="'cache_size' differs"):
        register_cache(Clash)
    assert "clash" not in CACHE_KINDS


def test_every_eval_option_is_a_declared_setting():
    # groc eval names no setting's default itself: each option is its field's (EvalSettings' or a cache's),
    # but for --split and --vocab, whose default is the --states directory's when given.
    options = {p.name: p for p in click_command("eval").params}
    for f in [*cli_fields(EvalSettings), *(f for f, _ in setting_fields())]:
        default = None if f.name in eval_command.FROM_STATES else default_of(f)
        assert flag_of(f) in options[f.name].opts and options[f.name].default == default, f.name


def test_score_cache_options_are_evals_declared_settings():
    # groc score offers three of eval's cache settings; their defaults and help are eval's declarations.
    from groc_cli.caches.local import LocalSettings
    from groc_cli.settings import meta

    options = {p.name: p for p in click_command("score").params}
    fields = {f.name: f for f in (*cli_fields(EvalSettings), *dataclasses.fields(LocalSettings))}
    for name in ("cache_weight", "theta", "cache_size"):
        f = fields[name]
        assert flag_of(f) in options[name].opts and options[name].default == default_of(f), name
        assert options[name].help == meta(f)["help"], name
