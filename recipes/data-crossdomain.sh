#!/usr/bin/env bash
# The GroC paper's own cross-domain datasets (section 5.1, appendix C.2, Table 6), rebuilt from
# the original downloads. Nothing is downloaded here: fetch the files yourself, put them in SRC.
#
#   SRC=~/corpora bash recipes/data-crossdomain.sh
#   SRC=~/corpora DOMAINS="news2007 wiki" JOBS=8 bash recipes/data-crossdomain.sh
#
# Expected in SRC (the names of the downloads):
#   news.2007.en.shuffled ... news.2011.en.shuffled
#       WMT 2014 News Crawl, English, one file per year (www.statmt.org/wmt14/translation-task.html;
#       www.statmt.org/wmt14/training-monolingual-news-crawl/news.YEAR.en.shuffled.gz, gunzipped).
#   commoncrawl.de-en.en
#       English side of the WMT 2014 Common Crawl English-German parallel data
#       (training-parallel-commoncrawl.tgz on the same WMT 2014 page). The paper used "the English
#       portion of the English-German aligned data"; WEB_FILE=... picks another file
#       (e.g. commoncrawl.fr-en.en).
#   wikitext-103-raw/wiki.train.raw, wiki.valid.raw, wiki.test.raw
#       WikiText-103 raw (wikitext-103-raw-v1.zip) from its publisher, Salesforce Research
#       (blog.einstein.ai/the-wikitext-long-term-dependency-language-modeling-dataset/). The raw
#       release is the one the paper implies: it tokenized all data itself, and the tokenized
#       release has rare words replaced by <unk>, which an open-vocabulary test cannot use.
#       WIKI_DIR=... points elsewhere (it must hold the three wiki.*.raw files).
#
# Produces, in OUT (default results/work/crossdomain), one `groc prepare` dataset directory per
# domain of Table 6, Moses-tokenized (groc tokenize) and lowercased:
#   news2007 .. news2011  the first TRAIN (2M) tokens of the year's file as train, the next VALID
#                         (2M) as valid, the next TEST (10M) as test
#   web                   the same from the Common Crawl file, then each split's lines re-shuffled
#                         (seed SEED), as the paper did
#   wiki                  the first TRAIN/VALID/TEST tokens of wiki.train/valid/test.raw
#                         respectively; WikiText-103's valid and test files are smaller than 2M and
#                         10M tokens, so those splits are the whole files
#   lexicon.parquet       `groc lexicon` over every domain's types (open-vocabulary evaluation)
#   commands.log          a header line per run, then every command run
# Budgets count tokens with one <eos> per line and cut at line ends (as `groc prepare --split`).
# Only the first ~TRAIN+VALID+TEST tokens of each file are read and tokenized.
#
# Settings (environment): SRC (required), OUT, JOBS (tokenizer processes, default 2),
# TRAIN/VALID/TEST (default 2M/2M/10M, K/M/G suffixes), DOMAINS (default all seven), WEB_FILE,
# WIKI_DIR, SEED (web re-shuffle, default 1), PYTHON (default python3, used for the shuffle),
# ERRORS (invalid UTF-8: strict, the default, stops naming the line; replace substitutes U+FFFD).
#
# A domain whose directory exists is skipped (groc writes outputs atomically, so an existing one
# is complete); the lexicon is rebuilt when a domain was built. A missing input file stops the
# script with exit status 2 before any work.
#
# Time: not measured at the real sizes (14M tokens per domain); runs here only on small stand-ins
# (tests/recipes/test_data.py).
set -euo pipefail
NAME=data-crossdomain.sh
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ -d "$ROOT/.venv/bin" ] && export PATH="$ROOT/.venv/bin:$PATH"

source "$ROOT/recipes/lib/die.sh"

[ -n "${SRC:-}" ] || die "set SRC to the directory with the downloaded files (see the top of this script)"
OUT=${OUT:-$ROOT/results/work/crossdomain}
JOBS=${JOBS:-2}
TRAIN=${TRAIN:-2M}
VALID=${VALID:-2M}
TEST=${TEST:-10M}
SEED=${SEED:-1}
PYTHON=${PYTHON:-python3}
ERRORS=${ERRORS:-strict}
ALL_DOMAINS="news2007 news2008 news2009 news2010 news2011 web wiki"
DOMAINS=${DOMAINS:-$ALL_DOMAINS}
WEB_FILE=${WEB_FILE:-$SRC/commoncrawl.de-en.en}
WIKI_DIR=${WIKI_DIR:-$SRC/wikitext-103-raw}
LEXICON=$OUT/lexicon.parquet
MARGIN_LINES=100  # raw lines read past the budget (see HEAD_AWK)

# tokens BUDGET: "2M" -> 2000000 (K/M/G suffixes, as groc prepare --split).
tokens() {
  awk -v s="$1" 'BEGIN { s = tolower(s); m = 1; u = substr(s, length(s))
    if (u == "k") m = 1e3; else if (u == "m") m = 1e6; else if (u == "g") m = 1e9
    if (m > 1) s = substr(s, 1, length(s) - 1)
    if (s !~ /^[0-9]+(\.[0-9]+)?$/ || int(s * m) <= 0) exit 1
    printf "%.0f\n", int(s * m) }'
}
B_TRAIN=$(tokens "$TRAIN") || die "TRAIN=$TRAIN: expected a token budget like 2M"
B_VALID=$(tokens "$VALID") || die "VALID=$VALID: expected a token budget like 2M"
B_TEST=$(tokens "$TEST") || die "TEST=$TEST: expected a token budget like 10M"
B_TOTAL=$((B_TRAIN + B_VALID + B_TEST))
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || die "JOBS=$JOBS: expected a positive integer"
[[ $SEED =~ ^[0-9]+$ ]] || die "SEED=$SEED: expected a non-negative integer"
case $ERRORS in strict|replace) ;; *) die "ERRORS=$ERRORS: expected strict or replace" ;; esac
[ -n "$(echo $DOMAINS)" ] || die "DOMAINS is empty (known: $ALL_DOMAINS)"
command -v groc > /dev/null || die "groc is not on PATH (bash recipes/setup.sh, or activate its environment)"

# inputs DOMAIN: the files a domain reads, into INPUTS.
inputs() {
  case $1 in
    news2007|news2008|news2009|news2010|news2011) INPUTS=("$SRC/news.${1#news}.en.shuffled") ;;
    web) INPUTS=("$WEB_FILE") ;;
    wiki) INPUTS=("$WIKI_DIR/wiki.train.raw" "$WIKI_DIR/wiki.valid.raw" "$WIKI_DIR/wiki.test.raw") ;;
    *) die "DOMAINS: unknown domain '$1' (known: $ALL_DOMAINS)" ;;
  esac
}
where() {  # where a domain's files come from
  case $1 in
    news*) echo "WMT 2014 News Crawl ${1#news}: news.${1#news}.en.shuffled.gz from www.statmt.org/wmt14/translation-task.html, gunzipped" ;;
    web) echo "WMT 2014 Common Crawl: training-parallel-commoncrawl.tgz from www.statmt.org/wmt14/translation-task.html" ;;
    wiki) echo "WikiText-103 raw: wikitext-103-raw-v1.zip from Salesforce Research, blog.einstein.ai/the-wikitext-long-term-dependency-language-modeling-dataset/" ;;
  esac
}

# Every check before any work: the domains still to build must have all their files.
missing=0
for d in $DOMAINS; do
  inputs "$d"
  [ -e "$OUT/$d" ] && continue
  if [ "$d" = web ] && ! command -v "$PYTHON" > /dev/null; then
    die "PYTHON=$PYTHON is not on PATH (it shuffles the web splits)"
  fi
  for f in "${INPUTS[@]}"; do
    if [ ! -f "$f" ] && [ -f "$f.gz" ]; then
      echo "$NAME: missing $f; $f.gz is there: gunzip -k it (this recipe cuts the text with awk)" >&2
      missing=1
    elif [ ! -f "$f" ]; then
      echo "$NAME: missing $f ($(where "$d"))" >&2
      missing=1
    fi
  done
done
[ "$missing" = 0 ] || exit 2

mkdir -p "$OUT"
LOG=$OUT/commands.log
# (groc's version is in every manifest and lexicon; asking groc for it here costs seconds.)
printf '# %s recipes/%s SRC=%s TRAIN=%s VALID=%s TEST=%s DOMAINS=%s JOBS=%s\n' "$(date -u +%FT%TZ)" "$NAME" \
  "$SRC" "$TRAIN" "$VALID" "$TEST" "$(echo $DOMAINS)" "$JOBS" >> "$LOG"

# Commands are printed to stderr and appended to the log as shell a reader can paste.
q() {
  local a sep=""
  for a in "$@"; do
    case $a in
      ''|*[!A-Za-z0-9_./:=,+@%-]*) printf "%s'%s'" "$sep" "${a//\'/\'\\\'\'}" ;;
      *) printf '%s%s' "$sep" "$a" ;;
    esac
    sep=" "
  done
}
logged() { echo "+ $1" | tee -a "$LOG" >&2; }

# HEAD_AWK: a raw file's first lines up to BUDGET whitespace tokens (plus one <eos> per line),
# then MARGIN more lines. Moses tokenization only splits words, never joins them, so these lines
# hold at least BUDGET tokens after tokenizing: the same splits as from the whole file, without
# tokenizing (and holding in memory) files many times larger than the budgets.
HEAD_AWK='{ print; n += NF + 1 } n >= budget && ++extra > margin { exit }'
head_cmd() { HEAD=(awk -v "budget=$1" -v "margin=$MARGIN_LINES" "$HEAD_AWK" "$2"); }
# CUT_AWK: tokenized lines into consecutive splits (files PREFIX+NAME), each taking whole lines
# until it holds its budget of tokens (one <eos> per line), as groc prepare --split does.
CUT_AWK='BEGIN { n = split(budgets, b, ","); split(names, name, ","); i = 1 } i <= n { f = prefix name[i]; print > f; c += NF + 1; if (c >= b[i]) { close(f); i++; c = 0 } }'
# SHUFFLE_PY: shuffle a file's lines in place with a seed.
SHUFFLE_PY='import random, sys; f = sys.argv[2]; lines = open(f, "rb").readlines(); random.Random(int(sys.argv[1])).shuffle(lines); open(f, "wb").writelines(lines)'
count() { awk '{ n += NF + 1 } END { print n + 0 }' "$1"; }

TMP=""
cleanup() { if [ -n "$TMP" ]; then rm -rf -- "$TMP"; fi; }
trap cleanup EXIT
scratch() { cleanup; TMP=$(mktemp -d "$OUT/.tmp-$1.XXXXXX"); }

# check_splits DOMAIN SPLIT...: the cut files must hold tokens; a note when one is under its budget.
check_splits() {
  local d=$1 s budget got; shift
  for s in "$@"; do
    budget=B_${s^^}
    budget=${!budget}
    got=0
    [ -f "$TMP/$d.$s" ] && got=$(count "$TMP/$d.$s")
    if [ "$got" = 0 ]; then
      echo "$NAME: $d: the input ran out before the $s split; lower the budgets" >&2
      exit 1
    fi
    if [ "$got" -lt "$budget" ]; then
      echo "$NAME: note: $d $s has $got tokens, fewer than its budget of $budget: all the input had" >&2
    fi
  done
}

news() {  # consecutive train/valid/test budgets from one file
  local d=$1 file=$2 prep
  head_cmd "$B_TOTAL" "$file"
  prep=(groc prepare --train - --tokenize --lower -j "$JOBS" --errors "$ERRORS" --split "$TRAIN,$VALID,$TEST" -o "$OUT/$d")
  logged "$(q "${HEAD[@]}") | $(q "${prep[@]}")"
  "${HEAD[@]}" | "${prep[@]}"
}

web() {  # as news, then each split's lines re-shuffled (appendix C.2)
  local d=$1 file=$2 s tok cut prep
  scratch "$d"
  head_cmd "$B_TOTAL" "$file"
  tok=(groc tokenize --lower -j "$JOBS" --errors "$ERRORS" -o "$TMP/$d.tok")
  logged "$(q "${HEAD[@]}") | $(q "${tok[@]}")"
  "${HEAD[@]}" | "${tok[@]}"
  cut=(awk -v "budgets=$B_TRAIN,$B_VALID,$B_TEST" -v names=train,valid,test -v "prefix=$TMP/$d." "$CUT_AWK" "$TMP/$d.tok")
  logged "$(q "${cut[@]}")"
  "${cut[@]}"
  check_splits "$d" train valid test
  for s in train valid test; do
    logged "$(q "$PYTHON" -c "$SHUFFLE_PY" "$SEED" "$TMP/$d.$s")"
    "$PYTHON" -c "$SHUFFLE_PY" "$SEED" "$TMP/$d.$s"
  done
  prep=(groc prepare --train "$TMP/$d.train" --valid "$TMP/$d.valid" --test "$TMP/$d.test" -o "$OUT/$d")
  logged "$(q "${prep[@]}")"
  "${prep[@]}"
  cleanup
}

wiki() {  # each split from its own file: the first TRAIN/VALID/TEST tokens of train/valid/test
  local d=$1 s budget tok cut prep
  scratch "$d"
  for s in train valid test; do
    budget=B_${s^^}
    budget=${!budget}
    head_cmd "$budget" "$WIKI_DIR/wiki.$s.raw"
    tok=(groc tokenize --lower -j "$JOBS" --errors "$ERRORS")
    cut=(awk -v "budgets=$budget" -v "names=$s" -v "prefix=$TMP/$d." "$CUT_AWK")
    logged "$(q "${HEAD[@]}") | $(q "${tok[@]}") | $(q "${cut[@]}")"
    "${HEAD[@]}" | "${tok[@]}" | "${cut[@]}"
  done
  check_splits "$d" train valid test
  prep=(groc prepare --train "$TMP/$d.train" --valid "$TMP/$d.valid" --test "$TMP/$d.test" -o "$OUT/$d")
  logged "$(q "${prep[@]}")"
  "${prep[@]}"
  cleanup
}

built=0
for d in $DOMAINS; do
  if [ -e "$OUT/$d" ]; then echo "= $OUT/$d (done)" >&2; continue; fi
  inputs "$d"
  case $d in
    news*) news "$d" "${INPUTS[0]}" ;;
    web) web "$d" "${INPUTS[0]}" ;;
    wiki) wiki "$d" ;;
  esac
  built=1
done

# One lexicon over the types of every domain built so far (also those of earlier runs).
vocabs=()
for d in $ALL_DOMAINS; do
  if [ -e "$OUT/$d" ]; then vocabs+=(--vocab "$OUT/$d"); fi
done
if [ -e "$LEXICON" ] && [ "$built" = 0 ]; then
  echo "= $LEXICON (done)" >&2
else
  lex=(groc lexicon "${vocabs[@]}" -j "$JOBS" -o "$LEXICON" --force)
  logged "$(q "${lex[@]}")"
  "${lex[@]}"
fi
