#!/usr/bin/env bash
# Table 1: dataset statistics (|V|, training tokens) and WordNet coverage of the training
# vocabulary (relations, definitions) for PTB and WikiText-2.
#   bash recipes/table1.sh            (DATA=../shared/data RESULTS=results; no training, ~1 minute)
# SCALE does not change this table.
NAME=table1
source "$(dirname "$0")/../lib/common.sh"
ptb
wikitext2
report table1 --out="$OUT" --work="$WORK"
