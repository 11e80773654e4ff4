#!/usr/bin/env bash
# Check (issue: evaluation): on WikiText-2, a small tied model trained on the training set is
# improved by the local cache and by the unbounded cache. Cache settings are tuned on the
# validation states with one --grid pass each, then applied to the test set. Grave et al.
# (2017c) report 99.3 -> 68.9 test perplexity with a 2,000-position window (their model is larger).
#   bash recipes/check-wikitext2-caches.sh          (SCALE=small: table2.sh's wt2-tied run)
NAME=check-wikitext2-caches
source "$(dirname "$0")/../lib/common.sh"
dataset wt2
run=$WORK/runs/$SCALE/wt2-tied
train "$run" "$WORK/wt2" --output-layer tied "${MODEL[@]}" "${emb[@]}" "${BUDGET[@]}"
for split in valid test; do
  step "$WORK/states/$SCALE/wt2-tied-$split" groc dump "$run" "$WORK/wt2" --split "$split" -o "$WORK/states/$SCALE/wt2-tied-$split"
done
S=$WORK/states/$SCALE/wt2-tied
capture "$OUT/local-grid.json" groc eval "$run" "$WORK/wt2" --states "$S-valid" --cache local --cache-size 2000 \
  --grid "theta=0.1,0.3,0.5,0.7,1;cache-weight=0.05,0.1,0.2,0.3" --grid-out "$OUT/local-grid.parquet" --force
step "$WORK/wt2-tied-valid.index" groc eval "$run" "$WORK/wt2" --states "$S-valid" --cache unbounded --index IVF1024,PQ32 \
  --knn 1024 --index-save "$WORK/wt2-tied-valid.index"
capture "$OUT/unbounded-grid.json" groc eval "$run" "$WORK/wt2" --states "$S-valid" --cache unbounded --index IVF1024,PQ32 \
  --index-load "$WORK/wt2-tied-valid.index" --grid "knn=256,1024;bandwidth-scale=0.5,1,2;cache-weight=0.05,0.1,0.2,0.3" \
  --grid-out "$OUT/unbounded-grid.parquet" --force
best() { report grid-best --grid="$1" --key="$2"; }  # best GRID KEY: KEY of GRID's best cell
capture "$OUT/test-static.json" groc eval "$run" "$WORK/wt2" --states "$S-test"
capture "$OUT/test-local.json" groc eval "$run" "$WORK/wt2" --states "$S-test" --cache local --cache-size 2000 \
  --theta "$(best "$OUT/local-grid.json" theta)" --cache-weight "$(best "$OUT/local-grid.json" cache_weight)"
capture "$OUT/test-unbounded.json" groc eval "$run" "$WORK/wt2" --states "$S-test" --cache unbounded --index IVF1024,PQ32 \
  --index-load "$WORK/wt2-tied-valid.index" --knn "$(best "$OUT/unbounded-grid.json" knn)" \
  --bandwidth-scale "$(best "$OUT/unbounded-grid.json" bandwidth_scale)" --cache-weight "$(best "$OUT/unbounded-grid.json" cache_weight)"
report check-wikitext2-caches --out="$OUT"
