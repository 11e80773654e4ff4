#!/usr/bin/env bash
# Table 2 on PTB trained to convergence on CPU: all seven output layers with one CPU-sized prefix
# network and the paper's schedule (B.1: Adam 1e-3, batch 20, BPTT 35, clip 0.1, learning rate x0.1
# after 4 epochs without validation improvement, early stop after 8), each run until early
# stopping ends it (EPOCHS, default 200, is only a safeguard; a row it stops says so).
#   bash recipes/table2-cpu.sh           # hours a row on one core; JOBS=2 rows at a time
#   KINDS="tied tied-hidden" bash recipes/table2-cpu.sh   # some rows only (then once more for the table)
# prints one table (test perplexity closed and open vocabulary, the training split's perplexity without dropout,
# |Θ|, epochs, stopping reason, minutes)
# and writes it to results/table2-cpu/ with Figure 3's frequency bins (GroC against tied and against
# the best table model, with the three word types that make most of each difference, each way) and commands.log.
# Size: Zaremba et al.'s and Press & Wolf's small model, 2 LSTM layers, 200-d embeddings and 200
# units (an epoch of tied is about 5 minutes of one core here; 2 x 1024 would be about 25), with
# dropout, so that every row converges in hours and the untied/tied rows sit beside
# recipes/press-wolf.sh's. Each layer keeps its own Table 8 settings (output dropout r, depth k,
# activation, cutoffs, correction) from recipes/configs/penn/KIND.toml; the prefix is overridden
# for all alike: --emb 200 --hidden 200 and one dropout rate (DROPOUT, default 0.3) on the input
# embeddings, between the LSTM layers and after the last, as Zaremba et al. and Press & Wolf's
# large model drop (docs/reproduction.md gives the A/B that decided it).
# Rows (KINDS, default all): lookup convolutional tied bilinear deep-residual adaptive groc, and
# tied-hidden: tied with the paper's hidden-unit dropout only (no input-embedding dropout), the
# one-variable A/B of the prefix regularization, and groc-hidden, the same A/B for GroC (which underfits
# where the table models overfit: docs/reproduction.md), and groc-free-bias: GroC with a free per-word bias
# (--bias free, the authors' Table 2 setting) instead of the composed one, everything else as the groc row, the
# one-variable A/B of the bias. By default the GroC rows start first (each
# takes as long as three or four others), so that the other rows fill the other JOBS around them; a KINDS
# given starts in its own order.
# Environment: DATA (default ../shared/data), RESULTS (default results), GROC_WORK (default results/work),
# JOBS (default 2; one thread each), DROPOUT, EPOCHS, CHECKPOINT_EVERY (default 300 steps: a GroC
# epoch is 1,328 steps of up to 40 minutes on a busy core). Re-running skips finished rows and resumes
# an interrupted one from its last checkpoint (a row started without step checkpoints takes them up);
# a row that an earlier, lower EPOCHS ended is continued to today's and evaluated again (the old
# evaluations move to $WORK/evals/cpu/capN/);
# a finished row's evaluations and per-token records are written as soon as it ends, so an
# interruption costs at most the unfinished rows and 300 steps of each running one. Progress of every
# row (epochs, best validation perplexity, finished or not): groc runs results/work/runs/cpu
# RECORDS (default results/table2-cpu/records): each finished row's record, RECORDS/ptb-KIND/ (its
# summary.json, config.json and metrics.parquet, and its evaluations: test.json, test.parquet with the
# per-token records, test-open.json, train.json; about 2 MB), written at once when the row's evaluations
# are complete. A row with a record is finished even where its run is gone, and the table and Figure 3
# are made from the records alone: keep RECORDS somewhere that outlives the machine (this repository's
# docs/records/table2-cpu/ holds ours), and losing WORK costs only the unfinished rows.
NAME=table2-cpu
source "$(dirname "$0")/../lib/common.sh"
select_kinds tied tied-hidden lookup adaptive bilinear deep-residual convolutional groc groc-hidden groc-free-bias
JOBS=${JOBS:-2}
DROPOUT=${DROPOUT:-0.3}
EPOCHS=${EPOCHS:-200}
CHECKPOINT_EVERY=${CHECKPOINT_EVERY:-300}
counts JOBS EPOCHS
counts --or-zero CHECKPOINT_EVERY  # 0: checkpoints at epoch ends only
[[ "$DROPOUT" =~ ^(0|0?\.[0-9]+)$ ]] || die "DROPOUT must be a rate in [0, 1), not '$DROPOUT'"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
ptb
RUNS=$WORK/runs/cpu
EVALS=$WORK/evals/cpu
RECORDS=${RECORDS:-$OUT/records}
CPU=(--emb 200 --hidden 200 --layers 2 --dropout "$DROPOUT" --max-epochs "$EPOCHS" --seed 1 --log-every 500
     --checkpoint-every "$CHECKPOINT_EVERY")
# capped_at RUN: the epochs of a finished RUN that the max-epochs safeguard ended below EPOCHS, else nothing.
capped_at() {
  python - "$1/summary.json" "$EPOCHS" <<'PY'
import json, sys
try:
    summary = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    sys.exit()
epochs = summary.get("epochs")
if summary.get("stop_reason") == "max-epochs" and isinstance(epochs, int) and epochs < int(sys.argv[2]):
    print(epochs)
PY
}
row() {
  local kind=$1 layer=$1 extra=() lex=()
  case $kind in
    tied-hidden|groc-hidden) layer=${kind%-hidden}; extra=(--emb-dropout 0) ;;
    groc-free-bias) layer=groc; extra=(--emb-dropout "$DROPOUT" --bias free) ;;
    *) extra=(--emb-dropout "$DROPOUT") ;;
  esac
  # GroC's rows keep groc's 256-filter surface encoder (groc-small-encoder.toml: groc.toml before it became the
  # paper-size encoder, whose step at 2 x 200 is about 29 times tied's on one core, against 4.6 times: its highway
  # multiplies 20,583 strings by a 1,024 x 2,048 matrix every step; docs/benchmarks.md), so every GroC row here is
  # one variable from the others.
  local config=$layer
  [ "$layer" = groc ] && lex=(--lexicon "$WORK/ptb.lexicon.parquet") && config=groc-small-encoder
  local run=$RUNS/ptb-$kind record=$RECORDS/ptb-$kind capped
  capped=$(capped_at "$run")
  if [ -z "$capped" ] && [ -e "$record" ]; then echo "= $record (kept)" >&2; return 0; fi
  if [ -n "$capped" ]; then
    # The EPOCHS safeguard ended this row below today's EPOCHS: early stopping, not a cap, ends a row, so
    # it goes on from its last checkpoint (--resume raises the cap), and the evaluations of the model it
    # had are kept in $EVALS/cap$capped/ (the row is evaluated again when it ends). An interrupted
    # continuation keeps the old summary.json, so a re-run continues it again.
    echo "$NAME: ptb-$kind was ended by the safeguard at $capped epochs; continuing it to $EPOCHS" >&2
    mkdir -p "$EVALS/cap$capped"
    local f cmd=(groc train "$WORK/ptb" "${CPU[@]}" "${extra[@]}" ${lex[@]+"${lex[@]}"} -o "$run" --resume)
    for f in "$EVALS/ptb-$kind".*; do  # what the evaluations below wrote (ptb-KIND.test.json, ...)
      [ ! -e "$f" ] || mv "$f" "$EVALS/cap$capped/"
    done
    if [ -e "$record" ]; then mkdir -p "$RECORDS/cap$capped" && mv "$record" "$RECORDS/cap$capped/"; fi
    _logged "${cmd[@]}"
    "${cmd[@]}"
  else
    train "$run" "$WORK/ptb" --config "$ROOT/recipes/configs/penn/$config.toml" "${CPU[@]}" "${extra[@]}" \
      ${lex[@]+"${lex[@]}"}
  fi
  capture "$EVALS/ptb-$kind.test.json" groc eval "$RUNS/ptb-$kind" "$WORK/ptb" --split test \
    --per-token "$EVALS/ptb-$kind.test.parquet"
  capture "$EVALS/ptb-$kind.test-open.json" groc eval "$RUNS/ptb-$kind" "$WORK/ptb" --split test --vocab union \
    ${lex[@]+"${lex[@]}"}
  # The training split scored as the test split is (no dropout): over- or underfitting, row by row.
  capture "$EVALS/ptb-$kind.train.json" groc eval "$RUNS/ptb-$kind" "$WORK/ptb" --split train
  keep_row "$kind"
}
# keep_row KIND: the finished row's record, $RECORDS/ptb-KIND/ (see the top; keep_record in lib/steps.sh), and
# Figure 3's comparisons made from the row's earlier record removed (row returns before training a row that has
# its record, so only a row that trained or was continued gets here). The four evaluations by name, not a glob of
# ptb-KIND.*: a capture killed with its session leaves ptb-KIND.test.json.partial.XXXXXX beside them, which is no
# part of the record.
keep_row() {
  local kind=$1 what evals=()
  for what in test.json test.parquet test-open.json train.json; do evals+=("$what=$EVALS/ptb-$kind.$what"); done
  keep_record "$RECORDS/ptb-$kind" "$RUNS/ptb-$kind" "${evals[@]}" || return 1
  case $kind in groc) rm -f "$OUT"/compare-*-groc.json ;; *) rm -f "$OUT/compare-$kind-groc.json" ;; esac
}
# Longest rows first: started last, GroC would train alone for its many hours after the other rows,
# one thread on one core, the others idle (an epoch of it costs about five of tied's: docs/benchmarks.md).
QUEUE=$KINDS
if [ "$KINDS" = "$ALL_KINDS" ]; then
  QUEUE="groc groc-hidden groc-free-bias $(for kind in $KINDS; do case $kind in groc*) ;; *) printf '%s ' "$kind" ;; esac; done)"
fi
running=0 failed=0
for kind in $QUEUE; do
  [ "$running" -ge "$JOBS" ] && { wait -n || failed=1; running=$((running - 1)); }
  row "$kind" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do wait -n || failed=1; running=$((running - 1)); done
[ "$failed" = 0 ] || { echo "$NAME: a row failed (above); re-run to resume it" >&2; exit 1; }
stop_if_some_kinds
for kind in $KINDS; do
  case $kind in groc|tied-hidden|groc-hidden|groc-free-bias) continue ;; esac
  capture "$OUT/compare-$kind-groc.json" groc compare "$RECORDS/ptb-$kind/test.parquet" "$RECORDS/ptb-groc/test.parquet" \
    --words 3 --column model --names "$kind,groc"
done
report table2-cpu --out="$OUT" --records="$RECORDS" --kinds="$KINDS"
