#!/usr/bin/env bash
# Table 2 at the paper's scale in one short GPU window, or unattended on one's own GPU: every output
# layer trains at once on the one GPU, detached from the calling shell (setsid), each with its
# recipes/configs settings and a wall-clock budget; collect brings back results, not state.
#   bash recipes/gpu-table2.sh start           prepare the dataset, then launch the runs and return
#   bash recipes/gpu-table2.sh status          one line per run: state, epoch, best valid ppl, minutes
#   bash recipes/gpu-table2.sh wait [MIN]      until no run is live (exit 0) or MIN minutes pass (exit 3)
#   bash recipes/gpu-table2.sh stop            SIGTERM to every live run (each keeps its best checkpoint)
#   bash recipes/gpu-table2.sh collect DIR     evaluate every run that has a checkpoint on the test split,
#                                              then write the table and results into DIR: 7 files of at
#                                              most 16 MiB (table2.md/.parquet, metrics.parquet,
#                                              per-token.parquet, runs.json, environment.json, commands.log)
#   bash recipes/gpu-table2.sh unpack DIR OUT  (later, on a CPU) the per-token files in DIR back as
#                                              groc eval wrote them, for groc compare (Figure 3)
#   bash recipes/gpu-table2.sh prepare         the dataset and lexicon only (to carry to a lent GPU)
#   bash recipes/gpu-table2.sh row DIR         one slot, one row: the next row of RECORDS without a converged
#                                              record (tied, groc, then Table 2's order; KIND= to choose),
#                                              trained alone to early stopping or MINUTES, then its test
#                                              evaluations (closed with per-token records, --vocab union, the
#                                              training split) and its record into DIR: 8 files
#   bash recipes/gpu-table2.sh keep DIR        (here, on what came back) DIR checked as untrusted input and
#                                              kept as RECORDS/DATASET-KIND/, KIND the row next here
#   SCALE=tiny bash recipes/gpu-table2.sh ...  the CPU dry run: each config at 2 x 32 units, ~300 tokens
# RECORDS (row and keep; default docs/records/table2-paper, at SCALE=tiny RESULTS/gpu-table2/records-tiny): the
# paper-scale rows' records, one folder a row; `report table2-paper --records=RECORDS` makes their table.
# Environment: MINUTES (default 20) bounds each run's training; DATASET=ptb|wt2 (default ptb); KINDS
# (default all seven); EPOCHS caps epochs (paper 100, tiny 2); JOBS (collect's evaluations at once,
# default 2); BUSY_OK=1 starts beside other processes on the GPU; DATA, RESULTS, GROC_WORK as in every
# recipe. A second start while runs are live is refused (exit 3), as is collect. docs/reproduction.md,
# "Table 2 in one GPU window", says how to run it in a lease.
set -euo pipefail
NAME=gpu-table2
SELF=$(realpath "$0")
source "$(dirname "$SELF")/../lib/die.sh"
VERB=${1:-}
usage="usage: bash recipes/gpu-table2.sh start|status|wait [MINUTES]|stop|collect DIR|unpack DIR OUT|prepare|row DIR|keep DIR"
case "$VERB" in
  start|prepare) [ $# = 1 ] || die "$VERB takes no arguments; $usage" ;;
  status|stop) [ $# = 1 ] || die "$VERB takes no arguments; $usage" ;;
  wait) [ $# -le 2 ] && [[ "${2:-1}" =~ ^[0-9]+(\.[0-9]+)?$ ]] \
          || die "wait takes one number of minutes, not '${*:2}'; $usage" ;;
  collect) [ $# = 2 ] && [ -n "$2" ] || die "collect needs one directory; $usage" ;;
  unpack) [ $# = 3 ] || die "unpack needs the collected DIR and an OUT directory; $usage" ;;
  row|keep) [ $# = 2 ] && [ -n "$2" ] || die "$VERB needs one directory; $usage" ;;
  _run) ;;  # one run, in its own session (started by start)
  *) die "unknown verb '$VERB'; $usage" ;;
esac
SCALE=${SCALE:-paper}
case "$SCALE" in paper|tiny) ;; *) die "SCALE must be paper or tiny, not '$SCALE'" ;; esac
MINUTES=${MINUTES:-20}  # common.sh checks it and puts --max-minutes into BUDGET
DATASET=${DATASET:-ptb}
case "$DATASET" in ptb|wt2) ;; *) die "DATASET must be ptb or wt2, not '$DATASET'" ;; esac
JOBS=${JOBS:-2}
# status and wait only read: they leave commands.log alone.
case "$VERB" in status|wait|stop|unpack|keep) LOG=/dev/null ;; esac
source "$(dirname "$SELF")/../lib/common.sh"
counts JOBS
select_kinds "${OUTPUT_LAYERS[@]}"
STATE=$OUT/$SCALE-$DATASET
DEVICE=(--device cuda); [ "$SCALE" = tiny ] && DEVICE=(--device cpu)
window() { python "$ROOT/recipes/lib/window.py" "$@"; }
run_dir() { echo "$WORK/runs/$SCALE/$DATASET-$1"; }
# live: whether a process of the window runs (each holds window.lock, taken by start).
live() { [ -e "$STATE/window.lock" ] && ! flock -n "$STATE/window.lock" true; }
started() { [ -f "$STATE/start.json" ] || die "nothing was started in $STATE (run start first)"; }

# gpu_check: one clear line and a non-zero exit where the GPU is absent, unusable or busy.
gpu_check() {
  if ! command -v nvidia-smi > /dev/null; then
    die "no NVIDIA GPU here: nvidia-smi is not on PATH (SCALE=paper needs one; SCALE=tiny is the CPU dry run)"
  fi
  local gpu busy
  if ! gpu=$(nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version --format=csv,noheader 2>&1) \
      || [ -z "$gpu" ]; then
    die "nvidia-smi finds no usable GPU: $(echo "$gpu" | head -n 1)"
  fi
  busy=$(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>/dev/null | grep . || true)
  if [ -n "$busy" ] && [ "${BUSY_OK:-0}" != 1 ]; then
    echo "$NAME: the GPU is busy: $(echo "$busy" | wc -l) process(es) use it ($(echo "$busy" | paste -sd ';' -));" \
      "wait for them, or BUSY_OK=1 to start beside them" >&2
    exit 3
  fi
  if ! python -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    die "this Python's torch ($(python -c 'import torch; print(torch.__version__)' 2>&1 | tail -n 1)) cannot use" \
      "the GPU (a CPU build, or a driver too old for its CUDA); install a CUDA build (recipes/setup.sh)"
  fi
  # "NVIDIA H200, 0 MiB, 143771 MiB, 580.159.04" as "NVIDIA H200 (143771 MiB, driver 580.159.04; 0 MiB in use)"
  local name used total driver
  IFS=, read -r name used total driver <<< "$(echo "$gpu" | head -n 1)"
  GPU="$name (${total# }, driver ${driver# };${used} in use)"
}

RECORDS=${RECORDS:-$([ "$SCALE" = paper ] && echo "$ROOT/docs/records/table2-paper" || echo "$OUT/records-tiny")}
rows() { python "$ROOT/recipes/lib/paper_rows.py" "$@"; }

case "$VERB" in
prepare)
  dataset "$DATASET"
  ;;
keep)
  [ "$DATASET" = ptb ] || die "keep takes PTB rows (DATASET=ptb)"
  rows keep --returned "$2" --records "$RECORDS"
  ;;
row)
  dir=$2
  if [ -e "$dir" ] && { [ ! -d "$dir" ] || [ -n "$(ls -A "$dir")" ]; }; then
    die "$dir is not an empty directory; row writes into an empty or new one"
  fi
  [ "$DATASET" = ptb ] || die "row trains PTB rows (DATASET=ptb)"
  kind=${KIND:-$(rows next --records "$RECORDS")}
  [ -n "$kind" ] || { echo "$NAME: every row of $RECORDS has converged; nothing to train" >&2; exit 0; }
  case " ${OUTPUT_LAYERS[*]} " in *" $kind "*) ;; *) die "KIND must be one of ${OUTPUT_LAYERS[*]}, not '$kind'" ;; esac
  GPU="CPU (SCALE=tiny)"; [ "$SCALE" = paper ] && gpu_check
  mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
  exec > >(tee -a "$dir/lease.log") 2>&1
  echo "# $(date -u +%FT%TZ) $NAME row: $kind on $GPU, MINUTES=$MINUTES, RECORDS=$RECORDS"
  python -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda",
    torch.version.cuda, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")'
  dataset "$DATASET"
  settings "$DATASET" "$kind"
  extra=(); [ "$kind" = groc ] && extra=(--lexicon "$WORK/$DATASET.lexicon.parquet")
  run=$(run_dir "$kind")-row
  # A row trains from its first epoch in one slot (a run's state does not travel): an earlier attempt's run is
  # replaced (--force builds the new one aside and swaps it in only when it is complete).
  rc=0
  _logged groc train "$WORK/$DATASET" -o "$run" --force "${settings[@]}" "${BUDGET[@]}" "${DEVICE[@]}" "${extra[@]}"
  groc train "$WORK/$DATASET" -o "$run" --force "${settings[@]}" "${BUDGET[@]}" "${DEVICE[@]}" "${extra[@]}" || rc=$?
  [ -f "$run/summary.json" ] && [ -f "$run/best/model.safetensors" ] \
    || die "$kind trained no epoch in this slot (groc train: exit $rc); nothing to bring back"
  echo "# $(date -u +%FT%TZ) evaluations"
  groc eval "$run" "$WORK/$DATASET" --split test --per-token "$dir/test.parquet" "${DEVICE[@]}" > "$dir/test.json"
  groc eval "$run" "$WORK/$DATASET" --split test --vocab union "${extra[@]}" "${DEVICE[@]}" > "$dir/test-open.json"
  groc eval "$run" "$WORK/$DATASET" --split train "${DEVICE[@]}" > "$dir/train.json"
  cp "$run/summary.json" "$run/config.json" "$run/metrics.parquet" "$dir/"
  python - "$dir" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
t = json.load(open(sys.argv[1] + "/test.json"))["perplexity"]
print(f"# row {json.load(open(sys.argv[1] + '/config.json'))['model']['output']}: {s['epochs']} epochs, "
      f"{s['stop_reason']}, best valid {s['best_valid_ppl']:.2f}, test {t:.2f}, {s['seconds'] / 60:.1f} minutes")
PY
  echo "# $(date -u +%FT%TZ) $NAME row: done; here: bash recipes/gpu-table2.sh keep FILES_AT"
  ;;
start)
  if [ ! -e "$STATE" ]; then
    # A refused start (no usable GPU, no data) leaves no window behind: its lock goes, and common.sh's
    # _unmake takes the folder with the others it made.
    _MADE+=("$STATE")
    trap '[ -f "$STATE/start.json" ] || rm -f "$STATE/window.lock"; _unmake' EXIT
  fi
  mkdir -p "$STATE"
  exec 8>> "$STATE/window.lock"
  held=0; flock -n 8 2>/dev/null || held=$?
  if [ "$held" = 1 ]; then
    echo "$NAME: runs of this window are still live ($STATE); follow them with status, or wait until their budget" \
      "ends them" >&2
    exit 3
  elif [ "$held" != 0 ]; then
    die "the file system of $STATE has no file locks (flock: status $held), which this recipe needs to follow" \
      "its runs; set GROC_WORK to a folder on a local disk"
  fi
  GPU="CPU (SCALE=tiny)"; [ "$SCALE" = paper ] && gpu_check
  dataset "$DATASET"
  runs_json=""
  for kind in $ALL_KINDS; do runs_json+="${runs_json:+, }\"$kind\": \"$(run_dir "$kind")\""; done
  cat > "$STATE/start.json.partial" <<EOF
{"scale": "$SCALE", "dataset": "$DATASET", "kinds": "$KINDS", "minutes": $MINUTES, "started": "$(date -u +%FT%TZ)",
 "device": "$GPU", "log": "$LOG", "runs": {$runs_json}}
EOF
  mv "$STATE/start.json.partial" "$STATE/start.json"
  for kind in $KINDS; do
    rm -f "$STATE/$kind".{pid,start,rc}
    # Its own session (setsid): neither the end of this shell nor its Ctrl-C reaches the run. The
    # window's lock (fd 8) goes with it, so the window is live while any run is.
    setsid bash "$SELF" _run "$kind" < /dev/null > "$STATE/$kind.log" 2>&1 &
  done
  echo "$NAME: started $(echo "$KINDS" | wc -w) runs of at most $MINUTES minutes on $GPU; logs in $STATE;" \
    "follow with: bash recipes/gpu-table2.sh status" >&2
  ;;
_run)
  kind=$2
  echo $$ > "$STATE/$kind.pid"
  date +%s > "$STATE/$kind.start"
  trap 'echo $? > "$STATE/$kind.rc"' EXIT
  dataset "$DATASET"
  settings "$DATASET" "$kind"
  extra=(); [ "$kind" = groc ] && extra=(--lexicon "$WORK/$DATASET.lexicon.parquet")
  train "$(run_dir "$kind")" "$WORK/$DATASET" "${settings[@]}" "${BUDGET[@]}" "${DEVICE[@]}" \
    "${extra[@]}"
  ;;
status)
  started
  window status --state "$STATE"
  ;;
wait)
  started
  limit=${2:-}
  begun=$(date +%s) shown=$(date +%s)
  while live; do
    now=$(date +%s)
    if [ -n "$limit" ] && awk "BEGIN { exit !($now - $begun >= 60 * $limit) }"; then
      window status --state "$STATE"
      echo "$NAME: runs still live after $limit minutes" >&2
      exit 3
    fi
    if [ $((now - shown)) -ge 60 ]; then window status --state "$STATE" 2>/dev/null; shown=$now; fi
    sleep 2
  done
  window status --state "$STATE"
  ;;
stop)
  started
  # Each run leads its own process group (setsid): the group takes the signal, groc train included.
  for f in "$STATE"/*.pid; do [ -f "$f" ] && kill -TERM -- "-$(cat "$f")" 2> /dev/null || true; done
  ;;
collect)
  started
  dir=$2
  if live; then
    echo "$NAME: runs are still live; collect once they have ended (wait, or status to follow them)" >&2
    exit 3
  fi
  if [ -e "$dir" ] && { [ ! -d "$dir" ] || [ -n "$(ls -A "$dir")" ]; }; then
    die "$dir is not an empty directory; collect writes into an empty or new one"
  fi
  dataset "$DATASET"
  mkdir -p "$STATE/evals"
  failed=0 pids=()
  for kind in $ALL_KINDS; do
    run=$(run_dir "$kind") out=$STATE/evals/$kind.test.json
    [ -f "$STATE/$kind.pid" ] || continue  # not started in this window
    if [ ! -f "$run/best/model.safetensors" ]; then
      echo "$NAME: $kind has no checkpoint to evaluate (it ended before its first epoch did)" >&2
      continue
    fi
    # An evaluation of an earlier best checkpoint (a run resumed since) is done again.
    sum=$(sha256sum "$run/best/model.safetensors" | cut -c1-64)
    [ -f "$out" ] && ! grep -q "\"model_checksum\": \"$sum\"" "$out" && rm -f "$out" "${out%.json}.tokens.parquet"
    capture "$out" groc eval "$run" "$WORK/$DATASET" --split test --per-token "${out%.json}.tokens.parquet" --force \
      "${DEVICE[@]}" &
    pids+=($!)
    if [ ${#pids[@]} -ge "$JOBS" ]; then wait "${pids[0]}" || failed=1; pids=("${pids[@]:1}"); fi
  done
  for pid in ${pids[@]+"${pids[@]}"}; do wait "$pid" || failed=1; done
  [ "$failed" = 0 ] || echo "$NAME: an evaluation failed (above); its row has no test perplexity" >&2
  mkdir -p "$(dirname "$dir")"
  tmp=$(mktemp -d "$dir.partial.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  report gpu-table2 --out="$tmp" --state="$STATE" > /dev/null
  window bundle --state "$STATE" --out "$tmp"
  mkdir -p "$dir"
  mv "$tmp"/* "$dir"/
  ls -l "$dir" | tail -n +2 >&2
  cat "$dir/table2.md"
  exit "$failed"
  ;;
unpack)
  [ -f "$2/per-token.parquet" ] && [ -f "$2/runs.json" ] \
    || die "$2 is not a directory written by collect (no per-token.parquet or runs.json)"
  window unpack --bundle "$2" --out "$3"
  ;;
esac
