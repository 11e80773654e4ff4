#!/usr/bin/env bash
# Table 2: the seven output layers on PTB and WikiText-2 (closed vocabulary): test perplexity
# and parameter count |Θ|, beside the paper's.
#   bash recipes/table2.sh                   SCALE=small (default): 128-d embeddings, 256-unit LSTM,
#                                            400K training tokens per model (~1 h on 2 CPU cores)
#   SCALE=paper bash recipes/table2.sh       appendix B.1 + Table 8's settings per output layer
#                                            (recipes/configs/), early stopping (GPU)
#   DATASETS=ptb bash recipes/table2.sh      one dataset only
#   KINDS="tied groc" bash recipes/table2.sh  some output layers only, e.g. one process per layer
#                                            sharing a GPU; then once more without KINDS for the table
#   SCALE=paper MINUTES=21 ...               bound each training run by wall-clock minutes
NAME=table2
source "$(dirname "$0")/../lib/common.sh"
DATASETS=${DATASETS:-ptb wt2}
select_kinds "${OUTPUT_LAYERS[@]}"
for ds in $DATASETS; do
  dataset "$ds"
  for kind in $KINDS; do
    extra=(); [ "$kind" = groc ] && extra=(--lexicon "$WORK/$ds.lexicon.parquet")
    settings "$ds" "$kind"
    train "$WORK/runs/$SCALE/$ds-$kind" "$WORK/$ds" "${settings[@]}" "${BUDGET[@]}" "${extra[@]}"
    capture "$WORK/evals/$SCALE/$ds-$kind.test.json" groc eval "$WORK/runs/$SCALE/$ds-$kind" "$WORK/$ds" --split test
  done
done
stop_if_some_kinds
report table2 --out="$OUT" --work="$WORK" --scale="$SCALE" --datasets="$DATASETS"
