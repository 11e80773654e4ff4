"""Settings silently ignored (issue 30, class 6): a config section no command reads, a section of
another command, a cache's setting given with another cache, a lexicon given to an output layer
that reads none. Each is refused as a misplaced flat key is: one line naming it, exit status 2,
nothing written."""

import shutil

import pytest

from tests.conftest import TINY, run_groc
from tests.test_damaged_artifacts import EVAL, pristine, refused, work  # noqa: F401

TRAIN = ["train", "ds", "-o", "new-run", "--max-tokens", "50", *TINY]


@pytest.mark.parametrize("section", ["trian", "eval"])
def test_train_config_with_a_section_it_does_not_read(work, section):
    (work / "c.toml").write_text(f"[{section}]\nlr = 0.1\n")
    err = refused(work, [*TRAIN, "--config", "c.toml"], f"[{section}]", "--config c.toml")
    assert "[train]" in err and "[model]" in err


def test_eval_config_with_a_train_section(work):
    (work / "c.toml").write_text("cache = \"local\"\n[train]\nlr = 0.1\n")
    refused(work, [*EVAL, "--config", "c.toml"], "[train]", "rename or remove")


def test_finetune_config_with_a_model_section(work):
    (work / "c.toml").write_text("[model]\nemb = 16\n")
    refused(work, ["finetune", "run", "ds", "-o", "ft", "--config", "c.toml"], "[model]", "from its run")


def test_a_runs_config_json_still_configures_eval(work):
    """A run's config.json holds model, train and dataset tables: they describe the run, not eval."""
    r = run_groc(*EVAL, "--config", "run/config.json", cwd=work)
    assert r.returncode == 0, r.stderr.decode()


@pytest.mark.parametrize("extra, named", [(["--cache", "local", "--knn", "16"], "--knn"),
                                          (["--cache", "none", "--theta", "0.5"], "--theta"),
                                          (["--cache", "unigram", "knn=16"], "knn"),
                                          (["--cache-weight", "0.2"], "--cache-weight")])
def test_a_cache_setting_with_another_cache(work, extra, named):
    err = refused(work, [*EVAL, *extra], named, "--cache")
    assert "unbounded" in err or "local" in err


def test_a_cache_setting_with_its_cache_is_taken(work):
    r = run_groc(*EVAL, "--cache", "local", "--theta", "0.5", "--cache-size", "100", "--force", cwd=work)
    assert r.returncode == 0, r.stderr.decode()


def test_finetune_lexicon_on_a_tied_run(work):
    (work / "lex.parquet").write_bytes(b"")
    refused(work, ["finetune", "run", "ds", "-o", "ft", "--lexicon", "lex.parquet", "--device", "cpu"], "--lexicon",
            "drop --lexicon")


@pytest.fixture(scope="module")
def groc_run(tiny_run, tmp_path_factory):
    """groc: tiny_run.small("groc") on ds, 50 tokens (RESUME's 100 trains it further), trained with
    lex.parquet (tiny_run's, linked here: read-only); half.parquet: another lexicon of ds's words."""
    root = tmp_path_factory.mktemp("groc-run")
    (root / "lex.parquet").symlink_to(tiny_run.lexicon(tiny_run.small_data()))
    (root / "groc").symlink_to(tiny_run.small("groc", max_tokens=50))
    run_groc("lexicon", "--vocab", tiny_run.small_data(), "--keep-fraction", "0.5", "-o", root / "half.parquet",
             check=True)
    return root


RESUME = ["train", "ds", "-o", "groc", "--resume", "--max-tokens", "100", "--device", "cpu"]


def test_resume_with_another_lexicon(work, groc_run):
    """A resumed run keeps the lexicon copy its weights were built with; another --lexicon is refused,
    not set aside."""
    for name in ("groc", "half.parquet"):
        (shutil.copytree if name == "groc" else shutil.copyfile)(groc_run / name, work / name)
    refused(work, [*RESUME, "--lexicon", "half.parquet"], "--lexicon half.parquet", "keeps its own copy")


def test_resume_with_the_same_lexicon_is_taken(work, groc_run):
    shutil.copytree(groc_run / "groc", work / "groc")
    shutil.copyfile(groc_run / "lex.parquet", work / "same.parquet")  # same bytes, another path
    r = run_groc(*RESUME, "--lexicon", "same.parquet", cwd=work)
    assert r.returncode == 0, r.stderr.decode()
    assert (work / "groc" / "lexicon.parquet").read_bytes() == (groc_run / "lex.parquet").read_bytes()


def test_resume_of_a_tied_run_with_a_lexicon(work, groc_run):
    shutil.copyfile(groc_run / "lex.parquet", work / "lex.parquet")
    refused(work, ["train", "ds", "-o", "run", "--resume", "--max-tokens", "200", "--device", "cpu", "--lexicon",
                   "lex.parquet"], "--lexicon", "drop --lexicon")
