#!/usr/bin/env bash
# The unbounded cache over a stream of ~24M tokens on one CPU core, with the datastore on disk:
# every shared corpus (../shared/data), tokenized and lowercased, PASSES times over, scored by a
# small tied PTB model whose every state joins the cache as the stream goes (Grave et al.'s
# unbounded cache). Prints one JSON object (benchmarks/large_datastore.py eval): wall time, peak
# memory (RSS and anonymous), perplexity with and without the cache, and per pass of the stream.
#
#   W=/tmp/groc-large bash benchmarks/large_stream.sh > large.json     # ~1.5 h on one core
#
# Work files (~4 GB at 3 passes) go to $W; each stage is skipped when its output exists.
set -euo pipefail
cd "$(dirname "$0")/.."
W=${W:-/tmp/groc-large}
D=${D:-../shared/data}
PASSES=${PASSES:-3}
INDEX=${INDEX:-IVF4096,PQ32x4fs,RFlat}
GROC=${GROC:-.venv/bin/groc}
PY=${PY:-.venv/bin/python}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
mkdir -p "$W"
say() { echo "large_stream: $*" >&2; }

if [ ! -s "$W/stream.txt" ]; then
    say "building the stream ($PASSES passes over every shared corpus)"
    {
        cat "$D"/ptb/ptb.{train,valid,test}.txt
        cat "$D"/wikitext-2/wiki.{train,valid,test}.tokens | tr '[:upper:]' '[:lower:]'
        cat "$D"/reuters/reuters.{training,test}.txt "$D"/gutenberg/*.txt "$D"/webtext/*.txt "$D"/wmt-newstest/*.en \
            | "$GROC" tokenize --lower --errors replace
    } > "$W/once.txt"
    for _ in $(seq "$PASSES"); do cat "$W/once.txt"; done > "$W/stream.txt.part"
    mv "$W/stream.txt.part" "$W/stream.txt"
    rm "$W/once.txt"
fi
[ -d "$W/data" ] || "$GROC" prepare --train "$D/ptb/ptb.train.txt" --valid "$D/ptb/ptb.valid.txt" \
    --test "$W/stream.txt" -o "$W/data"
[ -f "$W/run/summary.json" ] || "$GROC" train "$W/data" -o "$W/run" --output-layer tied --emb 64 --hidden 256 \
    --layers 1 --dropout 0.1 --max-epochs 2 --seed 1
[ -d "$W/states" ] || "$GROC" dump "$W/run" "$W/data" --split test -o "$W/states" --device cpu >&2  # its manifest: not ours
"$PY" benchmarks/large_datastore.py eval --segments "$PASSES" -- \
    "$GROC" eval "$W/run" "$W/data" --split test --states "$W/states" --cache unbounded --index "$INDEX" \
    --datastore disk --knn 256 --device cpu --per-token "$W/per-token.parquet" --force
