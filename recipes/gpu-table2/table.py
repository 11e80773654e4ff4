"""Table 2 from one GPU window (recipes/gpu-table2/run.sh collect)."""

from __future__ import annotations

from pathlib import Path

from report import DATASET_NAMES, Table, recipe, report

PAPER_TABLE2 = recipe("table2").PAPER_TABLE2


@report
def gpu_table2(out: Path, state: Path) -> None:
    """Table 2 from one GPU window (gpu-table2.sh): every started run, however it ended, with the
    prefix regularization and precision its config.json records."""
    from window import _json, runs  # recipes/lib/window.py: the window's runs and how each ended

    start = _json(state / "start.json")
    ds = start["dataset"]
    t = Table("table2", f"Table 2 in one window: {DATASET_NAMES[ds]}, SCALE={start['scale']}, MINUTES={start['minutes']} "
              f"({start['device']})",
              ["dataset", "output", "ended", "epochs", "best_epoch", "minutes", "params_M", "valid_ppl", "test_ppl",
               "emb_dropout", "layer_dropout", "dropout", "out_dropout", "precision", "paper_params_M",
               "paper_test_ppl"],
              {"params_M": ".2f", "minutes": ".1f", "epochs": "d", "best_epoch": "d", "emb_dropout": ".2f",
               "layer_dropout": ".2f", "dropout": ".2f", "out_dropout": ".2f"})
    for r in runs(state):
        model = (r["config"] or {}).get("model", {})
        train = (r["config"] or {}).get("train", {})
        ended = r["state"] if r["state"] in ("training", "died") else f"{r['state']}: {r['detail'].split(' (')[0]}"
        p = PAPER_TABLE2[r["kind"]][0 if ds == "ptb" else 1]
        t.add(dataset=DATASET_NAMES[ds], output=r["kind"], ended=ended, epochs=r["epochs"], best_epoch=r["best_epoch"],
              minutes=r["minutes"], params_M=r["config"]["parameters"] / 1e6 if r["config"] else None,
              valid_ppl=r["best_valid_ppl"], test_ppl=(r["evaluation"] or {}).get("perplexity"),
              emb_dropout=model.get("emb_dropout"),
              layer_dropout=model.get("layer_dropout") if model.get("layer_dropout") is not None else model.get("dropout"),
              dropout=model.get("dropout"), out_dropout=model.get("out_dropout"),
              precision=("bfloat16 autocast" if train.get("amp") else "float32") if train else None,
              paper_params_M=p[0], paper_test_ppl=p[1])
    t.write(out, notes=[
        "ended: finished by early-stopping (converged: 8 epochs without validation improvement), max-minutes (the "
        "window's MINUTES, not converged) or max-epochs; stopped: interrupted or killed, its best checkpoint "
        "evaluated; died: failed (runs.json has its log). Only early-stopping rows are the paper's measurement.",
        "test_ppl: the best checkpoint (lowest validation perplexity) on the test split, closed vocabulary.",
        f"Settings: recipes/configs/{DATASET_NAMES[ds]}/<output>.toml (appendix B.1 + Table 8); the regularization "
        "columns are each run's own config.json (emb_dropout on the input embeddings, layer_dropout between the LSTM "
        "layers, dropout after the last, out_dropout on the output embeddings).",
        f"Runs started {start['started']}; commands in commands.log, machine in environment.json."])


@report
def table2_paper(out: Path, records: Path) -> None:
    """Table 2 on PTB at the paper's scale, one row a GPU slot (gpu-table2.sh row, kept by keep): every row with a
    record in records/ptb-KIND/, the paper's numbers beside ours."""
    from paper_rows import ORDER  # recipes/lib/paper_rows.py: the slots' order
    from report import load, summary

    t = Table("table2-paper", "Table 2 on PTB at the paper's scale (2 x 1024), one row a GPU slot",
              ["output", "params_M", "epochs", "stopped", "minutes", "device", "train_ppl", "valid_ppl", "test_ppl",
               "test_open_ppl", "paper_params_M", "paper_test_ppl"],
              {"params_M": ".2f", "epochs": "d", "minutes": ".1f"})
    for kind in [k for k in ORDER if (records / f"ptb-{k}").is_dir()]:
        row = records / f"ptb-{kind}"
        s = summary(row)
        env = load(row / "config.json").get("environment", {})
        p = PAPER_TABLE2[kind][0]
        t.add(output=kind, params_M=s["parameters"] / 1e6, epochs=s["epochs"], stopped=s["stop_reason"],
              minutes=s["seconds"] / 60, device=env.get("gpu") or env.get("device"),
              train_ppl=load(row / "train.json")["perplexity"], valid_ppl=s["best_valid_ppl"],
              test_ppl=load(row / "test.json")["perplexity"], test_open_ppl=load(row / "test-open.json")["perplexity"],
              paper_params_M=p[0], paper_test_ppl=p[1])
    t.write(out, notes=[
        "stopped: early-stopping = converged (8 epochs without validation improvement); max-minutes = the slot's time "
        "ended it first (not converged: the next slot trains the row again from its first epoch).",
        "Settings: recipes/configs/penn/<output>.toml (appendix B.1 + Table 8; GroC with the paper-size surface "
        "encoder), float32, one row alone on the GPU, its steps as CUDA graphs.",
        "test_ppl: the best checkpoint on the test split, closed vocabulary; test_open_ppl: --vocab union; train_ppl: "
        "the training split without dropout."])
