"""Tied and GroC trained to convergence on the embedded sample (recipes/converge/run.sh)."""

from __future__ import annotations

from pathlib import Path

from report import Table, load, report


CONVERGE_MODELS = {"tied": "tied", "groc": "GroC, authors' char-CNN init", "groc-uniform": "GroC, B.1 uniform init",
                   "tied-awd": "tied, authors' prefix dropouts", "groc-add": "GroC, forms added (authors' combine)",
                   "groc-charcnn": "GroC, authors' 1,024-filter selu char-CNN",
                   "groc-sparse": "GroC, sparse updates (update_prob 0.3)",
                   "groc-free-bias": "GroC, free per-word bias",
                   "groc-paper-encoder": "GroC, paper-size surface encoder",
                   "groc-paper-encoder-free-bias": "GroC, paper-size encoder and free bias",
                   "groc-amp": "GroC, bfloat16 autocast (--amp)"}


@report
def converge(out: Path, models: list[str], seconds: int) -> None:
    """Tied and GroC trained to convergence on the embedded sample (converge.sh)."""
    t = Table("converge", "Converged on CPU: Emma (160K training tokens), perplexity closed and open vocabulary",
              ["model", "params", "epochs", "stopped", "minutes", "train", "valid", "test_closed", "test_open",
               "near_open", "far_open"], {"params": ",", "epochs": "d", "minutes": ".0f"})
    for m in models:
        s = load(out / "runs" / m / "summary.json")
        ev = {k: load(out / "evals" / f"{m}-{k}.json")["perplexity"] for k in ("emma-closed", "emma-open", "near-open", "far-open")}
        train = out / "evals" / f"{m}-emma-train.json"
        t.add(model=CONVERGE_MODELS[m], params=s["parameters"], epochs=s["epochs"], stopped=s["stop_reason"],
              minutes=s["seconds"] / 60, train=load(train)["perplexity"] if train.exists() else None,
              valid=s["best_valid_ppl"], test_closed=ev["emma-closed"],
              test_open=ev["emma-open"], near_open=ev["near-open"], far_open=ev["far-open"])
    notes = ["train: the training split scored as the test split is, without dropout (how closely a model fits it).",
             "stopped: early-stopping = 8 epochs without validation improvement (converged); max-minutes = the "
             "MINUTES safeguard, max-epochs = EPOCHS (not converged).",
             "closed: the model's vocabulary (<unk> for words seen once); open: --vocab union, every test word scored "
             "(tied gives unseen words a uniform share, GroC composes them).",
             f"Outputs in {out}/; {seconds} s in all."]
    for m in models:
        path = out / "evals" / f"compare-tied-{m}.json"
        if m != "tied" and path.exists():
            r = load(path)
            bins = ", ".join(f"{b['bin']}: {b['median_diff']:+.3f}" for b in r["bins"] if b["median_diff"] is not None)
            notes.append(f"{CONVERGE_MODELS[m]} minus tied, median loss per training-frequency bin (nats, Emma test, "
                         f"groc compare): {bins}; overall {r['overall']['median_diff']:+.3f}.")
    t.write(out, notes=notes)
