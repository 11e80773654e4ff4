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
VARIANTS=("groc:" "groc-norel:--no-relations" "groc-nodef:--no-definitions" "groc-surf:--no-relations --no-definitions")
for ds in ${DATASETS:-ptb}; do
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
DATASETS=${DATASETS:-ptb} python - "$OUT" "$WORK" "$SCALE" <<'PY'
import os, sys
from pathlib import Path
sys.path.insert(0, "recipes/lib")
from report import Table, load, summary

out, work, scale = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
# Table 3: (dev, test) on penn and wikitext2
paper = {"groc": ((75.0, 71.4), (87.0, 82.5)), "groc-norel": ((77.1, 72.7), (90.2, 85.3)),
         "groc-nodef": ((75.6, 72.0), (88.6, 84.3)), "groc-surf": ((79.8, 75.8), (94.3, 89.8)),
         "groc-d0": ((72.5, 69.5), (88.7, 84.1)), "groc-d0-norel": ((74.2, 70.8), (93.0, 88.0)),
         "groc-d0-nodef": ((74.4, 71.1), (87.6, 83.1)), "groc-d0-surf": ((76.3, 73.2), (94.5, 89.5))}
label = {"groc": "GroC + out", "groc-norel": "  - relations", "groc-nodef": "  - definitions", "groc-surf": "  - both",
         "groc-d0": "GroC", "groc-d0-norel": "  - relations", "groc-d0-nodef": "  - definitions", "groc-d0-surf": "  - both"}
t = Table("table3", f"Table 3: GroC ablations (SCALE={scale})",
          ["dataset", "model", "params_M", "valid_ppl", "test_ppl", "paper_valid", "paper_test"], {"params_M": ".2f"})
for ds in os.environ["DATASETS"].split():
    for name, (p_ptb, p_wt2) in paper.items():
        s = summary(work / "runs" / scale / f"{ds}-{name}")
        e = load(work / "evals" / scale / f"{ds}-{name}.test.json")
        p = p_ptb if ds == "ptb" else p_wt2
        t.add(dataset={"ptb": "penn", "wt2": "wikitext2"}[ds], model=label[name], params_M=s["parameters"] / 1e6,
              valid_ppl=s["best_valid_ppl"], test_ppl=e["perplexity"], paper_valid=p[0], paper_test=p[1])
notes = ["+ out: depth-1 residual output network (--out-depth 1, groc's default); the others use --out-depth 0.",
         "- relations: --no-relations; - definitions: --no-definitions; - both: surface (character) forms only."]
if scale == "small":
    notes.append("SCALE=small: the small configuration of table2.sh (128/256 units, 400K training tokens, CPU); "
                 "the paper's models are 2x1024 trained to convergence.")
t.write(out, notes=notes)
PY
