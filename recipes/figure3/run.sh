#!/usr/bin/env bash
# Figure 3: median loss difference per word between each baseline and GroC, by the word's
# training frequency, on the PTB (and WikiText-2) test set. Uses the table2.sh runs (trains
# them if missing), per-token records from groc eval, and groc compare.
#   bash recipes/figure3.sh                          SCALE=small, PTB, every baseline
#   BASELINES="tied adaptive" DATASETS="ptb wt2" bash recipes/figure3.sh
NAME=figure3
source "$(dirname "$0")/../lib/common.sh"
baselines=(); for kind in "${OUTPUT_LAYERS[@]}"; do [ "$kind" = groc ] || baselines+=("$kind"); done
BASELINES=${BASELINES:-${baselines[*]}}  # every output layer but GroC
DATASETS=${DATASETS:-ptb}
for ds in $DATASETS; do
  dataset "$ds"
  for kind in groc $BASELINES; do
    extra=(); [ "$kind" = groc ] && extra=(--lexicon "$WORK/$ds.lexicon.parquet")
    run=$WORK/runs/$SCALE/$ds-$kind
    # shellcheck disable=SC2046
    train "$run" "$WORK/$ds" --output-layer "$kind" "${MODEL[@]}" "${emb[@]}" "${BUDGET[@]}" "${extra[@]}" $(char_init_of "$kind")
    step "$WORK/evals/$SCALE/$ds-$kind.test.tokens.parquet" groc eval "$run" "$WORK/$ds" --split test \
      --per-token "$WORK/evals/$SCALE/$ds-$kind.test.tokens.parquet"
  done
  for base in $BASELINES; do
    capture "$OUT/$ds-$base-vs-groc.json" groc compare "$WORK/evals/$SCALE/$ds-$base.test.tokens.parquet" \
      "$WORK/evals/$SCALE/$ds-groc.test.tokens.parquet" --names "$base,groc" --plot "$OUT/$ds-$base-vs-groc.png" --force
  done
done
report figure3 --out="$OUT" --scale="$SCALE" --datasets="$DATASETS" --baselines="$BASELINES"
