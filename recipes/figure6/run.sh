#!/usr/bin/env bash
# Figures 6 and 7: local (neural) cache hyperparameter grids, 5 θ x 5 weights, each in one pass
# over dumped validation states (groc dump, then groc eval --grid), drawn as heatmaps.
#   Figure 6: the tied Reuters model of table5.sh on WMT news 2013 (the paper: 2007 model on
#             2008 validation, window 5,000);   Figure 7: the tied PTB model on PTB validation.
#   bash recipes/figure6.sh       (SCALE=small; trains the two tied models if table2/table5 have not)
NAME=figure6
source "$(dirname "$0")/../lib/common.sh"
ptb
crossdomain
emb=(); [ "$SCALE" = paper ] && emb=(--emb 300)
# θ over 5 values in [0, 1]; the paper's λ over 5 values from 0.833 to 0.966, i.e. cache weights 0.034 ... 0.167.
GRID="theta=0,0.25,0.5,0.75,1;cache-weight=0.034,0.067,0.1,0.134,0.167"
src=$WORK/runs/$SCALE/reuters$REUTERS_SUFFIX-tied states=$WORK/states/$SCALE/reuters$REUTERS_SUFFIX-tied-news13  # table5.sh's
train "$src" "$REUTERS" --output-layer tied "${MODEL[@]}" "${emb[@]}" "${BUDGET[@]}"
train "$WORK/runs/$SCALE/ptb-tied" "$WORK/ptb" --output-layer tied "${MODEL[@]}" "${emb[@]}" "${BUDGET[@]}"
step "$states" groc dump "$src" "$WORK/news13" --split test --vocab union -o "$states"
step "$WORK/states/$SCALE/ptb-tied-valid" groc dump "$WORK/runs/$SCALE/ptb-tied" "$WORK/ptb" --split valid \
  -o "$WORK/states/$SCALE/ptb-tied-valid"
capture "$OUT/figure6-grid.json" groc eval "$src" "$WORK/news13" \
  --states "$states" --cache local --cache-size 5000 --grid "$GRID" \
  --grid-out "$OUT/figure6-grid.parquet" --force
capture "$OUT/figure7-grid.json" groc eval "$WORK/runs/$SCALE/ptb-tied" "$WORK/ptb" \
  --states "$WORK/states/$SCALE/ptb-tied-valid" --cache local --cache-size 5000 --grid "$GRID" \
  --grid-out "$OUT/figure7-grid.parquet" --force
report figure6 --out="$OUT" --scale="$SCALE"
