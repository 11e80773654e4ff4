#!/usr/bin/env bash
# The main job on the embedded sample (three public-domain novels shipped in groc_cli/data):
#   bash recipes/quickstart.sh          # writes quickstart/ and prints one table; ~5-10 min on 2 CPU cores
# 1. prepares an in-domain dataset (Austen's Emma: train/valid; words seen once become <unk>,
#    so that the tied model learns an input for the words it has never seen), a near-domain test set (the
#    start of Austen's Persuasion) and a far-domain one (the start of Chesterton's The Man Who
#    Was Thursday), the last two by piping tokenize into prepare;
# 2. builds the WordNet lexicon for every word of the three;
# 3. trains a small tied model and a small GroC model on Emma (one epoch, 170K tokens);
# 4. evaluates both on each domain with an open vocabulary (model vocabulary + the test words),
#    without a cache and with the local and unbounded caches, from one dump of states each;
# 5. draws the two runs' training curves (groc plot) and scores one sentence with each (groc score).
# Re-running skips what is done and resumes an interrupted training run (delete quickstart/ to
# start over). OUT=DIR writes elsewhere; TEST_LINES=N tests on the first N lines of each other-domain
# novel (default 2500; not LINES, which bash sets to the terminal's height).
NAME=quickstart
source "$(dirname "$0")/../lib/steps.sh"  # step, test_sample, capture, train, report; from the repository root
OUT=${OUT:-quickstart}
WORK=$OUT  # its stage locks: $OUT/.locks
SAMPLE=groc_cli/data
TEST_LINES=${TEST_LINES:-2500}   # lines of each other-domain novel to test on
counts TEST_LINES
mkdir -p "$OUT"
# The table in README/docs was made with 2 CPU threads; another count changes the last bits of
# floating-point sums and may move a last digit. OMP_NUM_THREADS=1 is the faster choice on a busy machine.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
started=$SECONDS

step "$OUT/emma" groc prepare --train "$SAMPLE/austen-emma.txt" --tokenize --lower -j 2 --split 170K,rest --min-count 2 \
  -o "$OUT/emma"
for pair in near:austen-persuasion far:chesterton-thursday; do
  test_sample "$OUT/${pair%%:*}" "$SAMPLE/${pair#*:}.txt" "$TEST_LINES"
done
step "$OUT/lexicon.parquet" groc lexicon --vocab "$OUT/emma" --vocab "$OUT/near" --vocab "$OUT/far" -o "$OUT/lexicon.parquet"

SMALL=(--emb 64 --hidden 128 --dropout 0.2 --max-epochs 1 --seed 1 --log-every 50)
for kind in tied groc; do
  extra=(); [ "$kind" = groc ] && extra=(--lexicon "$OUT/lexicon.parquet")
  # shellcheck disable=SC2046
  train "$OUT/$kind" "$OUT/emma" --output-layer "$kind" "${SMALL[@]}" "${extra[@]}" $(char_init_of "$kind")
  for d in emma near far; do
    split=test; [ "$d" = emma ] && split=valid
    step "$OUT/states/$kind-$d" groc dump "$OUT/$kind" "$OUT/$d" --split "$split" --vocab union --dtype float32 \
      -o "$OUT/states/$kind-$d" "${extra[@]}" > /dev/null   # its JSON is also states/*/meta.json
    dw=(); [ "$kind" = groc ] && dw=(--downweight-new 0.1)
    ev() { local name=$1; shift
           capture "$OUT/evals/$kind-$d-$name.json" groc eval "$OUT/$kind" "$OUT/$d" --states "$OUT/states/$kind-$d" "$@"; }
    ev base
    ev local "${dw[@]}" --cache local --cache-weight 0.1 --theta 0.5 --cache-size 2000
    ev unbounded "${dw[@]}" --cache unbounded --cache-weight 0.1 --index Flat --knn 256
  done
done

report quickstart --out="$OUT" --seconds="$((SECONDS - started))"

# 5. draws both runs' training curves and scores one sentence with each model.
step "$OUT/curves.png" groc plot "$OUT/tied" "$OUT/groc" -o "$OUT/curves.png" > /dev/null
SENTENCE="Emma was not at all surprised to hear that Mr. Knightley had walked to Hartfield."
score_sentence() {
  local kind
  printf 'model\tln_prob\ttokens\tperplexity\n'
  for kind in tied groc; do
    printf '%s\n' "$SENTENCE" | groc score "$OUT/$kind" - --tokenize --lower --vocab union | tail -n 1 | sed "s/^/$kind\t/"
  done
}
capture "$OUT/sentence.tsv" score_sentence
printf '\nTraining curves (groc plot): %s\n' "$OUT/curves.png"
printf 'One sentence scored by each model (groc score, natural log): "%s"\n' "$SENTENCE"
cat "$OUT/sentence.tsv"
