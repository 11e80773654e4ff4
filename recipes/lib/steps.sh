# Step helpers shared by the paper recipes (through common.sh) and quickstart.sh. Source it after
# setting NAME (the recipe, as messages name it); it stops the script at the first error, moves to
# the repository root (ROOT) and puts its .venv/bin first on PATH. Before the first step, set
# WORK (stage locks live in $WORK/.locks) and, to keep a record of the commands beside stderr,
# LOG (a file; without it, commands go to stderr only).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
[ -d .venv/bin ] && export PATH="$ROOT/.venv/bin:$PATH"
source "$ROOT/recipes/lib/die.sh"

# counts [--or-zero] VAR...: each named setting must be a whole number of at least 1 (with --or-zero, at
# least 0); otherwise one line naming it and exit 2, before any work. (JOBS=0 used to start rows one at
# a time and then report a failure that never happened; EPOCHS=0 to fail every row after the data step.)
counts() {
  local least=1 v pattern='^[1-9][0-9]*$'
  [ "${1-}" = --or-zero ] && { least=0; pattern='^(0|[1-9][0-9]*)$'; shift; }
  for v in "$@"; do
    [[ "${!v-}" =~ $pattern ]] || die "$v must be a whole number of at least $least, not '${!v-}'"
  done
}

# _logged CMD...: print (and log) a command, each argument quoted for the shell; one argument is
# a pipeline, printed as written.
_logged() {
  if [ $# = 1 ]; then printf '+ %s\n' "$1"; else printf '+'; printf ' %q' "$@"; printf '\n'; fi \
    | tee -a "${LOG:-/dev/null}" >&2
}

# _begin OUTPUT [WORD]: status 1 (and a "= OUTPUT (done)" line) if OUTPUT exists; otherwise
# status 0, holding OUTPUT's lock until _end. Two recipes that reach the same stage at once
# (table2.sh and table3.sh share runs) never run it twice: the second waits for the first,
# then finds the output there. Locks live in $WORK/.locks and are released when a stage ends
# or its process dies; a lock file left there is inert. On a file system without locks (Lustre
# mounted noflock, NFS without lockd: flock fails, status 1 only means held) stages run unlocked,
# after one warning.
_begin() {
  local out=$1 word=${2:-done} held=0
  if [ -e "$out" ]; then echo "= $out ($word)" >&2; return 1; fi
  mkdir -p "$WORK/.locks"
  exec 9> "$WORK/.locks/$(realpath -m "$out" | md5sum | cut -c1-16).lock"
  if [ -z "${_NO_LOCKS:-}" ]; then flock -n 9 2>/dev/null || held=$?; fi
  if [ "$held" = 1 ]; then
    echo "$NAME: waiting for another process that is making $out" >&2
    flock 9
  elif [ "$held" != 0 ]; then
    _NO_LOCKS=1
    echo "$NAME: warning: the file system of $WORK has no file locks (flock: status $held); two recipes that" \
      "reach one stage at once will both run it" >&2
  fi
  if [ -e "$out" ]; then exec 9>&-; echo "= $out ($word)" >&2; return 1; fi
  mkdir -p "$(dirname "$out")"
}
_end() { exec 9>&-; }

# step OUTPUT CMD...: run CMD unless OUTPUT exists (an existing groc output is complete).
step() {
  local out=$1; shift
  _begin "$out" || return 0
  _logged "$@"
  "$@"
  _end
}

# umask_mode MODE: MODE (octal) less the umask's bits, as a file made by `>` or `mkdir` gets: mktemp's
# files are 0600 and its folders 0700 whatever the umask, so an output moved into place from one
# was unreadable to the group of a shared project folder.
umask_mode() { printf '%o' $(( 0$1 & ~0$(umask) )); }

# capture OUTPUT CMD...: CMD's stdout (one JSON object) into OUTPUT, atomically; skipped if
# OUTPUT exists.
capture() {
  local out=$1; shift
  _begin "$out" || return 0
  _logged "$@"
  echo "  > $out" >> "${LOG:-/dev/null}"
  local tmp; tmp=$(mktemp "$out.partial.XXXXXX") && chmod "$(umask_mode 666)" "$tmp"
  if "$@" > "$tmp"; then mv "$tmp" "$out"; else local rc=$?; rm -f "$tmp"; return $rc; fi
  _end
}

# test_sample DATASET FILE LINES: the first LINES lines of the raw text FILE, tokenized and
# lowercased, as a test-only dataset; skipped if DATASET exists.
test_sample() {
  local out=$1 file=$2 lines=$3
  _begin "$out" || return 0
  _logged "head -n $lines $file | groc tokenize --lower | groc prepare --test - -o $out"
  head -n "$lines" "$file" | groc tokenize --lower | groc prepare --test - -o "$out"
  _end
}

# _resumable VERB RUN ARGS...: groc VERB ARGS -o RUN, resumed from RUN's last checkpoint if
# an earlier attempt was interrupted; skipped once RUN has its summary.json.
_resumable() {
  local verb=$1 run=$2; shift 2
  _begin "$run/summary.json" "${verb%e}ed" || return 0
  # A new run trains in place, so that an interruption leaves its last checkpoint for --resume
  # (--force would train aside and discard it); --force only replaces a run left without one.
  local mode=() args=() a skip=0
  if [ -d "$run/last" ]; then
    mode=(--resume)
    # The run's config.json holds what a --config file and KEY=VALUE overrides gave it, and --resume
    # refuses both (the flags it checks against the run's own settings).
    for a in "$@"; do
      if [ "$skip" = 1 ]; then skip=0; elif [ "$a" = --config ]; then skip=1
      elif [[ $a =~ ^[a-z][a-z0-9_]*= ]]; then :; else args+=("$a"); fi
    done
    set -- ${args[@]+"${args[@]}"}
  elif [ -n "$(ls -A "$run" 2>/dev/null)" ]; then mode=(--force); fi
  _logged groc "$verb" "$@" -o "$run" ${mode[@]+"${mode[@]}"}
  groc "$verb" "$@" -o "$run" ${mode[@]+"${mode[@]}"}
  _end
}
# train RUN DATASET ARGS...: groc train DATASET ARGS into RUN (resumed if interrupted).
train() { local run=$1; shift; _resumable train "$run" "$@"; }

# finetune RUN DATASET NEW_RUN ARGS...: groc finetune RUN DATASET ARGS into NEW_RUN.
finetune() { local run=$1 dataset=$2 new=$3; shift 3; _resumable finetune "$new" "$run" "$dataset" "$@"; }

# keep_record RECORD RUN [NAME=FILE]...: the record of a finished RUN, the folder RECORD: the run's summary.json,
# config.json and metrics.parquet, and each FILE (its evaluations) as NAME; made in a folder aside and moved into
# place whole, so that RECORD is complete wherever it exists (a "= RECORD (kept)" line and nothing else if it
# does). Records are what the reports are built from (docs/records/README.md): keep them where they outlive WORK.
keep_record() {
  local record=$1 run=$2 pair tmp ok=1; shift 2
  _begin "$record" kept || return 0
  tmp=$(mktemp -d "$record.partial.XXXXXX") && chmod "$(umask_mode 777)" "$tmp" || { _end; return 1; }
  cp "$run/"{summary.json,config.json,metrics.parquet} "$tmp/" || ok=0
  for pair in "$@"; do cp "${pair#*=}" "$tmp/${pair%%=*}" || ok=0; done
  if [ "$ok" = 0 ]; then
    rm -rf "$tmp"; _end
    echo "$NAME: the record $record could not be made (above)" >&2
    return 1
  fi
  mv -T "$tmp" "$record"
  echo "  kept $record" >> "${LOG:-/dev/null}"
  _end
}

# report NAME --OPTION=VALUE...: the result table NAME from finished outputs (a @report function of a
# recipe folder's table.py, recipes/*/table.py, found by recipes/lib/tables.py).
report() { python "$ROOT/recipes/lib/tables.py" "$@"; }

# char_init_of KIND: "--char-init uniform" for a layer with a char-CNN (groc and its ablations, convolutional):
# the initialisation every SCALE=small and quickstart model has trained with, named since groc's default became
# the authors' (the configs of SCALE=paper and tiny name theirs), so that the recipes keep their numbers.
char_init_of() { case $1 in groc*|convolutional) echo "--char-init uniform" ;; esac; }
