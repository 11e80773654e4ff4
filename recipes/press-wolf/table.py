"""Press & Wolf (2017) Table 6 on CPU (recipes/press-wolf/run.sh)."""

from __future__ import annotations

from pathlib import Path

from report import Table, load, report, summary


# Press & Wolf's Table 6 is an image in our copy of the paper: only the parameter counts its text gives
# (4.6M, 2.7M tied) and the small model's published perplexities are filled in.
# row: (label, paper parameters in millions, published valid, published test, source)
PRESS_WOLF_ROWS = {
    "untied": ("small (Zaremba et al. 2014)", 4.6, 120.7, 114.5, "Zaremba et al. 2014; TF tutorial: 121.39 / 115.91"),
    "wt": ("small + WT", 2.7, None, None, "Press & Wolf Table 6"),
    "pr": ("small + PR", 4.6, None, None, "Press & Wolf Table 6"),
    "wt-pr": ("small + WT + PR", 2.7, None, None, "Press & Wolf Table 6"),
}
#: What Press & Wolf's Table 6 says of each of their rows against the small model (its image gives no number we
#: can read): the direction docs/reproduction.md compares.
PRESS_WOLF_DIRECTION = {"wt": "below untied", "pr": "below untied", "wt-pr": "lowest of the four"}


@report
def press_wolf(out: Path, records: Path, rows: list[str]) -> None:
    """Press & Wolf's Table 6: the small PTB model untied, tied (WT), with projection regularization (PR), both,
    from each row's record (RECORDS/ROW/: the run's summary.json and its test.json)."""
    t = Table("press-wolf", "Press & Wolf (2017) Table 6 on CPU: Zaremba et al.'s small PTB model, no dropout",
              ["model", "params", "epochs", "train_ppl", "valid_ppl", "test_ppl", "minutes", "paper_params_M",
               "paper_valid", "paper_test"], {"params": ",", "epochs": "d", "minutes": ".0f", "train_ppl": ".1f"})
    for r in rows:
        s = summary(records / r)
        e = load(records / r / "test.json")
        base = r.removesuffix("-authors-init")  # PR_INIT=authors: the PR rows with the reference code's P
        label, params, valid, test, _ = PRESS_WOLF_ROWS[base]
        label += " (authors' P init)" if base != r else ""
        t.add(model=label, params=s["parameters"], epochs=s["epochs"], train_ppl=s["final"]["train_ppl"],
              valid_ppl=s["final"]["valid_ppl"], test_ppl=e["perplexity"], minutes=s["seconds"] / 60,
              paper_params_M=params, paper_valid=valid, paper_test=test)
    notes = ["2 x 200 LSTM, 200-d embeddings, no dropout, U(-0.1, 0.1), batch 20, BPTT 20, SGD 1.0 (--lr 20 on groc's "
             "per-token mean loss), x0.5 after every epoch from the 6th, 13 epochs, clip 5 (--clip 0.25); PR: "
             "projection_reg 1/5200, their l2_loss(P)/(6.5 B) on a loss summed over T steps.",
             "valid: the last epoch's, 20 streams; test: the last epoch's model on one stream (as the reference code).",
             "Published: the small model's valid / test, " + PRESS_WOLF_ROWS["untied"][4] + "; the WT and PR rows of Press & Wolf's "
             "Table 6 are an image in our copy of the paper, so only the direction (each below untied, WT + PR "
             "lowest) and the parameter counts of its text are compared."]
    t.write(out, notes=notes)
