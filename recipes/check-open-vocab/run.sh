#!/usr/bin/env bash
# Check (issue: evaluation): every output layer, trained on Reuters, gives finite open-vocabulary
# perplexities (--vocab union) on a near domain (WMT news 2014) and on far domains (WikiText-2
# raw test, Chesterton's novels), with no cache and with each cache. Fails if any is not finite.
#   bash recipes/check-open-vocab.sh     tiny models (64/128 units, 60K Reuters tokens), ~20K-token
#                                        test samples piped through tokenize -> prepare; ~25 min on 2 cores
NAME=check-open-vocab
source "$(dirname "$0")/../lib/common.sh"
TEST_LINES=${TEST_LINES:-900} CHECK_TOKENS=${CHECK_TOKENS:-60000}
counts TEST_LINES CHECK_TOKENS
reuters
SAMPLES=(news14:"$DATA/wmt-newstest/newstest2014-deen.en" wiki:"$DATA/wikitext-2-raw/wiki.test.raw"
         books:"$DATA/gutenberg/chesterton-ball.txt")
C=$WORK/check$REUTERS_SUFFIX  # its runs are on $REUTERS: one folder per Reuters vocabulary
mkdir -p "$C"
for pair in "${SAMPLES[@]}"; do
  test_sample "$C/${pair%%:*}" "${pair#*:}" "$TEST_LINES"
done
step "$C/lexicon.parquet" groc lexicon --vocab "$REUTERS" --vocab "$C/news14" --vocab "$C/wiki" --vocab "$C/books" \
  -o "$C/lexicon.parquet"
TINY=(--emb 64 --hidden 128 --dropout 0.2 --max-tokens "$CHECK_TOKENS" --seed 1 --log-every 50)
for kind in "${OUTPUT_LAYERS[@]}"; do
  extra=(); [ "$kind" = groc ] && extra=(--lexicon "$C/lexicon.parquet")
  # shellcheck disable=SC2046
  train "$C/runs/$kind" "$REUTERS" --output-layer "$kind" "${TINY[@]}" "${extra[@]}" $(char_init_of "$kind")
  dw=(); [ "$kind" = groc ] && dw=(--downweight-new 0.1)
  for pair in "${SAMPLES[@]}"; do
    d=${pair%%:*}
    step "$C/states/$kind-$d" groc dump "$C/runs/$kind" "$C/$d" --split test --vocab union -o "$C/states/$kind-$d" "${extra[@]}"
    capture "$C/evals/$kind-$d-none.json" groc eval "$C/runs/$kind" "$C/$d" --states "$C/states/$kind-$d"
    capture "$C/evals/$kind-$d-unigram.json" groc eval "$C/runs/$kind" "$C/$d" --states "$C/states/$kind-$d" "${dw[@]}" \
      --cache unigram --cache-weight 0.05
    capture "$C/evals/$kind-$d-local.json" groc eval "$C/runs/$kind" "$C/$d" --states "$C/states/$kind-$d" "${dw[@]}" \
      --cache local --cache-weight 0.05 --theta 0.5
    capture "$C/evals/$kind-$d-unbounded.json" groc eval "$C/runs/$kind" "$C/$d" --states "$C/states/$kind-$d" "${dw[@]}" \
      --cache unbounded --cache-weight 0.1 --index IVF64,PQ16 --knn 256
  done
done
report check-open-vocab --out="$OUT" --check-dir="$C" --domains="${SAMPLES[*]%%:*}"
