#!/usr/bin/env bash
# Figure 3: median loss difference per word between each baseline and GroC, by the word's
# training frequency, on the PTB (and WikiText-2) test set. Uses the table2.sh runs (trains
# them if missing), per-token records from groc eval, and groc compare.
#   bash recipes/figure3.sh                          SCALE=small, PTB, every baseline
#   BASELINES="tied adaptive" DATASETS="ptb wt2" bash recipes/figure3.sh
NAME=figure3
source "$(dirname "$0")/lib/common.sh"
BASELINES=${BASELINES:-lookup convolutional tied bilinear deep-residual adaptive}
for ds in ${DATASETS:-ptb}; do
  dataset "$ds"
  for kind in groc $BASELINES; do
    extra=(); [ "$kind" = groc ] && extra=(--lexicon "$WORK/$ds.lexicon.parquet")
    run=$WORK/runs/$SCALE/$ds-$kind
    train "$run" "$WORK/$ds" --output "$kind" "${MODEL[@]}" "${emb[@]}" "${BUDGET[@]}" "${extra[@]}"
    step "$WORK/evals/$SCALE/$ds-$kind.test.tokens.parquet" groc eval "$run" "$WORK/$ds" --split test \
      --per-token "$WORK/evals/$SCALE/$ds-$kind.test.tokens.parquet"
  done
  for base in $BASELINES; do
    capture "$OUT/$ds-$base-vs-groc.json" groc compare "$WORK/evals/$SCALE/$ds-$base.test.tokens.parquet" \
      "$WORK/evals/$SCALE/$ds-groc.test.tokens.parquet" --names "$base,groc" --plot "$OUT/$ds-$base-vs-groc.png" --force
  done
done
BASELINES=$BASELINES DATASETS=${DATASETS:-ptb} python - "$OUT" "$SCALE" <<'PY'
import os, sys
from pathlib import Path
sys.path.insert(0, "recipes/lib")
from report import Table, load

out, scale = Path(sys.argv[1]), sys.argv[2]
rows = {}
for ds in os.environ["DATASETS"].split():
    for base in os.environ["BASELINES"].split():
        r = load(out / f"{ds}-{base}-vs-groc.json")
        rows[(ds, base)] = r
bins = [b["bin"] for b in next(iter(rows.values()))["bins"]]
t = Table("figure3", f"Figure 3: median loss difference, GroC minus baseline, per training-frequency bin (SCALE={scale})",
          ["dataset", "baseline", *bins, "overall"], {b: "+.3f" for b in [*bins, "overall"]})
for (ds, base), r in rows.items():
    t.add(dataset={"ptb": "penn", "wt2": "wikitext2"}[ds], baseline=base,
          **{b["bin"]: b["median_diff"] for b in r["bins"]}, overall=r["overall"]["median_diff"])
t.write(out, notes=["Nats per word, loss(GroC) - loss(baseline): negative = GroC better on the words of that bin "
                    "(the paper plots the same quantity per baseline).",
                    "Plots: <dataset>-<baseline>-vs-groc.png (groc compare --plot)."])
PY
