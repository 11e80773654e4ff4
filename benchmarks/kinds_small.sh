#!/usr/bin/env bash
# CPU-scale comparison of the seven output layers on PTB with one small configuration and
# the same token budget (issue: training evidence). Prints one JSON line per kind.
#   bash benchmarks/kinds_small.sh [TOKENS]      (DATA=../shared/data OUT=runs/kinds-small)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d .venv/bin ] && export PATH="$PWD/.venv/bin:$PATH"
DATA=${DATA:-../shared/data}
OUT=${OUT:-runs/kinds-small}
TOKENS=${1:-400000}
mkdir -p "$OUT"
[ -f "$OUT/ptb/manifest.json" ] || groc prepare --train "$DATA/ptb/ptb.train.txt" --valid "$DATA/ptb/ptb.valid.txt" --test "$DATA/ptb/ptb.test.txt" -o "$OUT/ptb" --force
[ -f "$OUT/lexicon.parquet" ] || groc lexicon --vocab "$OUT/ptb" -o "$OUT/lexicon.parquet" --force
SMALL=(--emb 128 --hidden 256 --dropout 0.3 --max-tokens "$TOKENS" --log-every 1000 --seed 1)
for kind in lookup tied bilinear deep-residual adaptive convolutional groc; do
  extra=()
  [ "$kind" = groc ] && extra=(--lexicon "$OUT/lexicon.parquet")
  groc train "$OUT/ptb" -o "$OUT/$kind" --output "$kind" "${SMALL[@]}" "${extra[@]}" --force --json \
    | python -c "import json,sys; s=json.load(sys.stdin); f=s['final']; print(json.dumps({'kind': '$kind', 'valid_ppl': round(f['valid_ppl'], 2), 'parameters': s['parameters'], 'tokens': s['tokens'], 'tokens_per_s': round(f['tokens_per_s'])}))"
done
