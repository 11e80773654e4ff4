#!/usr/bin/env bash
# Table 4: lexicon coverage. A random share of the WordNet-covered PTB words loses its
# relations and definitions (groc lexicon --keep-fraction F); "inference": the GroC model
# (no output network, Table 3's "GroC") evaluated with the reduced lexicon; "train": a GroC
# model trained from scratch with it. "surf.": the surface-forms-only model.
#   bash recipes/table4.sh                      SCALE=small; FRACTIONS="0 0.2 0.4 0.6 0.8 1"
#   TRAIN_FRACTIONS="0 0.4 0.8" bash recipes/table4.sh    fewer from-scratch runs
NAME=table4
source "$(dirname "$0")/lib/common.sh"
FRACTIONS=${FRACTIONS:-0 0.2 0.4 0.6 0.8 1}
TRAIN_FRACTIONS=${TRAIN_FRACTIONS-$FRACTIONS}   # TRAIN_FRACTIONS="" skips the from-scratch runs
dataset ptb
base=$WORK/runs/$SCALE/ptb-groc-d0
surf=$WORK/runs/$SCALE/ptb-groc-d0-surf
train "$base" "$WORK/ptb" --output groc --lexicon "$WORK/ptb.lexicon.parquet" --out-depth 0 "${MODEL[@]}" "${emb[@]}" "${BUDGET[@]}"
train "$surf" "$WORK/ptb" --output groc --lexicon "$WORK/ptb.lexicon.parquet" --out-depth 0 --no-relations --no-definitions \
  "${MODEL[@]}" "${emb[@]}" "${BUDGET[@]}"
capture "$WORK/evals/$SCALE/ptb-groc-d0-surf.test.json" groc eval "$surf" "$WORK/ptb" --split test
for f in $FRACTIONS; do
  lex=$WORK/ptb.lexicon.keep$f.parquet
  step "$lex" groc lexicon --vocab "$WORK/ptb" --keep-fraction "$f" --seed 1 -o "$lex"
  capture "$WORK/evals/$SCALE/table4-inference-$f.json" groc eval "$base" "$WORK/ptb" --split test --lexicon "$lex"
done
for f in $TRAIN_FRACTIONS; do
  lex=$WORK/ptb.lexicon.keep$f.parquet
  step "$lex" groc lexicon --vocab "$WORK/ptb" --keep-fraction "$f" --seed 1 -o "$lex"
  if [ "$(awk -v f="$f" 'BEGIN { print (f == 1) }')" = 1 ]; then
    run=$base  # keep 1 keeps every entry: the same table as the full lexicon, so the same run
  else
    run=$base-keep$f
    train "$run" "$WORK/ptb" --output groc --lexicon "$lex" --out-depth 0 "${MODEL[@]}" "${emb[@]}" "${BUDGET[@]}"
  fi
  capture "$WORK/evals/$SCALE/table4-train-$f.json" groc eval "$run" "$WORK/ptb" --split test
done
FRACTIONS=$FRACTIONS TRAIN_FRACTIONS=$TRAIN_FRACTIONS python - "$OUT" "$WORK" "$SCALE" <<'PY'
import os, sys
from pathlib import Path
sys.path.insert(0, "recipes/lib")
from report import Table, load
from groc_cli.artifacts import read_metadata

out, work, scale = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
# Table 4 (penn test): coverage 0,16,32,48,64,82% = keep 0,0.2,...,1 of the covered words
paper_inf = {0.0: 187.8, 0.2: 159.3, 0.4: 128.5, 0.6: 102.6, 0.8: 83.5, 1.0: 69.5}
paper_train = {0.0: 72.4, 0.2: 70.0, 0.4: 70.4, 0.6: 69.6, 0.8: 70.7, 1.0: 69.5}
t = Table("table4", f"Table 4: lexicon coverage and GroC's PTB test perplexity (SCALE={scale})",
          ["keep_fraction", "relations_cov", "definitions_cov", "inference_ppl", "train_ppl",
           "paper_inference_ppl", "paper_train_ppl"])
surf = load(work / "evals" / scale / "ptb-groc-d0-surf.test.json")["perplexity"]
t.add(keep_fraction="surf.", inference_ppl=surf, paper_inference_ppl=73.1)
fractions = os.environ["FRACTIONS"].split()
train_fractions = set(os.environ["TRAIN_FRACTIONS"].split())
for f in fractions:
    cov = read_metadata(work / f"ptb.lexicon.keep{f}.parquet")["coverage"]
    inf = load(work / "evals" / scale / f"table4-inference-{f}.json")["perplexity"]
    tr = load(work / "evals" / scale / f"table4-train-{f}.json")["perplexity"] if f in train_fractions else None
    t.add(keep_fraction=f"{float(f):.1f}", relations_cov=round(100 * cov["relations_coverage"], 1),
          definitions_cov=round(100 * cov["definition_coverage"], 1), inference_ppl=inf, train_ppl=tr,
          paper_inference_ppl=paper_inf.get(round(float(f), 1)), paper_train_ppl=paper_train.get(round(float(f), 1)))
notes = ["keep_fraction: share of the WordNet-covered training words that keep their entries (groc lexicon --keep-fraction, "
         "seed 1); coverage columns are the resulting % of the vocabulary. Paper columns: coverage 0/16/32/48/64/82%.",
         "inference: the model trained with the full lexicon, evaluated with the reduced one (groc eval --lexicon); "
         "train: trained from scratch with the reduced lexicon."]
if scale == "small":
    notes.append("SCALE=small: the small configuration of table2.sh (CPU, 400K training tokens).")
t.write(out, notes=notes)
PY
