#!/usr/bin/env bash
# A lent GPU window spent on the runs this machine is already training: pack them, resume them there for
# one device command, and put their state back here, where `groc train DATASET -o RUN --resume` goes on.
#   bash recipes/gpu-resume.sh pack DATASET RUN...  here, with the runs stopped: copies DATASET (from
#                              groc prepare), each RUN (a groc run with a checkpoint in last/) and the
#                              groc_cli of CODE (the checkout that trains them; default this one) into
#                              .gpu-resume/ (ignored by git); prints the carry list and the command to give
#   bash recipes/gpu-resume.sh run DIR       there: resume every packed run at once, stop those still
#                              training at the deadline (each keeps its last checkpoint) and bring them
#                              back into DIR: state.tar.NN, parts of at most 15 MiB, and gpu-resume.log
#   bash recipes/gpu-resume.sh unpack DIR    here: put each run back where it was packed from, unless it
#                              has trained here since (its checkpoint changed) or is training now
# Environment: SECONDS_LEFT (default 540: what a 10-minute command leaves after the machine's start) is
# run's whole budget, and the runs stop RESERVE seconds (default 30: the last checkpoint, the copy back)
# before it. DEVICE: cuda (default), or cpu for a dry run. TRAIN_ARGS: more flags for every resumed
# `groc train`; only budgets may change on resume (--max-epochs, --max-tokens, --max-minutes, ...).
# BACK_MIB (default 64): what a lease brings back from $OUT, all files together. What travels (the working
# tree and the pack) must stay under 64 MiB, and the runs grow there (best/, once an epoch improves, and
# their step records), so pack refuses runs whose projected size on return exceeds BACK_MIB less 1 MiB; run
# brings back whole runs, in the order packed, as many as fit, and names any left there (unpack then keeps
# the copy here as it was packed). One device command a lease: a second command does not find the first
# one's pack on the lent machine; pack again from what came back (docs/records/table2-cpu-h200-partial/).
set -euo pipefail
NAME=gpu-resume
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/recipes/lib/lease.sh"
PACK=${GPU_RESUME_PACK:-$ROOT/.gpu-resume}  # the pack; tests set another
PART=15m
usage="usage: bash recipes/gpu-resume.sh pack DATASET RUN... | run DIR | unpack DIR"
VERB=${1:-}
case "$VERB" in
  pack) [ $# -ge 3 ] || die "pack needs a dataset and at least one run; $usage" ;;
  run|unpack) [ $# = 2 ] && [ -n "$2" ] || die "$VERB needs one directory; $usage" ;;
  *) die "unknown verb '$VERB'; $usage" ;;
esac

# The pid of the live groc process training RUN (its output lock, .NAME.lock beside it), or nothing.
trainer_of() {
  local lock pid
  lock="$(dirname "$1")/.$(basename "$1").lock"
  pid=$(cat "$lock" 2>/dev/null || true)
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && echo "$pid" || true
}
checkpoint_sum() { sha256sum "$1/last/trainer.pt" | cut -d' ' -f1; }
bytes_of() { du -sbc "$@" | tail -n 1 | cut -f1; }
in_mib() { awk "BEGIN { printf \"%.1f\", $1 / 1048576 }"; }
mib() { in_mib "$(bytes_of "$@")"; }
# tar_bytes PATH...: about what PATHs take in a tar: their bytes and 1 KiB for each entry's header and padding.
tar_bytes() { echo $(( $(bytes_of "$@") + 1024 * $(find "$@" | wc -l) )); }
BACK_MIB=${BACK_MIB:-64}
[[ "$BACK_MIB" =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk "BEGIN { exit !($BACK_MIB > 1) }" \
  || die "BACK_MIB must be a number of MiB above 1, not '$BACK_MIB'"
BACK_BYTES=$(awk "BEGIN { printf \"%d\", ($BACK_MIB - 1) * 1048576 }")  # less 1 MiB: the log, the manifest

if [ "$VERB" = pack ]; then
  DATASET=$2; shift 2
  CODE=${CODE:-$ROOT}
  [ -f "$DATASET/manifest.json" ] || die "$DATASET is not a dataset from groc prepare (no manifest.json)"
  [ -f "$CODE/groc_cli/__main__.py" ] || die "CODE=$CODE has no groc_cli to run the runs with"
  declare -A seen=()
  for run in "$@"; do
    [ -f "$run/config.json" ] && [ -f "$run/last/trainer.pt" ] \
      || die "$run is not a groc run with a checkpoint to resume (config.json, last/trainer.pt)"
    abs=$(cd "$run" && pwd)
    [ -z "${seen[$abs]:-}" ] || die "$run is named twice"
    seen[$abs]=1
    pid=$(trainer_of "$abs")
    [ -z "$pid" ] || die "$run is training here (pid $pid): stop it first; it resumes from its last checkpoint"
  done
  size=$(mib "$@")
  # On return each run holds what it holds now, a best/ model once an epoch improves (the size of its last
  # model, where it has no best/ yet) and 1 MiB more of step and epoch records.
  back=0
  for run in "$@"; do
    grow=1048576
    [ -d "$run/best" ] || grow=$((grow + $(stat -c %s "$run/last/model.safetensors" 2>/dev/null || echo 0)))
    back=$((back + $(tar_bytes "$run") + grow))
  done
  [ "$back" -le "$BACK_BYTES" ] || die "the runs hold $size MiB and would come back as about" \
    "$(in_mib "$back") MiB (with best/); a lease brings back $BACK_MIB MiB (BACK_MIB)"
  mkdir -p "$(dirname "$PACK")"
  tmp=$(mktemp -d "$PACK.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/code" "$tmp/data" "$tmp/runs"
  tar -C "$CODE" --exclude=__pycache__ -cf - groc_cli | tar -C "$tmp/code" -xf -
  cp -r "$DATASET" "$tmp/data/dataset"
  i=0
  for run in "$@"; do
    i=$((i + 1)); abs=$(cd "$run" && pwd)
    cp -rp "$abs" "$tmp/runs/$i"
    rm -f "$tmp/runs/$i"/.*.lock
    sum=$(checkpoint_sum "$abs")
    [ "$sum" = "$(checkpoint_sum "$tmp/runs/$i")" ] || die "$run changed while it was copied: stop its training first"
    printf '%s\t%s\t%s\n' "$i" "$abs" "$sum" >> "$tmp/manifest.tsv"
  done
  tracked=$(cd "$ROOT" && { git ls-files -z 2>/dev/null || true; } | du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1 || true)
  total=$(in_mib $(( $(bytes_of "$tmp") + ${tracked:-0} )))
  awk "BEGIN { exit !($total > 63) }" && die "the working tree and the pack come to $total MiB; a lease carries 64 MiB"
  rm -rf "$PACK"; mv "$tmp" "$PACK"; trap - EXIT
  ex=$(cd "$ROOT" && git rev-parse --git-path info/exclude 2>/dev/null || true)
  if [ -n "$ex" ] && [ -z "${GPU_RESUME_PACK:-}" ]; then
    case $ex in /*) ;; *) ex=$ROOT/$ex ;; esac
    for p in /.gpu-resume/ '/.gpu-resume.*/'; do
      grep -qxF "$p" "$ex" 2>/dev/null || { mkdir -p "$(dirname "$ex")"; echo "$p" >> "$ex"; }
    done
  fi
  echo "$NAME: packed $i run(s), $size MiB, and $DATASET into .gpu-resume ($total MiB with the working tree)"
  echo "$NAME: carry [\".gpu-resume\"]"
  echo "$NAME: command: bash recipes/gpu-resume.sh run \$OUT   (timeout_s 600; SECONDS_LEFT=${SECONDS_LEFT:-540})"
  echo "$NAME: then here: bash recipes/gpu-resume.sh unpack FILES_AT"
  exit 0
fi

DIR=$2
if [ "$VERB" = run ]; then
  [ -f "$PACK/manifest.tsv" ] || die "nothing packed: no manifest.tsv in $PACK (bash recipes/gpu-resume.sh pack first)"
  lease_empty_dir "$DIR"
  lease_seconds 30
  lease_leaves 10 "no time to train"
  DEVICE=${DEVICE:-cuda}
  lease_python
  case $DEVICE in cuda*) PYTHONPATH="$PACK/code" "$PY" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' \
    || die "DEVICE=$DEVICE, but this torch sees no CUDA device (DEVICE=cpu for a dry run)" ;; esac
  mkdir -p "$DIR"; DIR=$(cd "$DIR" && pwd)
  begun=$(date +%s)
  exec > >(tee -a "$DIR/gpu-resume.log") 2>&1
  echo "# $(date -u +%FT%TZ) $NAME run: DEVICE=$DEVICE SECONDS_LEFT=$SECONDS_LEFT RESERVE=$RESERVE TRAIN_ARGS=${TRAIN_ARGS:-}"
  lease_gpu
  export PYTHONPATH="$PACK/code${PYTHONPATH:+:$PYTHONPATH}"
  "$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available())'
  limit=$((SECONDS_LEFT - RESERVE - ($(date +%s) - begun)))
  pids=()
  while IFS=$'\t' read -r i abs _; do
    # shellcheck disable=SC2086  # TRAIN_ARGS is a list of flags
    (cd "$PACK" && exec timeout -s TERM "$limit" "$PY" -m groc_cli train data/dataset -o "runs/$i" --resume \
       --device "$DEVICE" ${TRAIN_ARGS:-}) < /dev/null > "$PACK/runs/$i.log" 2>&1 &
    pids+=("$!")
    echo "# run $i ($abs): started, at most $limit s"
  done < "$PACK/manifest.tsv"
  i=0 failed=0
  for pid in "${pids[@]}"; do
    i=$((i + 1)); rc=0; wait "$pid" || rc=$?
    case $rc in 0) how="ended" ;; 124) how="stopped at the deadline" ;; *) how="failed (exit $rc)"; failed=1 ;; esac
    echo "# run $i: $how"
    grep -E '^(epoch [0-9]+:|resuming|stopped|groc: error)' "$PACK/runs/$i.log" | sed "s/^/  run $i: /" || true
  done
  # Whole runs, in the order packed, as many as fit in what a lease brings back: a run cut off at the limit
  # would come back unusable and take the ones after it along (two runs were lost so: see the record above).
  keep=(manifest.tsv) used=$(tar_bytes "$PACK/manifest.tsv") left=0
  while IFS=$'\t' read -r i abs _; do
    need=$(tar_bytes "$PACK/runs/$i" "$PACK/runs/$i.log")
    if [ $((used + need)) -le "$BACK_BYTES" ]; then
      keep+=("runs/$i" "runs/$i.log"); used=$((used + need))
    else
      echo "# run $i ($abs): $(mib "$PACK/runs/$i") MiB does not fit in what comes back (BACK_MIB=$BACK_MIB," \
        "$(in_mib "$used") MiB taken); not brought back: unpack leaves the packed-from run as it was"
      left=1
    fi
  done < "$PACK/manifest.tsv"
  # back.tsv, the runs that came back, goes last: unpack takes a state without it for one cut short.
  printf '%s\n' "${keep[@]}" | sed -n 's|^runs/\([0-9]*\)$|\1|p' > "$PACK/back.tsv"
  (cd "$PACK" && tar -cf - "${keep[@]}" back.tsv) | split -b "$PART" -d - "$DIR/state.tar."
  parts=$(ls "$DIR"/state.tar.* | wc -l)
  echo "# $(date -u +%FT%TZ) $NAME: $(( (${#keep[@]} - 1) / 2 )) run(s) in $parts part(s) of state.tar, done in $(( $(date +%s) - begun )) s"
  [ "$parts" -le 7 ] || { echo "$NAME: the state needs $parts parts, more than a lease brings back" >&2; exit 1; }
  [ "$failed" = 0 ] && [ "$left" = 0 ] || exit 1
  exit 0
fi

# unpack: what comes back is untrusted (GUIDE 18). The pack made here, never the returned archive, says which
# runs may come back and where they go; the archive is extracted by recipes/lib/returned.py only if every
# member is a regular file or folder under one of those runs (no links, devices, owners or modes from it),
# and its manifest must be the one packed here. Anything else is one line, exit 2, and nothing changes here.
[ -d "$DIR" ] && compgen -G "$DIR/state.tar.*" > /dev/null || die "$DIR holds no state.tar parts from gpu-resume.sh run"
[ -f "$PACK/manifest.tsv" ] && [ ! -L "$PACK" ] && [ ! -L "$PACK/manifest.tsv" ] \
  || die "no pack here ($PACK/manifest.tsv): unpack puts back only the runs that pack copied from this machine"
ids=$(cut -f1 "$PACK/manifest.tsv" | paste -sd, -)
work=$(mktemp -d "$PACK.XXXXXX")
trap 'rm -rf "$work"' EXIT
tmp=$work/state
"${PYTHON:-python3}" "$ROOT/recipes/lib/returned.py" untar --name "$NAME" --into "$tmp" --runs "$ids" \
  "$DIR"/state.tar.* || exit 2
[ -f "$tmp/manifest.tsv" ] && [ -f "$tmp/back.tsv" ] || die "the state.tar parts in $DIR are incomplete or damaged"
cmp -s "$tmp/manifest.tsv" "$PACK/manifest.tsv" \
  || die "the state.tar parts in $DIR are not of the pack made here (their manifest.tsv differs); nothing was put back"
while IFS= read -r i; do
  [[ "$i" =~ ^[0-9]+$ ]] && grep -q "^$i"$'\t' "$PACK/manifest.tsv" \
    || die "the state.tar parts in $DIR name a run that was not packed here ('$i' in back.tsv); nothing was put back"
done < "$tmp/back.tsv"
back=0 kept=0
while IFS=$'\t' read -r i abs sum; do
  if ! grep -qx "$i" "$tmp/back.tsv"; then
    echo "$NAME: run $i ($abs) did not come back (gpu-resume.log says why); left as it is here" >&2
    kept=$((kept + 1)); continue
  fi
  if [ ! -f "$tmp/runs/$i/last/trainer.pt" ]; then
    echo "$NAME: run $i ($abs) came back without a checkpoint; left as it is here" >&2; kept=$((kept + 1)); continue
  fi
  if [ ! -f "$abs/last/trainer.pt" ] || [ "$(checkpoint_sum "$abs")" != "$sum" ]; then
    echo "$NAME: $abs has trained here since pack (its checkpoint changed); its GPU state is not put back" >&2
    kept=$((kept + 1)); continue
  fi
  pid=$(trainer_of "$abs")
  if [ -n "$pid" ]; then
    echo "$NAME: $abs is training here (pid $pid); its GPU state is not put back" >&2; kept=$((kept + 1)); continue
  fi
  # The returned run replaces the local one in two renames; the local one is removed only once it has.
  mv "$tmp/runs/$i" "$abs.gpu-resume.new"
  mv "$abs" "$abs.gpu-resume.old" && mv "$abs.gpu-resume.new" "$abs" && rm -rf "$abs.gpu-resume.old"
  echo "$NAME: $abs: put back ($(grep -cE '^epoch [0-9]+:' "$tmp/runs/$i.log" 2>/dev/null || true) epoch(s) ended on the lease)"
  back=$((back + 1))
done < "$PACK/manifest.tsv"
echo "$NAME: $back run(s) put back, $kept left as they were"
[ "$kept" = 0 ] || exit 1
