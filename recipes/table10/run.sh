#!/usr/bin/env bash
# Table 10: training speed per output layer, and GroC per --update-prob (paper B.4), as the
# median step time of each layer with the same prefix network on real text, and its ratio to
# tied (benchmarks/train_throughput.py; one process, layers interleaved step by step).
#   bash recipes/table10.sh                SCALE=small: 128/256 units on CPU, 2 threads, 15 timed steps
#   SCALE=paper bash recipes/table10.sh    2 x 1024 LSTM, emb 300, CUDA with bf16 autocast
#   DATASETS="ptb wt2" STEPS=30 bash recipes/table10.sh
NAME=table10
source "$(dirname "$0")/../lib/common.sh"
DATASETS=${DATASETS:-ptb}
PROBS=${PROBS:-1.0,0.9,0.7,0.5,0.3,0.1}
THREADS=${THREADS:-2} STEPS=${STEPS:-15}
counts THREADS STEPS
for ds in $DATASETS; do
  case $ds in
    ptb) ptb; text=$DATA/ptb/ptb.train.txt ;;
    wt2) wikitext2; text=$DATA/wikitext-2/wiki.train.tokens ;;
    *) die "unknown dataset $ds (ptb, wt2)" ;;
  esac
  if [ "$SCALE" = small ]; then
    size=(--emb 128 --hidden 256 --device cpu --threads "$THREADS")
  else
    size=(--emb 300 --hidden 1024 --device cuda --amp)
  fi
  capture "$WORK/bench/$SCALE/$ds-train-throughput.json" python benchmarks/train_throughput.py --train "$text" \
    --lexicon "$WORK/$ds.lexicon.parquet" --steps "$STEPS" --update-prob "$PROBS" "${size[@]}"
done
report table10 --out="$OUT" --work="$WORK" --scale="$SCALE" --datasets="$DATASETS"
