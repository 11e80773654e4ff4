#!/usr/bin/env bash
# Press & Wolf (2017), Table 6 on CPU: Zaremba et al.'s (2014) small PTB model without dropout, as
# published, with weight tying (WT), projection regularization (PR) and both:
#   bash recipes/press-wolf.sh        # ~1.2 h a row on one core; JOBS=2 rows at a time (~2.5 h on 2 cores)
# prints one table: parameters, final train/valid perplexity and test perplexity per row, beside the
# published ones, and writes it to results/press-wolf/ (.md, .parquet, commands.log).
# The model and schedule are the reference code's (ofirpress/UsingTheOutputEmbedding, ptb_word_lm/,
# the TensorFlow tutorial's SmallConfig): 2 LSTM layers of 200 units, 200-d embeddings, no dropout,
# every weight in U(-0.1, 0.1), batch 20, BPTT 20, plain SGD at 1.0 for epochs 1-5 and halved after
# every later epoch, 13 epochs. That code sums the loss over the 20 BPTT steps (and averages over
# the batch); groc's loss is the per-token mean, so the same steps are --lr 20 and --clip 0.25 here
# (5 / 20), and their penalty tf.nn.l2_loss(P) / (6.5 · 20) is projection_reg = 1 / (13 · 20 · 20)
# = 1/5200 (docs/reproduction.md; tests/training/test_zaremba_schedule.py checks both against the
# reference's formulation). Test perplexity is the last epoch's model on one stream, as the reference
# code evaluates it; valid is the last epoch's, over --eval-batch-size 20 streams as theirs.
# Rows (ROWS, default all four): untied, wt, pr, wt-pr.
# Environment: DATA (default ../shared/data), RESULTS (default results), GROC_WORK (default results/work),
# JOBS (default 2; one thread each), PR_INIT (the PR rows' projection: identity, the default, starts P = I
# with no bias; authors is the reference code's, P and a bias after it drawn like every weight, and its
# PR rows are pr-authors-init and wt-pr-authors-init, so that neither setting's runs or records stand in
# for the other's).
# RECORDS (default results/press-wolf/records): each finished row's record, RECORDS/ROW/ (its summary.json,
# config.json and metrics.parquet, and test.json), written at once when its evaluation is complete; a row
# with a record is finished even where its run is gone, and the table is made from the records alone
# (docs/reproduction.md's is built from this repository's docs/records/press-wolf/).
# Re-running skips finished rows and resumes an interrupted one from its last checkpoint (every 500
# steps; an epoch is 2,323).
NAME=press-wolf
source "$(dirname "$0")/../lib/common.sh"
ROWS=${ROWS:-untied wt pr wt-pr}
JOBS=${JOBS:-2}
counts JOBS
for r in $ROWS; do
  case $r in untied|wt|pr|wt-pr) ;; *) die "ROWS takes untied wt pr wt-pr, not '$r'" ;; esac
done
PR_INIT=${PR_INIT:-identity}
case "$PR_INIT" in authors|identity) ;; *) die "PR_INIT must be authors or identity, not '$PR_INIT'" ;; esac
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
step "$WORK/ptb" groc prepare --train "$DATA/ptb/ptb.train.txt" --valid "$DATA/ptb/ptb.valid.txt" \
  --test "$DATA/ptb/ptb.test.txt" -o "$WORK/ptb"
RUNS=$WORK/runs/press-wolf
EVALS=$WORK/evals/press-wolf
RECORDS=${RECORDS:-$OUT/records}
SMALL=(--emb 200 --hidden 200 --layers 2 --dropout 0 --init-range 0.1 --batch-size 20 --bptt 20 --eval-batch-size 20
       --optimizer sgd --schedule epochs --lr 20 --clip 0.25 --lr-decay 0.5 --lr-decay-after 4 --max-epochs 13
       --patience 13 --seed 1 --log-every 500 --checkpoint-every 500)
PR=0.00019230769230769231  # 1 / (13 * 20 * 20)
# name_of ROW: the folder of ROW's run, evaluation and record (PR_INIT=authors gives the PR rows their own).
name_of() { case $1 in *pr) [ "$PR_INIT" = authors ] && { echo "$1-authors-init"; return; } ;; esac; echo "$1"; }
row() {
  local r=$1 args=() name; name=$(name_of "$1")
  case $r in
    untied) args=(--output-layer lookup) ;;
    wt) args=(--output-layer tied) ;;
    pr) args=(--output-layer lookup --projection-reg "$PR" --projection-init "$PR_INIT") ;;
    wt-pr) args=(--output-layer tied --projection-reg "$PR" --projection-init "$PR_INIT") ;;
  esac
  [ -e "$RECORDS/$name" ] && { echo "= $RECORDS/$name (kept)" >&2; return 0; }
  train "$RUNS/$name" "$WORK/ptb" "${SMALL[@]}" "${args[@]}"
  capture "$EVALS/$name.test.json" groc eval "$RUNS/$name" "$WORK/ptb" --split test --checkpoint last
  keep_record "$RECORDS/$name" "$RUNS/$name" "test.json=$EVALS/$name.test.json"
}
running=0
for r in $ROWS; do
  [ "$running" -ge "$JOBS" ] && { wait -n; running=$((running - 1)); }
  row "$r" &
  running=$((running + 1))
done
failed=0
while [ "$running" -gt 0 ]; do wait -n || failed=1; running=$((running - 1)); done
[ "$failed" = 0 ] || { echo "$NAME: a row failed (above); re-run to resume it" >&2; exit 1; }
names=(); for r in $ROWS; do names+=("$(name_of "$r")"); done
report press-wolf --out="$OUT" --records="$RECORDS" --rows="${names[*]}"
