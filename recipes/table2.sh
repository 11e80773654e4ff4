#!/usr/bin/env bash
# Table 2: the seven output layers on PTB and WikiText-2 (closed vocabulary): test perplexity
# and parameter count |Θ|, beside the paper's.
#   bash recipes/table2.sh                   SCALE=small (default): 128-d embeddings, 256-unit LSTM,
#                                            400K training tokens per model (~1 h on 2 CPU cores)
#   SCALE=paper bash recipes/table2.sh       appendix B.1 settings, early stopping (GPU)
#   DATASETS=ptb bash recipes/table2.sh      one dataset only
#   KINDS="tied groc" bash recipes/table2.sh  some output layers only, e.g. one process per layer
#                                            sharing a GPU; then once more without KINDS for the table
#   SCALE=paper MINUTES=21 ...               bound each training run by wall-clock minutes
NAME=table2
source "$(dirname "$0")/lib/common.sh"
select_kinds lookup convolutional tied bilinear deep-residual adaptive groc
for ds in ${DATASETS:-ptb wt2}; do
  dataset "$ds"
  for kind in $KINDS; do
    extra=(); [ "$kind" = groc ] && extra=(--lexicon "$WORK/$ds.lexicon.parquet")
    train "$WORK/runs/$SCALE/$ds-$kind" "$WORK/$ds" --output "$kind" "${MODEL[@]}" "${emb[@]}" "${BUDGET[@]}" "${extra[@]}"
    capture "$WORK/evals/$SCALE/$ds-$kind.test.json" groc eval "$WORK/runs/$SCALE/$ds-$kind" "$WORK/$ds" --split test
  done
done
stop_if_some_kinds
DATASETS=${DATASETS:-ptb wt2} python - "$OUT" "$WORK" "$SCALE" <<'PY'
import os, sys
from pathlib import Path
sys.path.insert(0, "recipes/lib")
from report import Table, load, summary

out, work, scale = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
paper = {  # Table 2: (|Θ| in millions, test perplexity) for penn, wikitext2
    "lookup": ((13, 90.8), (23, 108.3)), "convolutional": ((13, 101.6), (23, 116.6)), "tied": ((10, 86.2), (15, 97.3)),
    "bilinear": ((10, 83.7), (15, 95.9)), "deep-residual": ((10, 80.5), (15, 94.7)), "adaptive": ((8, 79.3), (9, 90.7)),
    "groc": ((9, 69.5), (9, 82.5))}
t = Table("table2", f"Table 2: perplexity per output layer, closed vocabulary (SCALE={scale})",
          ["dataset", "output", "params_M", "valid_ppl", "test_ppl", "tokens_per_s", "paper_params_M", "paper_test_ppl"],
          {"params_M": ".2f", "tokens_per_s": ".0f"})
for ds in os.environ["DATASETS"].split():
    for kind in paper:
        s = summary(work / "runs" / scale / f"{ds}-{kind}")
        e = load(work / "evals" / scale / f"{ds}-{kind}.test.json")
        p = paper[kind][0 if ds == "ptb" else 1]
        t.add(dataset={"ptb": "penn", "wt2": "wikitext2"}[ds], output=kind, params_M=s["parameters"] / 1e6,
              valid_ppl=s["best_valid_ppl"] if "best_valid_ppl" in s else s["final"]["valid_ppl"], test_ppl=e["perplexity"],
              tokens_per_s=s["final"]["tokens_per_s"], paper_params_M=p[0], paper_test_ppl=p[1])
notes = [f"Runs: {work}/runs/{scale}/<dataset>-<output>; commands in commands.log."]
if scale == "paper":
    notes.append("SCALE=paper: appendix B.1 (2x1024 LSTM, emb 300 PTB / 256 WikiText-2, dropout 0.65, Adam 1e-3, "
                 "clip 0.1, lr x0.1 after 4 epochs without improvement, early stop after 8, at most 40 epochs), "
                 "float32 unless the runs' config.json says amp. A run stopped by MINUTES says so in its "
                 "summary.json (stop_reason max-minutes).")
if scale == "small":
    notes.append("SCALE=small: 128-d embeddings, one 256-unit and one 128-unit LSTM layer, dropout 0.3, "
                 "400K training tokens (under half a PTB epoch), CPU. The paper trains 2x1024 to convergence on a GPU; "
                 "compare the ranking, not the values.")
t.write(out, notes=notes)
PY
