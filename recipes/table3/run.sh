#!/usr/bin/env bash
# Table 3: GroC ablations — without relations, without definitions, without both (surface
# forms only), each with the depth-1 residual output network ("+ out") and without it
# (--out-depth 0). Validation and test perplexity beside the paper's.
#   bash recipes/table3.sh                 SCALE=small, PTB (8 GroC runs; the full "+ out" run is
#                                          shared with table2.sh)
#   DATASETS="ptb wt2" bash recipes/table3.sh     also WikiText-2
#   SCALE=paper bash recipes/table3.sh     appendix B.1 + Table 8's settings per ablation (GPU)
NAME=table3
source "$(dirname "$0")/../lib/common.sh"
DATASETS=${DATASETS:-ptb}
# run name : settings (a file of recipes/configs/ at SCALE=paper: Table 8's row for the ablation)
VARIANTS=("groc:groc" "groc-norel:groc-norelations" "groc-nodef:groc-nodefinitions" "groc-surf:groc-surface")
for ds in $DATASETS; do
  dataset "$ds"
  for depth in 1 0; do
    for v in "${VARIANTS[@]}"; do
      name=${v%%:*}
      [ "$depth" = 0 ] && name=${name/groc/groc-d0}
      settings "$ds" "${v#*:}"
      # Table 8 gives each ablation one depth; the other block keeps its r at the other depth.
      train "$WORK/runs/$SCALE/$ds-$name" "$WORK/$ds" "${settings[@]}" --lexicon "$WORK/$ds.lexicon.parquet" \
        --out-depth "$depth" "${BUDGET[@]}"
      capture "$WORK/evals/$SCALE/$ds-$name.test.json" groc eval "$WORK/runs/$SCALE/$ds-$name" "$WORK/$ds" --split test
    done
  done
done
report table3 --out="$OUT" --work="$WORK" --scale="$SCALE" --datasets="$DATASETS"
