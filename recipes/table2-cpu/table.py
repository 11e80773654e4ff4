"""Table 2 on PTB, every output layer trained to early stopping on CPU (recipes/table2-cpu/run.sh)."""

from __future__ import annotations

from pathlib import Path

from report import Table, load, recipe, report, summary

PAPER_TABLE2 = recipe("table2").PAPER_TABLE2


TABLE2_CPU_LABELS = {"tied-hidden": "tied, hidden-unit dropout only (A/B)",
                     "groc-hidden": "groc, hidden-unit dropout only (A/B)",
                     "groc-free-bias": "groc, free per-word bias (A/B)"}


def _words(words: dict) -> str:
    """groc compare --words, in one line: each way, the types and their summed loss difference (nats; infinite where
    a model gave a token probability 0, which groc compare's JSON writes as null)."""
    def nats(x) -> str:
        return "infinite" if x is None else f"{x:+,.1f}"

    def side(key: str) -> str:
        return ", ".join(f"{w['word']} {nats(w['sum_diff'])} ({w['tokens']:,} tokens)" for w in words[key]) or "none"
    return (f"summed over every token {nats(words['total_diff'])} nats; costing GroC most {side('b_worse')}; "
            f"gaining it most {side('b_better')}")


@report
def table2_cpu(out: Path, records: Path, kinds: list[str]) -> None:
    """Table 2 on PTB with every output layer trained to convergence on CPU (table2-cpu.sh), from the finished
    rows' records (records/ptb-KIND/) and Figure 3's comparisons in out."""
    t = Table("table2-cpu", "Table 2 on PTB, 2 x 200 prefix, every output layer trained to early stopping on CPU",
              ["output", "params", "epochs", "stopped", "minutes", "train_ppl", "valid_ppl", "test_ppl", "test_open_ppl",
               "paper_test_ppl"], {"params": ",", "epochs": "d", "minutes": ".0f"})
    tests = {}
    for kind in kinds:
        row = records / f"ptb-{kind}"
        s = summary(row)
        tests[kind] = load(row / "test.json")["perplexity"]
        t.add(output=TABLE2_CPU_LABELS.get(kind, kind), params=s["parameters"], epochs=s["epochs"],
              stopped=s["stop_reason"], minutes=s["seconds"] / 60, train_ppl=load(row / "train.json")["perplexity"],
              valid_ppl=s["best_valid_ppl"], test_ppl=tests[kind], test_open_ppl=load(row / "test-open.json")["perplexity"],
              paper_test_ppl=PAPER_TABLE2[kind][0][1] if kind in PAPER_TABLE2 else None)
    notes = ["Prefix: 2 LSTM layers, emb 200, 200 units, one dropout rate on the input embeddings, between the layers "
             "and after the last (tied-hidden and groc-hidden: none on the inputs); each layer's Table 8 settings from "
             "recipes/configs/penn/; Adam 1e-3, batch 20, BPTT 35, clip 0.1, x0.1 after 4 epochs without validation "
             "improvement, stopped after 8 (stopped: early-stopping = converged; max-epochs = the EPOCHS safeguard).",
             "train_ppl: the training split scored as the test split is, without dropout, at the best checkpoint: far "
             "below valid_ppl means the row overfits, close to it that it underfits.",
             "paper_test_ppl: the paper's 2 x 1024 models (Table 2, penn), for the ranking only.",
             "test_open_ppl: --vocab union (every test type; PTB's test words are all in the vocabulary, so table models "
             "differ from closed by their 1% uniform share)."]
    table_kinds = [k for k in kinds if k not in ("groc", "tied-hidden", "groc-hidden", "groc-free-bias")]
    if "groc" in kinds:
        best = min(table_kinds, key=lambda k: tests[k]) if table_kinds else None
        for base in dict.fromkeys(k for k in ("tied", best) if k in table_kinds):
            r = load(out / f"compare-{base}-groc.json")
            bins = ", ".join(f"{b['bin']}: {b['median_diff']:+.3f}" for b in r["bins"] if b["median_diff"] is not None)
            which = "the best table model, " if base == best else ""
            notes.append(f"Figure 3, GroC minus {which}{base}: median loss per training-frequency bin (nats, PTB test, "
                         f"model column): {bins}; overall {r['overall']['median_diff']:+.3f}.")
            if r.get("words"):
                notes.append(f"GroC minus {base}, the words that make the difference: {_words(r['words'])}.")
    t.write(out, notes=notes)
