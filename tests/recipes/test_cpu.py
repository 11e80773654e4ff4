"""The CPU reproduction recipes (recipes/press-wolf.sh and recipes/table2-cpu.sh), run with a stand-in
groc that records its calls and writes the outputs a finished stage leaves: each row trains with the
settings the recipe documents, is evaluated as documented, the table comes from those outputs, and
a second run does nothing again."""

import json
import subprocess

import pyarrow.parquet as pq
import pytest

from tests.recipes.test_lib import REPO, recipe_env

# A stand-in for groc: prepare/lexicon make their output, train writes the summary.json of a finished
# run, eval prints a record (its perplexity from the run's name, PPL_<name> in the environment, or 60.0
# for --split train) and writes --per-token, compare prints bins.
FAKE = r'''groc() {
  local o="" prev="" run="" pt="" a; for a in "$@"; do
    [ "$prev" = -o ] && o=$a; [ "$prev" = --per-token ] && pt=$a; prev=$a; done
  echo "$*" >> "$CALLS"
  case $1 in
    --version) echo "groc 0.1.0" ;;
    prepare) mkdir -p "$o"; case " $* " in *" - "*) cat > /dev/null ;; esac ;;
    tokenize) cat ;;
    lexicon) touch "$o" ;;
    train) mkdir -p "$o"; sleep "${TRAIN_SECONDS:-0}"; echo '{"parameters": 2653200, "epochs": 13, "stop_reason": "early-stopping", "seconds": 4321.0,
             "best_valid_ppl": 110.5, "final": {"train_ppl": 40.25, "valid_ppl": 121.5}}' > "$o/summary.json"
           echo '{}' > "$o/config.json"; touch "$o/metrics.parquet" ;;
    eval) run=$(basename "$2"); run=${run//-/_}; local var="PPL_$run"; [ -n "$pt" ] && touch "$pt"
          case " $* " in *" --split train "*) echo '{"perplexity": 60.0}' ;; *) echo "{\"perplexity\": ${!var:-100.0}}" ;; esac ;;
    compare) echo '{"bins": [{"bin": "1-49", "median_diff": -0.25}, {"bin": "0", "median_diff": null}],
               "overall": {"median_diff": -0.05}, "words": {"total_diff": 451.25,
               "b_worse": [{"word": "<unk>", "tokens": 4794, "sum_diff": 697.375}], "b_better": []}}' ;;
  esac
}; export -f groc; '''


def run_recipe(recipe: str, tmp_path, **env):
    (tmp_path / "ptb").mkdir(exist_ok=True)
    full = recipe_env(tmp_path, CALLS=str(tmp_path / "calls"), **env)
    return subprocess.run(["bash", "-c", FAKE + f"bash {REPO}/recipes/{recipe}"], capture_output=True, text=True,
                          env=full, stdin=subprocess.DEVNULL)


def calls(tmp_path) -> list[str]:
    path = tmp_path / "calls"
    lines = path.read_text().splitlines() if path.exists() else []
    return [c for c in lines if c != "--version"]


@pytest.mark.slow
def test_press_wolf_trains_the_four_rows_as_the_reference_code_and_writes_the_table(tmp_path):
    first = run_recipe("press-wolf.sh", tmp_path, PPL_untied="114.0", PPL_wt="105.5")
    assert first.returncode == 0, first.stderr
    made = calls(tmp_path)
    trains = {c.rsplit("/", 1)[1]: c for c in made if c.startswith("train ")}
    assert set(trains) == {"untied", "wt", "pr", "wt-pr"}
    reference = ("--emb 200 --hidden 200 --layers 2 --dropout 0 --init-range 0.1 --batch-size 20 --bptt 20 "
                 "--eval-batch-size 20 --optimizer sgd --schedule epochs --lr 20 --clip 0.25 --lr-decay 0.5 "
                 "--lr-decay-after 4 --max-epochs 13 --patience 13 --seed 1 --log-every 500 --checkpoint-every 500")
    assert all(reference in c for c in trains.values())
    assert "--output-layer lookup -o" in trains["untied"] and "--output-layer tied -o" in trains["wt"]
    # projection_reg = 1 / (13 * 20 * 20): tf.nn.l2_loss(P) / (6.5 * batch) on a loss summed over 20 steps
    # PR_INIT defaults to identity (P = I, no bias); authors is the reference code's random P with a bias
    assert "--output-layer lookup --projection-reg 0.00019230769230769231 --projection-init identity -o" in trains["pr"]
    assert "--output-layer tied --projection-reg 0.00019230769230769231 --projection-init identity -o" in trains["wt-pr"]
    evals = [c for c in made if c.startswith("eval ")]
    assert len(evals) == 4 and all(c.endswith("--split test --checkpoint last") for c in evals)
    table = (tmp_path / "results" / "press-wolf" / "press-wolf.md").read_text()
    assert "| small (Zaremba et al. 2014) | 2,653,200 | 13 | 40.2 | 121.5 | 114.0 | 72 | 4.6 | 120.7 | 114.5 |" in table
    assert "| small + WT | 2,653,200 | 13 | 40.2 | 121.5 | 105.5 | 72 | 2.7 | – | – |" in table
    assert table in first.stdout and pq.read_table(tmp_path / "results" / "press-wolf" / "press-wolf.parquet").num_rows == 4

    records = tmp_path / "results" / "press-wolf" / "records"
    assert sorted(p.name for p in records.iterdir()) == ["pr", "untied", "wt", "wt-pr"]
    assert sorted(p.name for p in (records / "wt").iterdir()) == ["config.json", "metrics.parquet", "summary.json",
                                                                 "test.json"]
    assert json.loads((records / "wt" / "test.json").read_text())["perplexity"] == 105.5

    (tmp_path / "calls").unlink()
    second = run_recipe("press-wolf.sh", tmp_path, PPL_untied="114.0", PPL_wt="105.5")
    assert second.returncode == 0, second.stderr
    assert calls(tmp_path) == []  # every row was finished: nothing trains or evaluates again

    # The records alone make the table: with the runs and evaluations gone, nothing trains again.
    subprocess.run(["rm", "-r", str(tmp_path / "results" / "work" / "runs"), str(tmp_path / "results" / "work" / "evals"),
                    str(tmp_path / "results" / "press-wolf" / "press-wolf.md")], check=True)
    third = run_recipe("press-wolf.sh", tmp_path, PPL_untied="114.0", PPL_wt="105.5")
    assert third.returncode == 0, third.stderr
    assert calls(tmp_path) == [] and f"= {records}/wt (kept)" in third.stderr
    assert (tmp_path / "results" / "press-wolf" / "press-wolf.md").read_text() == table


@pytest.mark.slow
def test_cpu_recipes_refuse_bad_rows_and_jobs_before_any_work(tmp_path):
    """JOBS=0 once started rows one at a time and then reported a failure that never happened; EPOCHS=0 let
    every row fail after the data steps. Each is now one line before any work."""
    for recipe, env, line in (
            ("press-wolf.sh", {"ROWS": "untied bogus"}, "press-wolf: ROWS takes untied wt pr wt-pr, not 'bogus'"),
            ("press-wolf.sh", {"JOBS": "0"}, "press-wolf: JOBS must be a whole number of at least 1, not '0'"),
            ("table2-cpu.sh", {"KINDS": "tied bogus"}, "table2-cpu: KINDS takes tied tied-hidden lookup adaptive bilinear "
                                                       "deep-residual convolutional groc groc-hidden groc-free-bias, not 'bogus'"),
            ("table2-cpu.sh", {"JOBS": "x"}, "table2-cpu: JOBS must be a whole number of at least 1, not 'x'"),
            ("table2-cpu.sh", {"JOBS": "0"}, "table2-cpu: JOBS must be a whole number of at least 1, not '0'"),
            ("table2-cpu.sh", {"EPOCHS": "0"}, "table2-cpu: EPOCHS must be a whole number of at least 1, not '0'"),
            ("table2-cpu.sh", {"EPOCHS": "2x"}, "table2-cpu: EPOCHS must be a whole number of at least 1, not '2x'"),
            ("table2-cpu.sh", {"DROPOUT": "1"}, "table2-cpu: DROPOUT must be a rate in [0, 1), not '1'"),
            ("table2-cpu.sh", {"DROPOUT": "0,3"}, "table2-cpu: DROPOUT must be a rate in [0, 1), not '0,3'"),
            ("table2-cpu.sh", {"CHECKPOINT_EVERY": "1e3"},
             "table2-cpu: CHECKPOINT_EVERY must be a whole number of at least 0, not '1e3'")):
        r = run_recipe(recipe, tmp_path, **env)
        assert r.returncode == 2, (recipe, r.stderr)
        assert r.stderr.strip().splitlines() == [line], (recipe, env, r.stderr)
        assert calls(tmp_path) == [] and not (tmp_path / "results").exists()  # no log, no empty folders
    r = run_recipe("table2-cpu.sh", tmp_path, KINDS="tied", CHECKPOINT_EVERY="0")  # 0: at epoch ends only
    assert r.returncode == 0, r.stderr
    assert "--checkpoint-every 0" in next(c for c in calls(tmp_path) if c.startswith("train "))
    converge = subprocess.run(["bash", str(REPO / "recipes" / "converge.sh")], capture_output=True, text=True,
                              env=recipe_env(tmp_path, JOBS="0", OUT=str(tmp_path / "converge")))
    assert converge.returncode == 2 and converge.stderr.strip().splitlines() == [
        "converge: JOBS must be a whole number of at least 1, not '0'"]
    assert not (tmp_path / "converge").exists()


@pytest.mark.slow
def test_press_wolf_pr_rows_with_the_authors_projection_init_are_rows_of_their_own(tmp_path):
    """PR_INIT=authors trains the PR rows into their own runs and records: the identity rows already finished
    are not taken for them, and the table names the initialisation."""
    assert run_recipe("press-wolf.sh", tmp_path, ROWS="pr wt-pr").returncode == 0
    (tmp_path / "calls").unlink()
    r = run_recipe("press-wolf.sh", tmp_path, ROWS="pr wt-pr", PR_INIT="authors", PPL_pr_authors_init="131.0")
    assert r.returncode == 0, r.stderr
    trains = [c for c in calls(tmp_path) if c.startswith("train ")]
    assert sorted(c.rsplit("/", 1)[1] for c in trains) == ["pr-authors-init", "wt-pr-authors-init"]  # two at a time
    assert all("--projection-init authors -o" in c for c in trains)
    records = tmp_path / "results" / "press-wolf" / "records"
    assert sorted(p.name for p in records.iterdir()) == ["pr", "pr-authors-init", "wt-pr", "wt-pr-authors-init"]
    table = (tmp_path / "results" / "press-wolf" / "press-wolf.md").read_text()
    assert "| small + PR (authors' P init) | 2,653,200 | 13 | 40.2 | 121.5 | 131.0 |" in table


@pytest.mark.slow
def test_table2_cpu_trains_every_layer_with_its_table8_config_and_one_prefix(tmp_path):
    ppl = {"PPL_ptb_tied": "101.0", "PPL_ptb_adaptive": "95.0", "PPL_ptb_groc": "90.0"}
    first = run_recipe("table2-cpu.sh", tmp_path, **ppl)
    assert first.returncode == 0, first.stderr
    made = calls(tmp_path)
    trains = {c.rsplit("/ptb-", 1)[1]: c for c in made if c.startswith("train ")}
    assert set(trains) == {"lookup", "convolutional", "tied", "tied-hidden", "bilinear", "deep-residual", "adaptive", "groc",
                           "groc-hidden", "groc-free-bias"}
    prefix = "--emb 200 --hidden 200 --layers 2 --dropout 0.3 --max-epochs 200 --seed 1"
    for kind, c in trains.items():
        # the A/B rows: the same layer without input-embedding dropout, or GroC with a free bias
        layer = kind.removesuffix("-hidden").removesuffix("-free-bias")
        config = "groc-small-encoder" if layer == "groc" else layer  # the encoder the committed rows trained with
        assert f"--config {REPO}/recipes/configs/penn/{config}.toml {prefix}" in c, c
        assert ("--emb-dropout 0 " if kind.endswith("-hidden") else "--emb-dropout 0.3") in c
        assert ("--bias free" in c) == (kind == "groc-free-bias")
        assert ("--lexicon" in c) == (layer == "groc") and "--checkpoint-every 300" in c
    evals = [c for c in made if c.startswith("eval ")]
    assert len(evals) == 30 and sum("--per-token" in c for c in evals) == 10 and sum("--vocab union" in c for c in evals) == 10
    assert sum(c.endswith("--split train") for c in evals) == 10
    compares = [c for c in made if c.startswith("compare ")]
    assert len(compares) == 6 and all(c.endswith("--words 3 --column model --names " + c.split("ptb-")[1].split("/")[0]
                                                 + ",groc") for c in compares)
    table = (tmp_path / "results" / "table2-cpu" / "table2-cpu.md").read_text()
    assert "| tied | 2,653,200 | 13 | early-stopping | 72 | 60.0 | 110.5 | 101.0 | 101.0 | 86.2 |" in table
    assert "| tied, hidden-unit dropout only (A/B) |" in table and "| groc, hidden-unit dropout only (A/B) |" in table
    assert "| groc, free per-word bias (A/B) |" in table
    assert "GroC minus tied: median loss per training-frequency bin" in table
    assert "GroC minus the best table model, adaptive: median loss" in table and "1-49: -0.250; overall -0.050" in table
    assert ("GroC minus tied, the words that make the difference: summed over every token +451.2 nats; costing GroC "
            "most <unk> +697.4 (4,794 tokens); gaining it most none." in table)

    (tmp_path / "calls").unlink()
    assert run_recipe("table2-cpu.sh", tmp_path, **ppl).returncode == 0
    assert calls(tmp_path) == []


@pytest.mark.slow
def test_table2_cpu_starts_groc_first_and_keeps_the_table_in_its_order(tmp_path):
    """GroC's row takes as long as several others: started last (the table's order), it trained alone at
    the end with the other cores idle. The two GroC rows start first now; the table keeps its order, and a
    KINDS given starts in its own order."""
    r = run_recipe("table2-cpu.sh", tmp_path, JOBS="1")
    assert r.returncode == 0, r.stderr
    order = [c.rsplit("/ptb-", 1)[1] for c in calls(tmp_path) if c.startswith("train ")]
    assert order == ["groc", "groc-hidden", "groc-free-bias", "tied", "tied-hidden", "lookup", "adaptive", "bilinear",
                     "deep-residual", "convolutional"]
    table = (tmp_path / "results" / "table2-cpu" / "table2-cpu.md").read_text()
    rows = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1:] == ["tied", "tied, hidden-unit dropout only (A/B)", "lookup", "adaptive", "bilinear", "deep-residual",
                        "convolutional", "groc", "groc, hidden-unit dropout only (A/B)", "groc, free per-word bias (A/B)"]

    (tmp_path / "calls").unlink()
    subprocess.run(["rm", "-r", str(tmp_path / "results")], check=True)
    assert run_recipe("table2-cpu.sh", tmp_path, JOBS="1", KINDS="tied groc").returncode == 0
    assert [c.rsplit("/ptb-", 1)[1] for c in calls(tmp_path) if c.startswith("train ")] == ["tied", "groc"]


@pytest.mark.slow
def test_table2_cpu_rows_with_records_outlive_the_work_folder(tmp_path):
    """Each finished row's record (summary, config, per-epoch metrics, its four evaluations) is written to
    RECORDS; with the work folder and Figure 3's comparisons lost, a re-run trains and evaluates nothing,
    makes the comparisons again from the records and writes the same table."""
    ppl = {"PPL_ptb_tied": "101.0", "PPL_ptb_adaptive": "95.0", "PPL_ptb_groc": "90.0"}
    records = tmp_path / "kept"
    evals = tmp_path / "results" / "work" / "evals" / "cpu"  # what a capture killed with its session left
    evals.mkdir(parents=True)
    (evals / "ptb-groc.test.json.partial.AbC123").write_text('{"perplexity": 1')
    assert run_recipe("table2-cpu.sh", tmp_path, RECORDS=str(records), **ppl).returncode == 0
    kinds = ["lookup", "convolutional", "tied", "tied-hidden", "bilinear", "deep-residual", "adaptive", "groc", "groc-hidden",
             "groc-free-bias"]
    assert sorted(p.name for p in records.iterdir()) == sorted(f"ptb-{k}" for k in kinds)
    assert sorted(p.name for p in (records / "ptb-groc").iterdir()) == [
        "config.json", "metrics.parquet", "summary.json", "test-open.json", "test.json", "test.parquet", "train.json"]
    assert json.loads((records / "ptb-adaptive" / "test.json").read_text())["perplexity"] == 95.0
    out = tmp_path / "results" / "table2-cpu"
    table = (out / "table2-cpu.md").read_text()

    subprocess.run(["rm", "-r", str(tmp_path / "results" / "work"), str(tmp_path / "calls")], check=True)
    for f in out.glob("compare-*.json"):
        f.unlink()
    r = run_recipe("table2-cpu.sh", tmp_path, RECORDS=str(records), **ppl)
    assert r.returncode == 0, r.stderr
    assert f"= {records}/ptb-groc (kept)" in r.stderr
    made = calls(tmp_path)
    assert not [c for c in made if c.split()[0] in ("train", "eval")]
    assert sorted(c.split()[1] for c in made if c.startswith("compare ")) == sorted(
        f"{records}/ptb-{k}/test.parquet" for k in kinds if k not in ("groc", "tied-hidden", "groc-hidden", "groc-free-bias"))
    assert (out / "table2-cpu.md").read_text() == table


@pytest.mark.slow
def test_table2_cpu_two_processes_with_one_queue_from_both_ends_train_each_row_once(tmp_path):
    """docs/reproduction.md runs the table queue from both ends in two processes: each row trains and
    is evaluated once, by whichever process reaches it first; the other waits for it and skips it."""
    (tmp_path / "ptb").mkdir()
    env = recipe_env(tmp_path, CALLS=str(tmp_path / "calls"), TRAIN_SECONDS="1")
    procs = [subprocess.Popen(["bash", "-c", FAKE + f"bash {REPO}/recipes/table2-cpu.sh"], env={**env, "KINDS": kinds},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
             for kinds in ("tied lookup adaptive bilinear", "bilinear adaptive lookup tied")]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    made = calls(tmp_path)
    trained = sorted(c.rsplit("/ptb-", 1)[1] for c in made if c.startswith("train "))
    assert trained == ["adaptive", "bilinear", "lookup", "tied"]  # once each
    assert sum(c.startswith("eval ") for c in made) == 12
    records = tmp_path / "results" / "table2-cpu" / "records"
    assert sorted(p.name for p in records.iterdir()) == ["ptb-adaptive", "ptb-bilinear", "ptb-lookup", "ptb-tied"]


def test_table2_cpu_some_kinds_then_the_table(tmp_path):
    r = run_recipe("table2-cpu.sh", tmp_path, KINDS="tied tied-hidden")
    assert r.returncode == 0, r.stderr
    assert "run without KINDS" in r.stderr and not (tmp_path / "results" / "table2-cpu" / "table2-cpu.md").exists()
    assert sum(c.startswith("train ") for c in calls(tmp_path)) == 2
    report = json.dumps(calls(tmp_path))
    assert "compare" not in report


@pytest.mark.slow
def test_table2_cpu_continues_a_row_that_a_lower_epochs_cap_ended_and_evaluates_it_again(tmp_path):
    """A row that the EPOCHS safeguard ended (stop_reason max-epochs) is finished for that EPOCHS, and
    continued from its last checkpoint (--resume, the raised cap, no --config) by a re-run with a
    higher one; its old evaluations move to evals/cpu/capN/ and the row is evaluated again."""
    assert run_recipe("table2-cpu.sh", tmp_path, KINDS="tied").returncode == 0
    run = tmp_path / "results" / "work" / "runs" / "cpu" / "ptb-tied"
    evals = tmp_path / "results" / "work" / "evals" / "cpu"
    (run / "summary.json").write_text(json.dumps({"epochs": 100, "stop_reason": "max-epochs", "best_valid_ppl": 101.45}))
    old = {f: (evals / f).read_bytes() for f in ("ptb-tied.test.json", "ptb-tied.test-open.json", "ptb-tied.train.json")}
    (tmp_path / "calls").unlink()
    assert run_recipe("table2-cpu.sh", tmp_path, KINDS="tied", EPOCHS="100").returncode == 0
    assert calls(tmp_path) == []  # the cap it was given: finished

    r = run_recipe("table2-cpu.sh", tmp_path, KINDS="tied", EPOCHS="200", PPL_ptb_tied="93.5")
    assert r.returncode == 0, r.stderr
    assert "ended by the safeguard at 100 epochs; continuing it to 200" in r.stderr
    made = calls(tmp_path)
    assert [c for c in made if c.startswith("train ")] == [
        f"train {tmp_path}/results/work/ptb --emb 200 --hidden 200 --layers 2 --dropout 0.3 --max-epochs 200 --seed 1 "
        f"--log-every 500 --checkpoint-every 300 --emb-dropout 0.3 -o {run} --resume"]
    assert sum(c.startswith("eval ") for c in made) == 3
    assert {f: (evals / "cap100" / f).read_bytes() for f in old} == old and (evals / "cap100" / "ptb-tied.test.parquet").exists()
    assert json.loads((evals / "ptb-tied.test.json").read_text())["perplexity"] == 93.5
    records = tmp_path / "results" / "table2-cpu" / "records"
    assert json.loads((records / "cap100" / "ptb-tied" / "test.json").read_text())["perplexity"] == 100.0
    assert json.loads((records / "ptb-tied" / "test.json").read_text())["perplexity"] == 93.5

    (tmp_path / "calls").unlink()
    assert run_recipe("table2-cpu.sh", tmp_path, KINDS="tied", EPOCHS="200").returncode == 0
    assert calls(tmp_path) == []  # early stopping ended the continuation: done


@pytest.mark.slow
def test_converge_trains_the_bias_and_encoder_ab_models_and_keeps_each_record(tmp_path):
    """recipes/converge.sh's one-variable A/Bs of the paper-GroC issue: the free bias, the paper-size encoder and
    both, and mixed precision, each GroC (authors' init) with one change; each model's record is kept whole in
    RECORDS/MODEL/."""
    out, records = tmp_path / "converge", tmp_path / "records"
    models = "tied groc groc-free-bias groc-paper-encoder groc-paper-encoder-free-bias groc-amp"
    full = recipe_env(tmp_path, CALLS=str(tmp_path / "calls"), OUT=str(out), RECORDS=str(records), MODELS=models,
                      JOBS="1")
    r = subprocess.run(["bash", "-c", FAKE + f"bash {REPO}/recipes/converge.sh"], capture_output=True, text=True,
                       env=full, stdin=subprocess.DEVNULL, cwd=REPO)
    assert r.returncode == 0, r.stderr
    trains = {c.split(" -o ")[1].split()[0].rsplit("/", 1)[1]: c.split(" -o ")[0] for c in calls(tmp_path)
              if c.startswith("train ")}
    encoder = "char_activation=selu highway_activation=selu char_filters=[[1,32],[2,32],[3,64],[4,128],[5,256],[6,512]]"
    assert trains["groc-free-bias"].endswith("char_init=authors bias=free")
    assert trains["groc-paper-encoder"].endswith(f"char_init=authors {encoder} char_projection=true")
    assert trains["groc-paper-encoder-free-bias"].endswith(f"{encoder} char_projection=true bias=free")
    assert trains["groc-amp"].endswith("char_init=authors --amp")
    assert "bias=" not in trains["groc"] and "char_projection" not in trains["groc"] and "--amp" not in trains["groc"]
    assert sum(c.startswith("eval ") and c.endswith("--split train") for c in calls(tmp_path)) == 6
    assert sorted(p.name for p in records.iterdir()) == sorted(models.split())
    assert sorted(p.name for p in (records / "groc-free-bias").iterdir()) == [
        "config.json", "emma-closed.json", "emma-closed.parquet", "emma-open.json", "emma-train.json", "far-open.json",
        "metrics.parquet", "near-open.json", "summary.json"]
    table = (out / "converge.md").read_text()
    assert "| GroC, free per-word bias |" in table and "| GroC, paper-size encoder and free bias |" in table
    assert "| GroC, bfloat16 autocast (--amp) |" in table


@pytest.mark.slow
def test_converge_resumes_an_interrupted_run_without_its_key_value_settings(tmp_path):
    """A re-run continues a run that an interruption left with a checkpoint (RUN/last): `--resume`, which
    refuses KEY=VALUE overrides (the run's config.json has them), gets the flags alone."""
    out = tmp_path / "converge"
    (out / "runs" / "groc-paper-encoder" / "last").mkdir(parents=True)
    full = recipe_env(tmp_path, CALLS=str(tmp_path / "calls"), OUT=str(out), RECORDS=str(tmp_path / "records"),
                      MODELS="groc-paper-encoder", JOBS="1")
    r = subprocess.run(["bash", "-c", FAKE + f"bash {REPO}/recipes/converge.sh"], capture_output=True, text=True,
                       env=full, stdin=subprocess.DEVNULL, cwd=REPO)
    assert r.returncode == 0, r.stderr
    [train] = [c for c in calls(tmp_path) if c.startswith("train ")]
    assert train.endswith(f"-o {out}/runs/groc-paper-encoder --resume"), train
    assert "=" not in train and f"--lexicon {out}/lexicon.parquet" in train and "--emb 128" in train
