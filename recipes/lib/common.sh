# Shared by the recipes, recipes/NAME/run.sh (docs/extending.md, "Adding a recipe"): source it after
# setting NAME.
#
#   DATA=../shared/data   where the corpora are (layout of ../shared/data/README.md)
#   SCALE=small|paper|tiny  small: finishes on a 2-core CPU; paper: the paper's settings, for a GPU;
#                         tiny: paper's settings at 2 x 32 units on the first 15 lines of each split,
#                         a CPU dry run of a paper-scale recipe (its datasets and runs under GROC_WORK/tiny)
#   RESULTS=results       results/<NAME>/ gets the table (.md, .parquet), plots and commands.log
#   GROC_WORK=results/work  datasets, lexicons, runs and states, shared between recipes (the recipes call it
#                         WORK; not read from WORK, which HPC centres such as TACC and IDRIS set to the
#                         user's work file system)
#   LOG                   where commands are recorded (default results/<NAME>/commands.log)
#
# Every stage writes its output atomically (or, for training, resumably), so a re-run skips
# what is complete and an interrupted recipe continues where it stopped.
# The step helpers (step, capture, train, finetune, report) are in steps.sh.
source "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
DATA=${DATA:-../shared/data}
# groc's output layers in the paper's Table 2 order, declared once for the scripts and the tables
# (recipes/lib/output-layers.txt; a test checks it against groc's registry).
mapfile -t OUTPUT_LAYERS < <(grep -v '^#' "$ROOT/recipes/lib/output-layers.txt")
SCALE=${SCALE:-small}
RESULTS=${RESULTS:-results}
WORK=${GROC_WORK:-$RESULTS/work}
case "$SCALE" in
  small|paper) ;;
  tiny) case $WORK in */tiny) ;; *) WORK=$WORK/tiny ;; esac ;;  # its datasets are slices: never the full ones
  *) die "SCALE must be small, paper or tiny, not '$SCALE'" ;;
esac
REUTERS_MIN_COUNT=${REUTERS_MIN_COUNT:-2}  # the Reuters source domain's --min-count (see reuters() below)
counts REUTERS_MIN_COUNT
[ -d "$DATA" ] || die "DATA=$DATA is not a directory (see ../shared/data/README.md)"
OUT=$RESULTS/$NAME
# The folders and the log that this run makes here are removed again when it ends without having run a
# command (say, a recipe that refuses one of its own settings), so that a refused run leaves nothing
# behind. Only what is still empty, or holds just this run's log header, goes.
_MADE=() _MADE_LOG=
for _d in "$OUT" "$WORK"; do
  while [ ! -e "$_d" ]; do _MADE+=("$_d"); _d=$(dirname "$_d"); done
done
_unmake() {
  if [ -n "$_MADE_LOG" ] && [ "$(wc -l < "$_MADE_LOG" 2>/dev/null)" = 1 ]; then rm -f "$_MADE_LOG"; fi
  local d gone=1
  while [ "$gone" = 1 ]; do  # deepest first: a folder goes once the ones it held have gone
    gone=0
    for d in ${_MADE[@]+"${_MADE[@]}"}; do [ -d "$d" ] && rmdir "$d" 2>/dev/null && gone=1; done
  done
  return 0
}
trap _unmake EXIT
_err=$(mkdir -p "$OUT" "$WORK" 2>&1) || { _err=${_err%%$'\n'*}; die "${_err#mkdir: } (OUT=$OUT, WORK=$WORK)"; }
LOG=${LOG:-$OUT/commands.log}
[ -e "$LOG" ] || _MADE_LOG=$LOG
printf '# %s %s SCALE=%s DATA=%s WORK=%s (groc %s)\n' "$(date -u +%FT%TZ)" "recipes/$NAME.sh" "$SCALE" "$DATA" "$WORK" \
  "$(groc --version | cut -d' ' -f2)" >> "$LOG"

# The budgets' settings, checked before any work (a bad one failed each training after the data steps).
for _v in TOKENS EPOCHS; do [ -z "${!_v:-}" ] || counts "$_v"; done
[ -z "${MINUTES:-}" ] || { [[ "$MINUTES" =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk "BEGIN { exit !($MINUTES > 0) }"; } \
  || die "MINUTES must be a positive number of minutes, not '$MINUTES'"
# The model and budget per scale. small: one configuration for every output layer, bounded by
# tokens (about 10 minutes for GroC on PTB on 2 CPU cores). paper: appendix B.1 (2 x 1024 LSTM,
# dropout 0.65, Adam 1e-3, batch 20, BPTT 35, clip 0.1, early stopping) for a GPU; the recipes that
# read recipes/configs (settings() below: Tables 2 and 3) drop the input embeddings at 0.65 too.
if [ "$SCALE" = small ]; then
  MODEL=(--emb 128 --hidden 256 --dropout 0.3 --seed 1 --log-every 200)
  BUDGET=(--max-tokens "${TOKENS:-400000}")
  FT_BUDGET=(--max-epochs 3)
elif [ "$SCALE" = paper ]; then
  MODEL=(--seed 1)
  BUDGET=(--max-epochs "${EPOCHS:-100}")  # early stopping, not this cap, should end every run
  FT_BUDGET=(--max-epochs 3)
else  # tiny: each method's paper settings (settings() below) at 2 x 32 units, two epochs of ~300 tokens
  MODEL=(--seed 1 --emb 32 --hidden 32 --layers 2 --log-every 1)
  BUDGET=(--max-epochs "${EPOCHS:-2}")
  FT_BUDGET=(--max-epochs 1)
fi
# MINUTES=N bounds every training run by wall-clock time as well (--max-minutes: the run
# stops after N minutes with its best checkpoint, and the recipe goes on), e.g. to fit a
# paper-scale recipe into a GPU lease.
[ -n "${MINUTES:-}" ] && BUDGET+=(--max-minutes "$MINUTES")

# cut_slice FILE SLICE: FILE's first 15 lines as SLICE, unless SLICE is there. Recipes sharing one
# RESULTS cut the same slices at once, outside any stage lock: each writes a temporary name of its
# own (a fixed SLICE.partial was truncated and moved away under the others) and hard-links it into
# place, one link(2) that the first recipe wins. GNU mv is no single rename when SLICE appears or
# goes under it ("cannot overwrite directory"), so it is only the fallback where links are refused.
cut_slice() {
  [ -s "$2" ] && return 0
  local tmp rc=0; tmp=$(mktemp "$2.partial.XXXXXX") || return 1
  head -n 15 "$1" > "$tmp" && chmod "$(umask_mode 666)" "$tmp" &&
    { ln "$tmp" "$2" 2> /dev/null || [ -s "$2" ] || mv -f "$tmp" "$2"; } || rc=1
  rm -f "$tmp"
  return $rc
}
# prepare_splits DATASET TRAIN VALID TEST: groc prepare of the three files into DATASET; at
# SCALE=tiny of their first 15 lines (copied to $WORK/raw/), about 300 tokens each.
prepare_splits() {
  local out=$1 files=("${@:2}") i
  if [ "$SCALE" = tiny ] && [ ! -e "$out" ]; then
    mkdir -p "$WORK/raw"
    for i in 0 1 2; do
      local slice; slice=$WORK/raw/$(basename "$out").$(basename "${files[i]}")
      cut_slice "${files[i]}" "$slice"
      files[i]=$slice
    done
  fi
  step "$out" groc prepare --train "${files[0]}" --valid "${files[1]}" --test "${files[2]}" -o "$out"
}
# Datasets used by several recipes.
ptb() {
  prepare_splits "$WORK/ptb" "$DATA/ptb/ptb.train.txt" "$DATA/ptb/ptb.valid.txt" "$DATA/ptb/ptb.test.txt"
  step "$WORK/ptb.lexicon.parquet" groc lexicon --vocab "$WORK/ptb" -o "$WORK/ptb.lexicon.parquet"
}
wikitext2() {
  prepare_splits "$WORK/wt2" "$DATA/wikitext-2/wiki.train.tokens" "$DATA/wikitext-2/wiki.valid.tokens" \
    "$DATA/wikitext-2/wiki.test.tokens"
  step "$WORK/wt2.lexicon.parquet" groc lexicon --vocab "$WORK/wt2" -o "$WORK/wt2.lexicon.parquet"
}

# dataset DS: prepare ptb or wt2 (and its lexicon) and set emb to its paper-scale embedding
# size (appendix B.1: 300 for PTB, 256 for WikiText-2; the small scale keeps MODEL's).
dataset() {
  emb=()
  case $1 in
    ptb) ptb; [ "$SCALE" = paper ] && emb=(--emb 300) ;;
    wt2) wikitext2; [ "$SCALE" = paper ] && emb=(--emb 256) ;;
    *) die "unknown dataset $1 (ptb, wt2)" ;;
  esac
  return 0
}

# settings DS METHOD: the training settings of METHOD (an output layer or a GroC ablation: a file
# of recipes/configs/<paper's dataset name>/) on dataset DS, in the array `settings`. At
# SCALE=paper they are the method's config file (appendix B.1 + Table 8's per-method values; the
# flags after it, which take precedence, repeat B.1's values); at SCALE=tiny the same file with
# MODEL's sizes (and adaptive cutoffs inside a tiny vocabulary); at SCALE=small, MODEL with the
# output layer and the ablation's flags (one small configuration for every method).
settings() {
  local ds=$1 method=$2 paper
  case $ds in ptb) paper=penn ;; wt2) paper=wikitext2 ;; esac
  if [ "$SCALE" != small ]; then
    settings=(--config "$ROOT/recipes/configs/$paper/$method.toml" "${MODEL[@]}" "${emb[@]}")
    if [ "$SCALE" = tiny ] && [ "$method" = adaptive ]; then settings+=(--cutoffs 40,100); fi
  else
    # shellcheck disable=SC2207  # one flag and its value, or nothing
    settings=(--output-layer "${method%%-*}" "${MODEL[@]}" $(char_init_of "$method"))
    case $method in
      deep-residual) settings=(--output-layer deep-residual "${MODEL[@]}") ;;
      groc-norelations) settings+=(--no-relations) ;;
      groc-nodefinitions) settings+=(--no-definitions) ;;
      groc-surface) settings+=(--no-relations --no-definitions) ;;
    esac
  fi
  return 0
}

# select_kinds ALL...: KINDS (default: all of ALL, the recipe's models) checked against ALL
# before any work, with one line and exit status 2 for a name not in it. KINDS picks models so
# that each can run in its own process (say, several sharing a GPU).
select_kinds() {
  ALL_KINDS="$*"
  # A blank KINDS (' ') named no model: it trained nothing and said done.
  if [ -n "${KINDS:-}" ] && [ -z "${KINDS//[[:space:]]/}" ]; then die "KINDS is blank; name models of $ALL_KINDS, or leave KINDS unset for all"; fi
  KINDS=${KINDS:-$ALL_KINDS}
  local kind
  for kind in $KINDS; do
    case " $ALL_KINDS " in *" $kind "*) ;; *) die "KINDS takes $ALL_KINDS, not '$kind'" ;; esac
  done
}
# stop_if_some_kinds: after the stages of a KINDS subset, say how to get the table and stop.
stop_if_some_kinds() {
  if [ "$KINDS" != "$ALL_KINDS" ]; then
    echo "$NAME: KINDS=$KINDS done; run without KINDS (finished stages are skipped) to write the table" >&2
    exit 0
  fi
}

# The cross-domain miniature of ../shared/data/README.md (paper Table 5 in small):
#   source: Reuters newswire (1987), last part of the training file as validation;
#   near:   WMT news test sets 2013 and 2014 (test only); news-ft: 2009-2012 for finetuning
#           (first 50K tokens train, next 20K valid);
#   far:    web (webtext/), wiki (wikitext-2-raw test), books (Chesterton's three novels), each
#           split into finetuning train / valid / test.
# All raw text: Moses tokenization, lowercased, as in the paper (appendix C.2).
# 50K finetuning tokens keep GroC's three finetuning epochs per domain within about 10 minutes
# on one CPU core at SCALE=small (its 40K-word Reuters vocabulary composes 55K strings a step).
FT_SPLIT=${FT_SPLIT:-50K,20K,rest}  # finetuning train, valid, and (far domains) test
NEAR_TESTS=(news13:newstest2013.en news14:newstest2014-deen.en)
FAR_DOMAINS=(web wiki books)
far_files() {
  case $1 in
    web) echo "$DATA"/webtext/*.txt ;;
    wiki) echo "$DATA/wikitext-2-raw/wiki.test.raw" ;;
    books) echo "$DATA"/gutenberg/chesterton-*.txt ;;
  esac
}
# The source domain: Reuters 1987 newswire, the last ~10% of the training file as validation.
# REUTERS_MIN_COUNT (default 2): training words seen fewer times map to <unk>, so a lookup or
# tied model trains its <unk> input row. With 1 every training word is in the vocabulary, the
# <unk> row is never trained, and such a model derails on text with many unknown words (groc
# eval warns; docs/reproduction.md, Table 5). The dataset is $REUTERS: $WORK/reuters for 1, or
# $WORK/reuters-min<N>. Everything derived from it carries the same suffix ($REUTERS_SUFFIX):
# the source runs and states ($WORK/{runs,states}/$SCALE/reuters-min<N>-<kind>...), table5's
# evaluations, and the lexicon over every cross-domain vocabulary ($CROSSDOMAIN_LEX; GroC refuses
# a lexicon that lacks any of its training words). So runs on different Reuters vocabularies
# never stand in for each other, and all of them can share one WORK.
REUTERS_SUFFIX=""; [ "$REUTERS_MIN_COUNT" = 1 ] || REUTERS_SUFFIX=-min$REUTERS_MIN_COUNT
REUTERS=$WORK/reuters$REUTERS_SUFFIX
CROSSDOMAIN_LEX=$WORK/crossdomain$REUTERS_SUFFIX.lexicon.parquet
reuters() {
  step "$REUTERS" groc prepare --train "$DATA/reuters/reuters.training.txt" --split 1100K,rest \
    --min-count "$REUTERS_MIN_COUNT" --tokenize --lower -j 2 -o "$REUTERS"
}
crossdomain() {
  local tok=(--tokenize --lower -j 2)
  reuters
  for pair in "${NEAR_TESTS[@]}"; do
    step "$WORK/${pair%%:*}" groc prepare --test "$DATA/wmt-newstest/${pair#*:}" "${tok[@]}" -o "$WORK/${pair%%:*}"
  done
  if _begin "$WORK/news-ft"; then
    _logged "cat newstest2009-2012 | groc prepare --train - --split $FT_SPLIT ${tok[*]} -o $WORK/news-ft"
    cat "$DATA"/wmt-newstest/newstest20{09,10,11,12}.en | groc prepare --train - --split "$FT_SPLIT" "${tok[@]}" -o "$WORK/news-ft"
    _end
  fi
  for d in "${FAR_DOMAINS[@]}"; do
    if _begin "$WORK/$d"; then
      # webtext and the Gutenberg files have a few bytes that are not UTF-8: replaced by
      # U+FFFD rather than stopping.
      local errors=(--errors replace)
      # shellcheck disable=SC2046
      _logged "cat $(far_files "$d") | groc prepare --train - --split $FT_SPLIT ${tok[*]} ${errors[*]} -o $WORK/$d"
      # shellcheck disable=SC2046
      cat $(far_files "$d") | groc prepare --train - --split "$FT_SPLIT" "${tok[@]}" ${errors[@]+"${errors[@]}"} -o "$WORK/$d"
      _end
    fi
  done
  # One lexicon over every domain's words: GroC composes the new words of each test set from
  # their WordNet entries too (open vocabulary).
  local vocabs=()
  for d in "$REUTERS" "$WORK"/{news13,news14,news-ft} "${FAR_DOMAINS[@]/#/$WORK/}"; do vocabs+=(--vocab "$d"); done
  step "$CROSSDOMAIN_LEX" groc lexicon "${vocabs[@]}" -o "$CROSSDOMAIN_LEX"
}
# Cache settings of the paper (appendix C.4): λ = 0.966 (our --cache-weight 0.034) for the
# unigram and local caches, θ = 0.5, window 10,000; new-word down-weighting 0.1 before a cache.
CACHE_UNIGRAM=(--cache unigram --cache-weight 0.034)
CACHE_LOCAL=(--cache local --cache-weight 0.034 --theta 0.5 --cache-size 10000)
if [ "$SCALE" = small ]; then
  CACHE_UNBOUNDED=(--cache unbounded --cache-weight 0.1 --index IVF256,PQ32 --nprobe 8 --knn 1024)
else
  # PQ30: the paper-scale states are 300-d (--emb 300), and PQ's M must divide the dimension.
  CACHE_UNBOUNDED=(--cache unbounded --cache-weight 0.1 --index "${UNBOUNDED_INDEX:-IVF4096,PQ30}" --nprobe 8 --knn 1024)
fi
# UNBOUNDED_INDEX overrides SCALE=paper's FAISS index: IVF4096's k-means on 200K states takes
# a minute or more per test set on a CPU FAISS build.
