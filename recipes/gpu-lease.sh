#!/usr/bin/env bash
# A lent GPU window in one command: Table 2 (recipes/gpu-table2.sh) started, bounded by a deadline,
# and collected, on a machine that has CUDA torch but not groc's other packages.
#   bash recipes/gpu-lease.sh pack        here, before the window (PyPI reachable): the dataset and
#                                         lexicon, the raw corpus in .data/, the wheels the lent image
#                                         lacks in .whl/ (Python 3.12), both ignored by git; prints
#                                         the carry list and the command to give the lent machine
#   bash recipes/gpu-lease.sh run DIR     there: install the carried wheels under a fresh folder, start
#                                         every run, stop any still live at the deadline, and collect
#                                         into DIR (the 7 files of gpu-table2.sh) with lease.log beside
#                                         them: 8 files, as a lease brings back
#   bash recipes/gpu-lease.sh row DIR     there: one slot, one converged row: the next Table 2 row at the
#                                         paper's scale without a converged record in
#                                         docs/records/table2-paper (tied, groc, then the others), alone on
#                                         the GPU to early stopping (gpu-table2.sh row), its record in DIR;
#                                         here afterwards: bash recipes/gpu-table2.sh keep FILES_AT
# Environment: SECONDS_LEFT (default 540: what a 10-minute command leaves after the machine's start)
# is the whole command's budget; the runs get it less RESERVE seconds (default 150 for run: installs,
# starting, the last validation, collect's evaluations; 120 for row), so MINUTES is (SECONDS_LEFT -
# RESERVE) / 60 unless set. DATASET, KINDS, SCALE (tiny: the CPU dry run), RESULTS, GROC_WORK as gpu-table2.sh.
# Nothing here writes into a folder it did not make: the shims for `python` and `groc` go into a new
# temporary folder, removed when the lease ends (writing a shim over a link left by an earlier command
# can overwrite the image's own interpreter, which once spent a whole lease).
set -euo pipefail
NAME=gpu-lease
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/recipes/lib/lease.sh"
usage="usage: bash recipes/gpu-lease.sh pack | run DIR | row DIR"
VERB=${1:-}
case "$VERB" in
  pack) [ $# = 1 ] || die "pack takes no arguments; $usage" ;;
  run|row) [ $# = 2 ] && [ -n "$2" ] || die "$VERB needs one directory for the results; $usage" ;;
  *) die "unknown verb '$VERB'; $usage" ;;
esac
DATASET=${DATASET:-ptb}
case "$DATASET" in ptb) CORPUS=ptb ;; wt2) CORPUS=wikitext-2 ;;
  *) die "DATASET must be ptb or wt2, not '$DATASET'" ;; esac
lease_seconds "$([ "$VERB" = row ] && echo 120 || echo 150)"
if [ -z "${MINUTES:-}" ]; then
  lease_leaves 60 "no minute of training"
  MINUTES=$(awk "BEGIN { printf \"%.1f\", ($SECONDS_LEFT - $RESERVE) / 60 }")
fi
export DATASET MINUTES

if [ "$VERB" = pack ]; then
  cd "$ROOT"
  command -v groc > /dev/null || die "groc is not on PATH (bash recipes/setup.sh, then . .venv/bin/activate)"
  SRC=${DATA:-../shared/data}
  [ -d "$SRC/$CORPUS" ] || die "DATA=$SRC has no $CORPUS folder (see ../shared/data/README.md)"
  DATA=$SRC SCALE=paper bash recipes/gpu-table2.sh prepare
  mkdir -p .data .whl
  rm -rf ".data/$CORPUS" && cp -r "$SRC/$CORPUS" ".data/$CORPUS"
  # What the lent image lacks (docs/reproduction.md): FAISS, NLTK and sacremoses, for its Python 3.12.
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    -d .whl faiss-cpu==1.15.1 nltk==3.10.4 sacremoses==0.2.0
  for p in /.whl/ /.data/; do grep -qxF "$p" .git/info/exclude 2>/dev/null || echo "$p" >> "$(git rev-parse --git-path info/exclude)"; done
  work=${GROC_WORK:-${RESULTS:-results}/work}
  echo "$NAME: carry [\".whl\", \".data\", \"$work/$DATASET\", \"$work/$DATASET.lexicon.parquet\"]" \
    "($(du -shc .whl .data "$work/$DATASET" "$work/$DATASET.lexicon.parquet" | tail -n 1 | cut -f1), plus the repository's files)"
  echo "$NAME: command: bash recipes/gpu-lease.sh run \$OUT   (timeout_s 600; DATASET=$DATASET, MINUTES=$MINUTES)"
  exit 0
fi

# run and row
DIR=$2
lease_empty_dir "$DIR"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
begun=$(date +%s)
deadline=$((begun + SECONDS_LEFT - RESERVE + 60))  # the runs' MINUTES, and a minute for their start and last save
[ "$VERB" = run ] && exec > >(tee -a "$DIR/lease.log") 2>&1  # row: gpu-table2.sh row writes DIR/lease.log
cd "$ROOT"
echo "# $(date -u +%FT%TZ) $NAME $VERB: DATASET=$DATASET MINUTES=$MINUTES SECONDS_LEFT=$SECONDS_LEFT RESERVE=$RESERVE"
lease_gpu
lease_python
"$PY" -c 'import torch' 2> /dev/null || die "$PY has no torch (the lent image's python3 has it)"
if ! command -v groc > /dev/null || ! command -v python > /dev/null; then
  SHIMS=$(mktemp -d "${TMPDIR:-/tmp}/groc-lease.XXXXXX")
  trap 'rm -rf "$SHIMS"' EXIT  # the runs it started have ended (or been stopped) by the time this script does
  # groc from this checkout, run by that python3; PYTHONPATH carries it and the wheels' folder.
  SITE=$SHIMS/site
  if [ -d .whl ] && compgen -G ".whl/*.whl" > /dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" .whl/*.whl
  fi
  export PYTHONPATH="$ROOT:$SITE${PYTHONPATH:+:$PYTHONPATH}"
  printf '#!/bin/sh\nexec "%s" "$@"\n' "$PY" > "$SHIMS/python"
  printf '#!/bin/sh\nexec "%s" -m groc_cli "$@"\n' "$PY" > "$SHIMS/groc"
  chmod +x "$SHIMS/python" "$SHIMS/groc"
  export PATH="$SHIMS:$PATH"
fi
groc --version
[ -d .data ] && export DATA=${DATA:-.data}
if [ "$VERB" = row ]; then
  # The row's own time: what is left of MINUTES after the set-up above.
  MINUTES=$(awk "BEGIN { m = $MINUTES - ($(date +%s) - $begun) / 60; printf \"%.2f\", (m < 1 ? 1 : m) }")
  export MINUTES
  bash recipes/gpu-table2.sh row "$DIR"
  echo "# $(date -u +%FT%TZ) $NAME: done in $(( $(date +%s) - begun )) s"
  exit 0
fi
bash recipes/gpu-table2.sh start
left=$((deadline - $(date +%s)))
[ "$left" -lt 60 ] && left=60
bash recipes/gpu-table2.sh wait "$(awk "BEGIN { printf \"%.2f\", $left / 60 }")" || {
  # Past the deadline: stop what is still live (SIGTERM: each run keeps its best checkpoint).
  echo "$NAME: stopping the runs still live at the deadline"
  bash recipes/gpu-table2.sh stop
  bash recipes/gpu-table2.sh wait 1 || true
}
echo "# $(date -u +%FT%TZ) collect"
JOBS=${JOBS:-7} bash recipes/gpu-table2.sh collect "$DIR/table2"
mv "$DIR"/table2/* "$DIR"/ && rmdir "$DIR/table2"
echo "# $(date -u +%FT%TZ) $NAME: done in $(( $(date +%s) - begun )) s"
