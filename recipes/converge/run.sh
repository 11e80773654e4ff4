#!/usr/bin/env bash
# Tied against GroC trained to convergence on CPU (issue 16): the paper's schedule (Adam 1e-3,
# batch 20, BPTT 35, clip 0.1, learning rate x0.1 after 4 epochs without validation
# improvement, stop after 8) on the embedded sample, small enough that every model converges on
# a 2-core machine in about an hour:
#   bash recipes/converge.sh              # writes results/converge/ and prints one table
# Data: Austen's Emma (160K training, 20K validation, the rest ~25K test tokens; words seen once
# become <unk>), and for open-vocabulary tests the start of Persuasion (near) and of The Man Who
# Was Thursday (far), as in quickstart.sh. Model: 128-d embeddings, one 256-unit LSTM layer
# below the 128-unit output layer, dropout 0.3 (the recipes' SCALE=small size); the char-CNN is
# groc's default (256 filters), so GroC has fewer parameters than tied.
# Models (MODELS, default all three):
#   tied          Press & Wolf's tied embeddings
#   groc          GroC, char-CNN initialised as the authors' code does (char_init=authors)
#   groc-uniform  GroC initialised as the paper's B.1 says (every weight in +-0.05; groc's default is the authors')
# One-variable A/Bs of the fidelity audit (docs/reproduction.md), not run by default:
#   tied-awd      tied with the authors' (awd-lstm-lm) prefix dropouts: 0.4 on the input embeddings,
#                 0.25 between LSTM layers, 0.4 on the last layer's output (instead of 0.3 after each)
#   groc-add      GroC (authors' init) combining its three forms by addition, the authors' default,
#                 instead of the paper's concatenation and 3d x d projection
#   groc-charcnn  GroC (authors' init) with the authors' char-CNN: widths 1-6 with 32-512 filters
#                 (1,024), selu after the convolution and in the highway
#   groc-sparse   GroC (authors' init) with sparse updates, update_prob 0.3 (the authors' README trains
#                 with --char_update_ratio 0.3; the paper's Table 2 uses p = 1, B.4)
#   groc-free-bias  GroC (authors' init) with a free per-word bias (bias=free, the authors' Table 2 runs)
#                 instead of the composed one
#   groc-paper-encoder  GroC (authors' init) with the paper-size surface encoder of recipes/configs/penn/
#                 groc.toml: 1,024 filters of widths 1-6, selu, a selu highway and a 1,024 -> d projection
#   groc-paper-encoder-free-bias  both (recipes/configs/penn/groc.toml's encoder and a free bias)
#   groc-amp      GroC (authors' init) trained under bfloat16 autocast (--amp), the A/B of mixed precision
#                 on CPU (measured on a CPU with AMX: docs/reproduction.md)
# Each model's record (its summary, config, per-epoch metrics and evaluations, and the per-token records of
# Emma's test split) goes to RECORDS/MODEL/ (default OUT/records) when it is complete.
# Each trains in its own one-thread process, JOBS (default 2) at a time. MINUTES (default 100)
# bounds each run as a safeguard; a run it stops is reported as not converged, and so is one
# that EPOCHS (default 100; e.g. EPOCHS=1 for a same-budget A/B of a slow variant) stops. Re-running skips
# what is done and resumes an interrupted run (delete the output directory to start over).
NAME=converge
source "$(dirname "$0")/../lib/steps.sh"
OUT=${OUT:-results/converge}
WORK=$OUT
SAMPLE=groc_cli/data
TEST_LINES=${TEST_LINES:-2500}  # lines of Persuasion and of Thursday to test on
JOBS=${JOBS:-2}
MINUTES=${MINUTES:-100}
EPOCHS=${EPOCHS:-100}
MODELS=${MODELS:-tied groc groc-uniform}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
for m in $MODELS; do
  case $m in tied|groc|groc-uniform|tied-awd|groc-add|groc-charcnn|groc-sparse|groc-free-bias|groc-paper-encoder|\
             groc-paper-encoder-free-bias|groc-amp) ;;
    *) die "MODELS takes tied groc groc-uniform tied-awd groc-add groc-charcnn groc-sparse groc-free-bias" \
         "groc-paper-encoder groc-paper-encoder-free-bias groc-amp, not '$m'" ;; esac
done
counts JOBS MINUTES EPOCHS TEST_LINES
mkdir -p "$OUT"
LOG=$OUT/commands.log
printf '# %s recipes/converge.sh MODELS="%s" (groc %s)\n' "$(date -u +%FT%TZ)" "$MODELS" "$(groc --version | cut -d' ' -f2)" >> "$LOG"
started=$SECONDS

step "$OUT/emma" groc prepare --train "$SAMPLE/austen-emma.txt" --tokenize --lower --split 160K,20K,rest --min-count 2 \
  -o "$OUT/emma"
for pair in near:austen-persuasion far:chesterton-thursday; do
  test_sample "$OUT/${pair%%:*}" "$SAMPLE/${pair#*:}.txt" "$TEST_LINES"
done
step "$OUT/lexicon.parquet" groc lexicon --vocab "$OUT/emma" --vocab "$OUT/near" --vocab "$OUT/far" -o "$OUT/lexicon.parquet"

MODEL=(--emb 128 --hidden 256 --dropout 0.3 --seed 1 --log-every 500 --max-epochs "$EPOCHS" --max-minutes "$MINUTES")
# model NAME: train NAME to convergence, then evaluate it closed-vocabulary on Emma's test split
# (with per-token records for the per-frequency comparison) and open-vocabulary on all three.
model() {
  local m=$1 args=() lex=()
  case $m in
    tied) args=(--output-layer tied) ;;
    groc) lex=(--lexicon "$OUT/lexicon.parquet"); args=(--output-layer groc "${lex[@]}" char_init=authors) ;;
    groc-uniform) lex=(--lexicon "$OUT/lexicon.parquet"); args=(--output-layer groc "${lex[@]}" char_init=uniform) ;;
    tied-awd) args=(--output-layer tied emb_dropout=0.4 layer_dropout=0.25 dropout=0.4) ;;
    groc-add) lex=(--lexicon "$OUT/lexicon.parquet"); args=(--output-layer groc "${lex[@]}" char_init=authors combine=add) ;;
    groc-charcnn) lex=(--lexicon "$OUT/lexicon.parquet")
      args=(--output-layer groc "${lex[@]}" char_init=authors char_activation=selu highway_activation=selu
            'char_filters=[[1,32],[2,32],[3,64],[4,128],[5,256],[6,512]]') ;;
    groc-sparse) lex=(--lexicon "$OUT/lexicon.parquet"); args=(--output-layer groc "${lex[@]}" char_init=authors update_prob=0.3) ;;
    groc-free-bias) lex=(--lexicon "$OUT/lexicon.parquet"); args=(--output-layer groc "${lex[@]}" char_init=authors bias=free) ;;
    groc-amp) lex=(--lexicon "$OUT/lexicon.parquet"); args=(--output-layer groc "${lex[@]}" char_init=authors --amp) ;;
    groc-paper-encoder*) lex=(--lexicon "$OUT/lexicon.parquet")
      args=(--output-layer groc "${lex[@]}" char_init=authors char_activation=selu highway_activation=selu
            'char_filters=[[1,32],[2,32],[3,64],[4,128],[5,256],[6,512]]' char_projection=true)
      [ "$m" = groc-paper-encoder-free-bias ] && args+=(bias=free) ;;
  esac
  train "$OUT/runs/$m" "$OUT/emma" "${MODEL[@]}" "${args[@]}"
  capture "$OUT/evals/$m-emma-closed.json" groc eval "$OUT/runs/$m" "$OUT/emma" --split test \
    --per-token "$OUT/evals/$m-emma-closed.parquet"
  local d
  for d in emma near far; do
    capture "$OUT/evals/$m-$d-open.json" groc eval "$OUT/runs/$m" "$OUT/$d" --split test --vocab union "${lex[@]}"
  done
  # The training split scored as the test split is (no dropout): how closely the model fits it.
  capture "$OUT/evals/$m-emma-train.json" groc eval "$OUT/runs/$m" "$OUT/emma" --split train
  keep_model "$m"
}
RECORDS=${RECORDS:-$OUT/records}
# keep_model MODEL: its record, RECORDS/MODEL/ (keep_record in lib/steps.sh).
keep_model() {
  local m=$1 f evals=()
  for f in emma-closed.json emma-closed.parquet emma-open.json near-open.json far-open.json emma-train.json; do
    evals+=("$f=$OUT/evals/$m-$f")
  done
  keep_record "$RECORDS/$m" "$OUT/runs/$m" "${evals[@]}"
}
running=0
for m in $MODELS; do
  if [ "$JOBS" -le 1 ]; then model "$m"; continue; fi
  [ "$running" -ge "$JOBS" ] && { wait -n; running=$((running - 1)); }
  model "$m" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do wait -n; running=$((running - 1)); done

for m in $MODELS; do
  [ "$m" = tied ] && continue
  case " $MODELS " in *" tied "*) ;; *) continue ;; esac
  capture "$OUT/evals/compare-tied-$m.json" groc compare "$OUT/evals/tied-emma-closed.parquet" \
    "$OUT/evals/$m-emma-closed.parquet" --column model
done
report converge --out="$OUT" --models="$MODELS" --seconds="$((SECONDS - started))"
