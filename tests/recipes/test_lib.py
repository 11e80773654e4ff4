"""The recipes' shared shell library (recipes/lib/common.sh and the step helpers it shares with
quickstart.sh, steps.sh) and table writer (report.py): finished stages are skipped, failed
captures leave nothing, tables are never built from missing outputs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO


def recipe_env(tmp_path: Path, **env) -> dict:
    """A recipe's environment: results under tmp_path, this interpreter's groc first on PATH."""
    full = {**os.environ, "RESULTS": str(tmp_path / "results"), "DATA": str(tmp_path), "PATH": os.environ["PATH"],
            "PYTHON": sys.executable, **env}
    full["PATH"] = f"{Path(sys.executable).parent}:{full['PATH']}"
    return full


def bash(script: str, tmp_path: Path, **env):
    return subprocess.run(["bash", "-c", f"NAME=t; source {REPO}/recipes/lib/common.sh; {script}"],
                          capture_output=True, text=True, env=recipe_env(tmp_path, **env))


@pytest.mark.slow
def test_step_and_capture_skip_done_work_and_keep_failures_out(tmp_path):
    out = tmp_path / "results" / "work" / "a" / "x.json"
    r = bash(f"capture {out} echo '{{\"v\": 1}}'; capture {out} echo '{{\"v\": 2}}'", tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text()) == {"v": 1}  # the second run was skipped
    assert "(done)" in r.stderr
    log = (tmp_path / "results" / "t" / "commands.log").read_text()
    assert log.count("+ echo") == 1 and log.startswith("# ")

    bad = tmp_path / "results" / "work" / "bad.json"
    r = bash(f"capture {bad} bash -c 'echo partial; exit 3'; echo after", tmp_path)
    assert r.returncode == 3 and "after" not in r.stdout  # set -e stops the recipe
    assert not bad.exists() and not list(bad.parent.glob("bad.json.partial*"))

    marker = tmp_path / "results" / "work" / "made"
    r = bash(f"step {marker} touch {marker}; step {marker} false", tmp_path)
    assert r.returncode == 0 and marker.exists()

    # A captured output is readable as the umask allows, as one written by `>` is (mktemp's are 0600:
    # the group of a shared project folder could not read the recipes' evaluations).
    for umask, mode in (("022", 0o644), ("002", 0o664), ("077", 0o600)):
        shared = tmp_path / "results" / "work" / f"shared-{umask}.json"
        r = bash(f"umask {umask}; capture {shared} echo '{{}}'", tmp_path)
        assert r.returncode == 0 and shared.stat().st_mode & 0o777 == mode, (umask, oct(shared.stat().st_mode))


@pytest.mark.slow
def test_a_run_that_ran_no_command_removes_only_what_it_made(tmp_path):
    r = bash("echo ran", tmp_path)  # sourced, then done without a command: nothing of its own is left
    assert r.returncode == 0 and r.stdout == "ran\n" and not (tmp_path / "results").exists()
    r = bash("echo ran; exit 3", tmp_path)
    assert r.returncode == 3 and not (tmp_path / "results").exists()  # its exit status is kept
    kept = tmp_path / "results" / "work" / "ptb"
    kept.mkdir(parents=True)
    assert bash("echo ran", tmp_path).returncode == 0
    assert kept.exists() and not (tmp_path / "results" / "t").exists()  # what was there stays
    r = bash(f"step {tmp_path}/results/work/made touch {tmp_path}/results/work/made", tmp_path)
    assert r.returncode == 0 and "+ touch" in (tmp_path / "results" / "t" / "commands.log").read_text()
    assert bash("echo ran", tmp_path).returncode == 0  # a later run's header stays in an existing log
    assert (tmp_path / "results" / "t" / "commands.log").read_text().count("\n# ") == 1


def test_bad_scale_or_data_stop_before_work(tmp_path):
    r = bash("echo ran", tmp_path, SCALE="huge")
    assert r.returncode == 2 and "SCALE must be small, paper or tiny" in r.stderr and "ran" not in r.stdout
    r = bash("echo ran", tmp_path, DATA=str(tmp_path / "nowhere"))
    assert r.returncode == 2 and "is not a directory" in r.stderr
    # A work tree that cannot be made (here under a file): one line naming the recipe, and the results
    # folder it had made already is gone again.
    (tmp_path / "a-file").write_text("")
    r = bash("echo ran", tmp_path, GROC_WORK=str(tmp_path / "a-file" / "work"))
    assert r.returncode == 2 and "ran" not in r.stdout, r.stderr
    assert r.stderr.startswith("t: cannot create directory") and len(r.stderr.splitlines()) == 1, r.stderr
    assert f"WORK={tmp_path / 'a-file' / 'work'}" in r.stderr and not (tmp_path / "results").exists()


@pytest.mark.slow
def test_report_writes_markdown_and_parquet_and_refuses_missing_outputs(tmp_path):
    sys.path.insert(0, str(REPO / "recipes" / "lib"))
    try:
        import report
    finally:
        sys.path.pop(0)
    (tmp_path / "a.json").write_text(json.dumps({"perplexity": 86.25}))
    t = report.Table("demo", "Demo", ["model", "ppl", "paper"])
    t.add(model="tied", ppl=report.load(tmp_path / "a.json")["perplexity"], paper=86.2)
    t.add(model="groc", ppl=float("inf"), paper=None)
    t.write(tmp_path / "out", notes=["a note"])
    md = (tmp_path / "out" / "demo.md").read_text()
    assert "| tied | 86.2 | 86.2 |" in md and "| groc | inf | – |" in md and "- a note" in md
    assert pq.read_table(tmp_path / "out" / "demo.parquet").to_pylist()[0] == {"model": "tied", "ppl": 86.25, "paper": 86.2}

    code = ("import sys; sys.path.insert(0, sys.argv[1]); import report; "
            "report.load(sys.argv[2])")
    r = subprocess.run([sys.executable, "-c", code, str(REPO / "recipes" / "lib"), str(tmp_path / "missing.json")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "missing" in r.stderr and "no table is written" in r.stderr


@pytest.mark.slow
def test_two_recipes_reaching_one_stage_run_it_once(tmp_path):
    """table2.sh and table3.sh share runs: the second waits for the first's stage, then skips it."""
    out = tmp_path / "results" / "work" / "stage"
    started, go, ran_twice = tmp_path / "started", tmp_path / "go", tmp_path / "second-ran"
    env = recipe_env(tmp_path)

    def recipe(name, script):
        return subprocess.Popen(["bash", "-c", f"NAME={name}; source {REPO}/recipes/lib/common.sh; {script}"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    first = recipe("first", f"step {out} bash -c 'touch {started}; until [ -e {go} ]; do sleep 0.05; done; touch {out}'")
    try:
        while not started.exists():
            assert first.poll() is None, first.stderr.read()
        second = recipe("second", f"step {out} touch {ran_twice}; echo next")
        waiting = second.stderr.readline()  # blocks until the second reaches the held stage
        go.touch()
        rest = second.communicate(timeout=60)
        assert first.wait(timeout=60) == 0
    finally:
        go.touch()
    assert "second: waiting for another process that is making" in waiting
    assert second.returncode == 0 and f"= {out} (done)" in rest[1] and "next" in rest[0]
    assert out.exists() and not ran_twice.exists()
    # a lock left by a finished (or killed) process does not hold anyone up
    r = bash(f"step {tmp_path / 'other'} touch {tmp_path / 'other'}", tmp_path)
    assert r.returncode == 0 and "waiting" not in r.stderr and (tmp_path / "other").exists()


@pytest.mark.slow
def test_stages_run_with_one_warning_on_a_file_system_without_locks(tmp_path):
    """flock(1) fails with status 65 where flock(2) is ENOSYS (Lustre mounted noflock): recipes said
    they were waiting for another process that did not exist, at every stage."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "flock").write_text("#!/bin/sh\necho \"flock: $1: Function not implemented\" >&2\nexit 65\n")
    (bin_dir / "flock").chmod(0o755)
    one, two = tmp_path / "one", tmp_path / "two"
    r = bash(f"step {one} touch {one}; step {two} touch {two}; echo next", tmp_path,
             PATH=f"{bin_dir}:{os.environ['PATH']}")
    assert r.returncode == 0 and one.exists() and two.exists() and "next" in r.stdout, r.stderr
    assert r.stderr.count("has no file locks") == 1 and "waiting" not in r.stderr
    assert "Function not implemented" not in r.stderr
    # gpu-table2 follows its runs by their lock: there it refuses in one line instead
    r = subprocess.run(["bash", str(REPO / "recipes" / "gpu-table2.sh"), "start"], capture_output=True, text=True,
                       env=recipe_env(tmp_path, SCALE="tiny", PATH=f"{bin_dir}:{os.environ['PATH']}"))
    assert r.returncode == 2 and "has no file locks" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.slow
def test_train_and_finetune_resume_an_interrupted_run_and_skip_a_finished_one(tmp_path):
    # a stand-in for groc that records its arguments and "finishes" a run by writing summary.json
    fake = ('groc() { echo "$*" >> ' + str(tmp_path / "calls") + '; local o; while [ $# -gt 0 ]; do '
            '[ "$1" = -o ] && o=$2; shift; done; mkdir -p "$o" && echo {} > "$o/summary.json"; }; ')
    run, new, bare = tmp_path / "r", tmp_path / "f", tmp_path / "b"
    (new / "last").mkdir(parents=True)  # an interrupted finetuning
    bare.mkdir()
    (bare / "config.json").write_text("{}")  # a run directory left without a checkpoint
    configured = tmp_path / "c"
    (configured / "last").mkdir(parents=True)  # an interrupted run of a --config file (SCALE=paper)
    r = bash(fake + f"train {run} data --output-layer tied; train {run} data --output-layer tied; "
                    f"finetune {run} ft {new} --max-epochs 3; train {bare} data --output-layer tied; "
                    f"train {configured} data --config recipes/configs/penn/tied.toml --seed 1 --max-minutes 9", tmp_path)
    assert r.returncode == 0, r.stderr
    # A new run trains in place (no --force, which would train aside and discard an interrupted
    # run's checkpoint); only a run left without a checkpoint is replaced. A resumed run takes its
    # settings from its own config.json (groc train --resume refuses a --config file).
    assert (tmp_path / "calls").read_text().splitlines() == [f"train data --output-layer tied -o {run}",
                                                            f"finetune {run} ft --max-epochs 3 -o {new} --resume",
                                                            f"train data --output-layer tied -o {bare} --force",
                                                            f"train data --seed 1 --max-minutes 9 -o {configured} --resume"]
    assert f"= {run}/summary.json (trained)" in r.stderr


@pytest.mark.slow
def test_paper_scale_settings_minutes_reuters_min_count_and_index(tmp_path):
    r = bash('echo "${BUDGET[*]}|$REUTERS|${CACHE_UNBOUNDED[*]}|$CROSSDOMAIN_LEX"', tmp_path, SCALE="paper", MINUTES="21")
    assert r.returncode == 0, r.stderr
    budget, reuters, cache, lexicon = r.stdout.strip().split("|")
    assert budget == "--max-epochs 100 --max-minutes 21"
    assert reuters.endswith("/work/reuters-min2")  # the paper scale trains <unk>
    assert lexicon.endswith("/work/crossdomain-min2.lexicon.parquet")  # not the small scale's
    assert "--index IVF4096,PQ30" in cache  # M = 30 divides the 300-d states
    r = bash('echo "${BUDGET[*]}|$REUTERS|$CROSSDOMAIN_LEX"', tmp_path)
    assert r.stdout.strip() == (f"--max-tokens 400000|{tmp_path}/results/work/reuters-min2|"
                                f"{tmp_path}/results/work/crossdomain-min2.lexicon.parquet")  # both scales train <unk>
    r = bash('echo "$REUTERS|$CROSSDOMAIN_LEX|$REUTERS_SUFFIX"', tmp_path, REUTERS_MIN_COUNT="1")
    assert r.stdout.strip() == f"{tmp_path}/results/work/reuters|{tmp_path}/results/work/crossdomain.lexicon.parquet|"


@pytest.mark.slow
def test_settings_are_table8_configs_at_paper_scale_and_one_model_at_small(tmp_path):
    show = 'emb=(); [ "$SCALE" = paper ] && emb=(--emb 300); settings ptb {}; echo "${{settings[*]}}"'
    r = bash(show.format("deep-residual"), tmp_path, SCALE="paper")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["--config", f"{REPO}/recipes/configs/penn/deep-residual.toml", "--seed", "1", "--emb", "300"]
    small = {m: bash(show.format(m), tmp_path).stdout.split() for m in ("tied", "deep-residual", "groc-surface")}
    model = ["--emb", "128", "--hidden", "256", "--dropout", "0.3", "--seed", "1", "--log-every", "200"]
    assert small["tied"] == ["--output-layer", "tied", *model] and small["deep-residual"] == ["--output-layer", "deep-residual", *model]
    # groc's default char-CNN initialisation became the authors'; the small scale keeps the one its records trained with
    assert small["groc-surface"] == ["--output-layer", "groc", *model, "--char-init", "uniform", "--no-relations",
                                     "--no-definitions"]
    # Every method a recipe names has its config file, for both datasets.
    for ds, name in (("ptb", "penn"), ("wt2", "wikitext2")):
        for m in ("lookup", "convolutional", "tied", "bilinear", "deep-residual", "adaptive", "groc", "groc-norelations",
                  "groc-nodefinitions", "groc-surface"):
            assert (REPO / "recipes" / "configs" / name / f"{m}.toml").exists(), (ds, m)


@pytest.mark.slow
def test_tiny_scale_is_each_config_at_2x32_on_its_own_slices(tmp_path):
    show = 'settings ptb {}; echo "$WORK|${{settings[*]}}|${{BUDGET[*]}}"'
    r = bash(show.format("adaptive"), tmp_path, SCALE="tiny", MINUTES="3")
    assert r.returncode == 0, r.stderr
    work, settings, budget = r.stdout.strip().split("|")
    assert work == f"{tmp_path}/results/work/tiny"  # never the full datasets of the other scales
    assert settings.split() == ["--config", f"{REPO}/recipes/configs/penn/adaptive.toml", "--seed", "1", "--emb", "32",
                                "--hidden", "32", "--layers", "2", "--log-every", "1", "--cutoffs", "40,100"]
    assert budget == "--max-epochs 2 --max-minutes 3"
    r = bash('echo "$WORK"', tmp_path, SCALE="tiny", GROC_WORK=f"{tmp_path}/w/tiny")
    assert r.stdout.strip() == f"{tmp_path}/w/tiny"  # given again to a child process: not nested


@pytest.mark.slow
def test_the_work_tree_is_groc_work_not_the_work_that_hpc_centres_export(tmp_path):
    """TACC and IDRIS set WORK to the user's work file system in every login: a recipe that read it put its
    datasets and runs at the top of that file system and took the user's own `ptb` folder for a done stage."""
    cluster = tmp_path / "work2" / "user"
    (cluster / "ptb").mkdir(parents=True)
    r = bash('echo "$WORK"', tmp_path, WORK=str(cluster))
    assert r.returncode == 0 and r.stdout.strip() == f"{tmp_path}/results/work"
    r = bash('echo "$WORK"', tmp_path, WORK=str(cluster), GROC_WORK=f"{tmp_path}/mine")
    assert r.stdout.strip() == f"{tmp_path}/mine"
    assert [p.name for p in cluster.iterdir()] == ["ptb"]  # nothing made there


@pytest.mark.slow
def test_counts_and_budgets_are_checked_before_any_work(tmp_path):
    """REUTERS_MIN_COUNT, TOKENS and EPOCHS are whole numbers of at least 1 and MINUTES a positive number, or
    the recipe stops in one line before any work (a bad budget used to fail each training after the data)."""
    for var, bad in [("REUTERS_MIN_COUNT", b) for b in ("0", "two", "-1", "1.5")] + [
            ("TOKENS", "400K"), ("TOKENS", "0"), ("EPOCHS", "0"), ("EPOCHS", "1e2")]:
        r = bash("echo reached", tmp_path, **{var: bad})
        assert r.returncode == 2 and "reached" not in r.stdout and not (tmp_path / "results").exists()
        assert r.stderr.strip().splitlines() == [f"t: {var} must be a whole number of at least 1, not '{bad}'"]
    for bad in ("0", "-5", "1m", "0.0"):
        r = bash("echo reached", tmp_path, MINUTES=bad)
        assert r.returncode == 2 and r.stderr.strip().splitlines() == [
            f"t: MINUTES must be a positive number of minutes, not '{bad}'"]
    for env, budget in [({"TOKENS": "5000"}, "--max-tokens 5000"), ({"SCALE": "paper", "EPOCHS": "3"}, "--max-epochs 3"),
                        ({"MINUTES": "0.5"}, "--max-tokens 400000 --max-minutes 0.5"),
                        ({"TOKENS": "", "MINUTES": ""}, "--max-tokens 400000")]:
        r = bash('echo "${BUDGET[*]}"', tmp_path, **env)
        assert r.returncode == 0 and r.stdout.strip() == budget, (env, r.stdout, r.stderr)


@pytest.mark.slow
def test_table_recipes_refuse_unknown_kinds_before_any_work(tmp_path):
    for recipe in ("table2.sh", "table5.sh"):
        r = subprocess.run(["bash", str(REPO / "recipes" / recipe)], capture_output=True, text=True,
                           env=recipe_env(tmp_path, KINDS="tied bogus", DATASETS="ptb"))
        assert r.returncode == 2, (recipe, r.stderr)
        assert "bogus" in r.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "results").exists()  # nothing made, not even the log or an empty folder


@pytest.mark.slow
def test_recipes_refuse_their_own_counts_before_any_work(tmp_path):
    for recipe, var, bad in (("table10.sh", "THREADS", "0"), ("table10.sh", "STEPS", "x"),
                             ("check-open-vocab.sh", "TEST_LINES", "0"), ("check-open-vocab.sh", "CHECK_TOKENS", "6e4")):
        r = subprocess.run(["bash", str(REPO / "recipes" / recipe)], capture_output=True, text=True,
                           env=recipe_env(tmp_path, **{var: bad}), stdin=subprocess.DEVNULL, timeout=60)
        name = recipe.removesuffix(".sh")
        assert r.returncode == 2 and r.stderr.strip().splitlines() == [
            f"{name}: {var} must be a whole number of at least 1, not '{bad}'"], (recipe, r.stderr)
    assert not (tmp_path / "results").exists()


# A stand-in groc for quickstart.sh: records each call in $CALLS and makes what the call's -o names.
QUICKSTART_GROC = r'''groc() {
  local o="" prev="" a; for a in "$@"; do [ "$prev" = -o ] && o=$a; prev=$a; done
  case $1 in
    tokenize) echo "tokenize $(wc -l)" >> "$CALLS"; return ;;
    prepare) [[ " $* " == *" - "* ]] && cat > /dev/null; mkdir -p "$o" ;;
    lexicon) touch "$o" ;;
    train) mkdir -p "$o"; echo '{"tokens": 170123, "parameters": 416857}' > "$o/summary.json" ;;
    dump) mkdir -p "$o"; echo '{}' ;;
    eval) echo '{"tokens": 34740, "oov_rate": 0.0459, "new_words": 1430, "perplexity": 390.04, "model_perplexity": 401.2}' ;;
    plot) touch "$o" ;;
    score) cat > /dev/null; printf 'ln_prob\ttokens\tperplexity\n-55.1\t17\t25.6\n' ;;
  esac
  echo "$*" >> "$CALLS"
}; export -f groc; '''


@pytest.mark.slow
def test_quickstart_writes_to_out_and_skips_finished_steps(tmp_path):
    """quickstart.sh shares steps.sh with the paper recipes: its outputs go to OUT, TEST_LINES sets the
    test sets' size, and a second run skips every finished step (a stand-in groc records its calls)."""
    calls, out = tmp_path / "calls", tmp_path / "qs"
    fake = QUICKSTART_GROC
    env = recipe_env(tmp_path, OUT=str(out), TEST_LINES="7", CALLS=str(calls))
    run = lambda: subprocess.run(["bash", "-c", fake + f"bash {REPO}/recipes/quickstart.sh"], capture_output=True,
                                 text=True, env=env, stdin=subprocess.DEVNULL)
    first = run()
    assert first.returncode == 0, first.stderr
    made = calls.read_text().splitlines()
    assert made.count("tokenize 7") == 2  # TEST_LINES=7 lines of each other-domain novel
    assert [c.split()[0] for c in made].count("eval") == 18 and sum(c.startswith("train ") for c in made) == 2
    assert f"train {out}/emma --output-layer groc" in "\n".join(made) and any(line.endswith(f"-o {out}/groc") for line in made)
    # a pipeline is printed as written, a command with its arguments quoted
    assert (f"+ head -n 7 groc_cli/data/austen-persuasion.txt | groc tokenize --lower | groc prepare --test - "
            f"-o {out}/near\n") in first.stderr
    assert "--split 170K\\,rest" in first.stderr
    assert len(list((out / "evals").glob("*.json"))) == 18 and not list(out.rglob("*.partial*"))
    assert ("in-domain (Emma, valid)      34740   4.6%      1430 | tied      390.0 |    401.2    390.0      390.0"
            in first.stdout)
    assert f"Outputs in {out}/;" in first.stdout
    assert f"Training curves (groc plot): {out}/curves.png" in first.stdout
    assert "groc\t-55.1\t17\t25.6" in first.stdout and sum(c.startswith("score ") for c in made) == 2

    calls.unlink()
    second = run()
    assert second.returncode == 0, second.stderr
    assert not calls.exists()  # nothing ran again
    assert f"= {out}/near (done)" in second.stderr and f"= {out}/tied/summary.json (trained)" in second.stderr
    table = lambda text: text.rsplit(";", 1)[0]  # all but the running time
    assert table(second.stdout) == table(first.stdout)

    # TEST_LINES that head cannot take stopped the run after its first step, with two errors
    for bad in ("abc", "0"):
        r = subprocess.run(["bash", "-c", fake + f"bash {REPO}/recipes/quickstart.sh"], capture_output=True, text=True,
                           env={**env, "TEST_LINES": bad, "OUT": str(tmp_path / "bad")}, stdin=subprocess.DEVNULL)
        assert r.returncode == 2 and r.stderr.strip().splitlines() == [
            f"quickstart: TEST_LINES must be a whole number of at least 1, not '{bad}'"]
        assert not calls.exists() and not (tmp_path / "bad").exists()


@pytest.mark.slow
def test_quickstart_run_from_a_terminal_tests_on_its_default_lines_whatever_the_terminal_height(tmp_path):
    """bash sets LINES to the terminal's height once a command has run (checkwinsize), and xterm's
    `resize` exports it: the recipes read LINES for their test-set size, so README's first command,
    typed in a 33-row terminal, tested on 33 lines of each novel and printed another table."""
    import fcntl
    import pty
    import struct
    import termios
    import threading

    calls = tmp_path / "calls"
    env = recipe_env(tmp_path, OUT=str(tmp_path / "qs"), CALLS=str(calls), LINES="7")
    env.pop("TEST_LINES", None)
    try:
        master, terminal = pty.openpty()
    except OSError as e:  # a container without /dev/ptmx
        pytest.skip(f"no pseudo-terminal: {e}")
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 100, 0, 0))  # 33 rows, 100 columns
    shown = []

    def drain():  # what the recipe writes to the terminal (its stderr), read so that it never blocks
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal's last writer has gone
                return
            if not chunk:
                return
            shown.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        r = subprocess.run(["bash", "-c", QUICKSTART_GROC + f"bash {REPO}/recipes/quickstart.sh"], stdout=subprocess.PIPE,
                           stderr=terminal, stdin=subprocess.DEVNULL, env=env, timeout=120)
    finally:
        os.close(terminal)
        reader.join(timeout=10)
        os.close(master)
    assert r.returncode == 0, b"".join(shown).decode(errors="replace")
    assert calls.read_text().splitlines().count("tokenize 2500") == 2  # the default, not 33 or 7


@pytest.mark.slow
def test_recipes_cutting_the_same_slices_at_once_all_succeed(tmp_path):
    """Issue 91 §5: tiny-scale slices are cut outside the stage locks; under one fixed .partial name
    one of several recipes died in most trials; GNU mv then failed now and again when the slice
    appeared or went under it. Each cuts under its own name and links it into place."""
    src, dst = tmp_path / "train.txt", tmp_path / "results" / "work" / "raw" / "slice.txt"
    src.write_text("".join(f"line {i} of the text\n" for i in range(2000)))
    dst.parent.mkdir(parents=True)
    loop = f"for i in $(seq 120); do rm -f {dst}; cut_slice {src} {dst} || exit 1; done"
    env = recipe_env(tmp_path)
    racers = [subprocess.Popen(["bash", "-c", f"NAME=r{k}; source {REPO}/recipes/lib/common.sh; {loop}"], env=env,
                               stderr=subprocess.PIPE, text=True) for k in range(6)]
    results = [(r.wait(timeout=120), r.stderr.read()) for r in racers]
    assert all(code == 0 for code, _ in results), results
    r = bash(f"cut_slice {src} {dst}", tmp_path)
    assert r.returncode == 0 and dst.read_text() == "".join(f"line {i} of the text\n" for i in range(15))
    assert [p.name for p in dst.parent.iterdir()] == ["slice.txt"]  # no temporary left


@pytest.mark.parametrize("kinds", [" ", "\t \n"])
def test_a_blank_kinds_is_refused(tmp_path, kinds):
    r = bash("select_kinds tied groc; echo trained $KINDS", tmp_path, KINDS=kinds)
    assert r.returncode == 2 and "trained" not in r.stdout
    assert r.stderr.strip().splitlines() == ["t: KINDS is blank; name models of tied groc, or leave KINDS unset for all"]


def test_slim_records_keeps_what_reports_read_at_float32(tmp_path):
    """recipes/lib/slim_records.py: a per-token table without a cache loses final_logp (equal to model_logp) and
    keeps model_logp as float32 with its metadata; one with a cache keeps both columns; other tables stay."""
    import numpy as np
    import pyarrow as pa

    logp = np.log(np.linspace(0.01, 0.9, 50))
    meta = {b"groc": b'{"split": "test"}'}
    plain = pa.table({"word": ["w"] * 50, "model_logp": logp, "final_logp": logp}).replace_schema_metadata(meta)
    cached = pa.table({"word": ["w"] * 50, "model_logp": logp, "final_logp": logp + 0.1})
    (tmp_path / "r").mkdir()
    pq.write_table(plain, tmp_path / "r" / "test.parquet")
    pq.write_table(cached, tmp_path / "r" / "cache.parquet")
    pq.write_table(pa.table({"epoch": [1, 2]}), tmp_path / "r" / "metrics.parquet")
    script = [sys.executable, str(REPO / "recipes" / "lib" / "slim_records.py")]
    r = subprocess.run([*script, str(tmp_path / "r")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("slimmed") == 2
    slim = pq.read_table(tmp_path / "r" / "test.parquet")
    assert slim.column_names == ["word", "model_logp"] and slim.schema.field("model_logp").type == pa.float32()
    assert slim.schema.metadata == meta
    np.testing.assert_allclose(slim["model_logp"].to_numpy(), logp, rtol=1e-7)
    kept = pq.read_table(tmp_path / "r" / "cache.parquet")
    assert kept.column_names == ["word", "model_logp", "final_logp"]
    assert kept.schema.field("final_logp").type == pa.float32()
    assert pq.read_table(tmp_path / "r" / "metrics.parquet")["epoch"].to_pylist() == [1, 2]
    again = subprocess.run([*script, str(tmp_path / "r")], capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout == ""  # already slim: nothing rewritten
    missing = subprocess.run([*script, str(tmp_path / "nope")], capture_output=True, text=True)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
