"""The tests' fork server (tests/zygote.py): a `groc` that it forks behaves as `python -m groc_cli` does."""

import shutil

from tests import conftest
from tests.conftest import REPO, run_groc


def test_a_forked_groc_answers_as_a_fresh_interpreter_does(tmp_path, monkeypatch):
    text = "The cat sat on the mat, said Mr. Smith.\n" * 40_000  # 1.6 MB: more than a pipe holds, both ways
    outputs = (tmp_path / "d", tmp_path / "p")
    cases = [
        (["tokenize"], text.encode()),
        (["prepare", "--train", tmp_path / "missing.txt", "-o", outputs[0]], None),  # one line, exit 2
        (["prepare", "--train", REPO / "groc_cli" / "data" / "austen-persuasion.txt", "--split", "300,100", "-o",
          outputs[1], "--json"], None),
        (["eval", "--help"], None),
        (["train", "--threads", "0"], None),
    ]
    for args, stdin in cases:
        answers = []
        for fresh in (False, True):
            for out in outputs:
                shutil.rmtree(out, ignore_errors=True)
            if fresh:
                monkeypatch.setenv("GROC_TESTS_FRESH_PYTHON", "1")
            else:
                conftest._SERVER.clear()
            r = run_groc(*args, input=stdin)
            monkeypatch.delenv("GROC_TESTS_FRESH_PYTHON", raising=False)
            answers.append((r.returncode, r.stdout, r.stderr))
            if not fresh:
                assert conftest._SERVER and conftest._SERVER[0].proc.poll() is None, "not forked, or the server died"
        assert answers[0] == answers[1], args
        assert answers[0][0] in (0, 2) and (answers[0][1] or answers[0][2]), args


def test_a_locale_or_interpreter_setting_gets_a_real_subprocess():
    env = {**conftest._ZYGOTE_ENV}
    assert conftest._forkable(env) and conftest._forkable({**env, "OMP_NUM_THREADS": "2", "COLUMNS": "50"})
    assert conftest._forkable({**env, "KMP_INIT_AT_FORK": "FALSE"})  # importing sacremoses sets it
    for changed in ({"PYTHONIOENCODING": "ascii"}, {"LC_ALL": "C"}, {"OMP_NUM_THREADS": ""}, {"MALLOC_ARENA_MAX": "1"}):
        assert not conftest._forkable({**env, **changed}), changed
