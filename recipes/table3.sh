#!/usr/bin/env bash
# Table 3: GroC ablations — without relations, without definitions, without both (surface
# forms only), each with the depth-1 residual output network ("+ out") and without it
# (--out-depth 0). Validation and test perplexity beside the paper's.
#   bash recipes/table3.sh                 SCALE=small, PTB (8 GroC runs; the full "+ out" run is
#                                          shared with table2.sh)
#   DATASETS="ptb wt2" bash recipes/table3.sh     also WikiText-2
#   SCALE=paper bash recipes/table3.sh     appendix B.1 settings (GPU)
NAME=table3
source "$(dirname "$0")/lib/common.sh"
DATASETS=${DATASETS:-ptb}
VARIANTS=("groc:" "groc-norel:--no-relations" "groc-nodef:--no-definitions" "groc-surf:--no-relations --no-definitions")
for ds in $DATASETS; do
  dataset "$ds"
  for depth in 1 0; do
    for v in "${VARIANTS[@]}"; do
      name=${v%%:*}; read -r -a flags <<< "${v#*:}"
      [ "$depth" = 0 ] && name=${name/groc/groc-d0}
      train "$WORK/runs/$SCALE/$ds-$name" "$WORK/$ds" --output groc --lexicon "$WORK/$ds.lexicon.parquet" --out-depth "$depth" \
        "${MODEL[@]}" "${emb[@]}" "${BUDGET[@]}" ${flags[@]+"${flags[@]}"}
      capture "$WORK/evals/$SCALE/$ds-$name.test.json" groc eval "$WORK/runs/$SCALE/$ds-$name" "$WORK/$ds" --split test
    done
  done
done
report table3 --out="$OUT" --work="$WORK" --scale="$SCALE" --datasets="$DATASETS"
