#!/usr/bin/env bash
# Table 5 in miniature: cross-domain language modeling with an open vocabulary (--vocab union).
# Tied and GroC models trained on Reuters (1987 newswire) are evaluated on near domains (WMT
# news 2013, 2014) and far domains (web, wiki, books): zero-resource (base, + unigram cache,
# + local cache, + unbounded cache) and low-resource (finetuned on each domain's own text).
#   bash recipes/table5.sh                 SCALE=small: the small configuration of table2.sh;
#                                          finetuning 3 epochs on 50K tokens per domain
#   KINDS=groc bash recipes/table5.sh      one model's stages only (run tied and groc in two
#                                          processes, then once more without KINDS for the table)
#   SCALE=paper bash recipes/table5.sh     appendix B.1 model, full finetuning (GPU)
# Reuters is prepared with --min-count 2 (REUTERS_MIN_COUNT=1 keeps every training word, as an
# earlier version did; see recipes/lib/common.sh).
# Data layout and domains: recipes/lib/common.sh (crossdomain) and ../shared/data/README.md.
# For the paper's own 2M/2M/10M News Crawl / Common Crawl / WikiText-103 splits see
# recipes/data-crossdomain.sh.
NAME=table5
source "$(dirname "$0")/../lib/common.sh"
select_kinds tied groc
crossdomain
LEX=$CROSSDOMAIN_LEX
emb=(); [ "$SCALE" = paper ] && emb=(--emb 300)
TESTS=(news13 news14 "${FAR_DOMAINS[@]}")
for kind in $KINDS; do
  extra=(); [ "$kind" = groc ] && extra=(--lexicon "$LEX")
  run=reuters$REUTERS_SUFFIX-$kind  # this model's runs and states
  src=$WORK/runs/$SCALE/$run evals=$WORK/evals/$SCALE/table5$REUTERS_SUFFIX-$kind
  # shellcheck disable=SC2046
  train "$src" "$REUTERS" --output-layer "$kind" "${MODEL[@]}" "${emb[@]}" "${BUDGET[@]}" "${extra[@]}" $(char_init_of "$kind")
  dw=(); [ "$kind" = groc ] && dw=(--downweight-new 0.1)
  for d in "${TESTS[@]}"; do
    split=test
    states=$WORK/states/$SCALE/$run-$d
    step "$states" groc dump "$src" "$WORK/$d" --split "$split" --vocab union -o "$states" "${extra[@]}"
    ev=$evals-$d
    capture "$ev-base.json" groc eval "$src" "$WORK/$d" --states "$states"
    capture "$ev-unigram.json" groc eval "$src" "$WORK/$d" --states "$states" "${dw[@]}" "${CACHE_UNIGRAM[@]}"
    capture "$ev-local.json" groc eval "$src" "$WORK/$d" --states "$states" "${dw[@]}" "${CACHE_LOCAL[@]}"
  done
  # Low-resource: finetune on each domain's own training text (news: WMT 2009-2012), test as above.
  for ft in news-ft "${FAR_DOMAINS[@]}"; do
    finetune "$src" "$WORK/$ft" "$src-ft-$ft" "${FT_BUDGET[@]}" "${extra[@]}"
  done
  for d in "${TESTS[@]}"; do
    case $d in news*) ft=news-ft ;; *) ft=$d ;; esac
    capture "$evals-$d-finetuned.json" groc eval "$src-ft-$ft" "$WORK/$d" \
      --split test --vocab union "${extra[@]}"
  done
  # The unbounded cache last: its FAISS index training and search are the slowest stages.
  for d in "${TESTS[@]}"; do
    capture "$evals-$d-unbounded.json" groc eval "$src" "$WORK/$d" \
      --states "$WORK/states/$SCALE/$run-$d" "${dw[@]}" "${CACHE_UNBOUNDED[@]}"
  done
done
stop_if_some_kinds
report table5 --out="$OUT" --work="$WORK" --scale="$SCALE" --tests="${TESTS[*]}" \
  --reuters-suffix="$REUTERS_SUFFIX" --reuters-min-count="$REUTERS_MIN_COUNT"
