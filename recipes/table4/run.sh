#!/usr/bin/env bash
# Table 4: lexicon coverage. A random share of the WordNet-covered PTB words loses its
# relations and definitions (groc lexicon --keep-fraction F); "inference": the GroC model
# (no output network, Table 3's "GroC") evaluated with the reduced lexicon; "train": a GroC
# model trained from scratch with it. "surf.": the surface-forms-only model.
#   bash recipes/table4.sh                      SCALE=small; FRACTIONS="0 0.2 0.4 0.6 0.8 1"
#   TRAIN_FRACTIONS="0 0.4 0.8" bash recipes/table4.sh    fewer from-scratch runs
NAME=table4
source "$(dirname "$0")/../lib/common.sh"
FRACTIONS=${FRACTIONS:-0 0.2 0.4 0.6 0.8 1}
TRAIN_FRACTIONS=${TRAIN_FRACTIONS-$FRACTIONS}   # TRAIN_FRACTIONS="" skips the from-scratch runs
dataset ptb
base=$WORK/runs/$SCALE/ptb-groc-d0
surf=$WORK/runs/$SCALE/ptb-groc-d0-surf
train "$base" "$WORK/ptb" --output-layer groc --char-init uniform --lexicon "$WORK/ptb.lexicon.parquet" --out-depth 0 "${MODEL[@]}" "${emb[@]}" "${BUDGET[@]}"
train "$surf" "$WORK/ptb" --output-layer groc --char-init uniform --lexicon "$WORK/ptb.lexicon.parquet" --out-depth 0 --no-relations --no-definitions \
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
    train "$run" "$WORK/ptb" --output-layer groc --char-init uniform --lexicon "$lex" --out-depth 0 "${MODEL[@]}" "${emb[@]}" "${BUDGET[@]}"
  fi
  capture "$WORK/evals/$SCALE/table4-train-$f.json" groc eval "$run" "$WORK/ptb" --split test
done
report table4 --out="$OUT" --work="$WORK" --scale="$SCALE" --fractions="$FRACTIONS" \
  --train-fractions="$TRAIN_FRACTIONS"
