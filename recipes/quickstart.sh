#!/usr/bin/env bash
# The main job on the embedded sample (three public-domain novels shipped in groc_cli/data):
#   bash recipes/quickstart.sh          # writes quickstart/ and prints a summary table
# Prepares an in-domain dataset (Austen's Emma: train/valid), a near-domain test set
# (Austen's Persuasion) and a far-domain one (Chesterton's The Man Who Was Thursday),
# and builds the WordNet lexicon for the training vocabulary.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d .venv/bin ] && export PATH="$PWD/.venv/bin:$PATH"
OUT=${OUT:-quickstart}
SAMPLE=groc_cli/data
mkdir -p "$OUT"
run() { echo "+ $*" >&2; "$@"; }

run groc prepare --train "$SAMPLE/austen-emma.txt" --tokenize --lower -j 2 --split 170K,rest -o "$OUT/emma" --force
run groc prepare --test "$SAMPLE/austen-persuasion.txt" --tokenize --lower -j 2 -o "$OUT/near" --force
run groc prepare --test "$SAMPLE/chesterton-thursday.txt" --tokenize --lower -j 2 -o "$OUT/far" --force
run groc lexicon --vocab "$OUT/emma" -o "$OUT/lexicon.parquet" --force --json > "$OUT/lexicon.json"

python - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
print(f"{'dataset':<8} {'split':<6} {'tokens':>9} {'types':>7} {'OOV vs emma':>12}")
train_vocab = None
for name in ("emma", "near", "far"):
    m = json.loads((out / name / "manifest.json").read_text())
    for split, s in m["splits"].items():
        print(f"{name:<8} {split:<6} {s['tokens']:>9,} {s['types']:>7,} {'' if 'oov_rate' not in s or split == 'train' else format(s['oov_rate'], '.2%'):>12}")
lex = json.loads((out / "lexicon.json").read_text())
print(f"WordNet coverage of the emma vocabulary ({lex['vocab_size']:,} types): "
      f"relations {lex['relations_coverage']:.1%}, definitions {lex['definition_coverage']:.1%}")
PY
