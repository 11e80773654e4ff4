#!/usr/bin/env bash
# Check (issue: evaluation): every output layer, trained on Reuters, gives finite open-vocabulary
# perplexities (--vocab union) on a near domain (WMT news 2014) and on far domains (WikiText-2
# raw test, Chesterton's novels), with no cache and with each cache. Fails if any is not finite.
#   bash recipes/check-open-vocab.sh     tiny models (64/128 units, 60K Reuters tokens), ~20K-token
#                                        test samples piped through tokenize -> prepare; ~25 min on 2 cores
NAME=check-open-vocab
source "$(dirname "$0")/lib/common.sh"
reuters
SAMPLES=(news14:"$DATA/wmt-newstest/newstest2014-deen.en" wiki:"$DATA/wikitext-2-raw/wiki.test.raw"
         books:"$DATA/gutenberg/chesterton-ball.txt")
C=$WORK/check$REUTERS_SUFFIX  # its runs are on $REUTERS: one folder per Reuters vocabulary
mkdir -p "$C"
for pair in "${SAMPLES[@]}"; do
  d=${pair%%:*}; file=${pair#*:}
  if _begin "$C/$d"; then
    _logged "head -n ${LINES:-900} $file | groc tokenize --lower | groc prepare --test - -o $C/$d"
    head -n "${LINES:-900}" "$file" | groc tokenize --lower | groc prepare --test - -o "$C/$d"
    _end
  fi
done
step "$C/lexicon.parquet" groc lexicon --vocab "$REUTERS" --vocab "$C/news14" --vocab "$C/wiki" --vocab "$C/books" \
  -o "$C/lexicon.parquet"
TINY=(--emb 64 --hidden 128 --dropout 0.2 --max-tokens "${CHECK_TOKENS:-60000}" --seed 1 --log-every 50)
for kind in lookup convolutional tied bilinear deep-residual adaptive groc; do
  extra=(); [ "$kind" = groc ] && extra=(--lexicon "$C/lexicon.parquet")
  train "$C/runs/$kind" "$REUTERS" --output "$kind" "${TINY[@]}" "${extra[@]}"
  dw=(); [ "$kind" = groc ] && dw=(--downweight-new 0.1)
  for pair in "${SAMPLES[@]}"; do
    d=${pair%%:*}
    step "$C/states/$kind-$d" groc dump "$C/runs/$kind" "$C/$d" --split test --vocab union -o "$C/states/$kind-$d" "${extra[@]}"
    capture "$C/evals/$kind-$d-none.json" groc eval "$C/runs/$kind" "$C/$d" --states "$C/states/$kind-$d"
    capture "$C/evals/$kind-$d-unigram.json" groc eval "$C/runs/$kind" "$C/$d" --states "$C/states/$kind-$d" "${dw[@]}" \
      --cache unigram --cache-weight 0.05
    capture "$C/evals/$kind-$d-local.json" groc eval "$C/runs/$kind" "$C/$d" --states "$C/states/$kind-$d" "${dw[@]}" \
      --cache local --cache-weight 0.05 --theta 0.5
    capture "$C/evals/$kind-$d-unbounded.json" groc eval "$C/runs/$kind" "$C/$d" --states "$C/states/$kind-$d" "${dw[@]}" \
      --cache unbounded --cache-weight 0.1 --index IVF64,PQ16 --knn 256
  done
done
python - "$OUT" "$C" "${SAMPLES[*]}" <<'PY'
import math, sys
from pathlib import Path
sys.path.insert(0, "recipes/lib")
from report import Table, load

out, c = Path(sys.argv[1]), Path(sys.argv[2])
domains = [s.split(":")[0] for s in sys.argv[3].split()]
caches = ("none", "unigram", "local", "unbounded")
t = Table("check-open-vocab", "Open-vocabulary perplexity of every output layer trained on Reuters (tiny models)",
          ["output", "domain", "tokens", "oov_pct", "new_words", *caches, "all_finite"], {"oov_pct": ".1f"})
bad = []
for kind in ("lookup", "convolutional", "tied", "bilinear", "deep-residual", "adaptive", "groc"):
    for d in domains:
        e = {x: load(c / "evals" / f"{kind}-{d}-{x}.json") for x in caches}
        finite = all(math.isfinite(v["perplexity"]) for v in e.values())
        bad += [] if finite else [f"{kind}/{d}"]
        t.add(output=kind, domain=d, tokens=e["none"]["tokens"], oov_pct=100 * e["none"]["oov_rate"],
              new_words=e["none"]["new_words"], **{x: e[x]["perplexity"] for x in caches}, all_finite=finite)
t.write(out, notes=["--vocab union; table models interpolated with 1% uniform; GroC's new words down-weighted by 0.1 "
                    "before a cache. Caches: unigram/local weight 0.05 (θ 0.5, window 10,000), unbounded weight 0.1, "
                    "IVF64,PQ16, k 256. Tiny models: 64/128 units, 60K Reuters training tokens."])
if bad:
    print(f"check-open-vocab: non-finite perplexity for {', '.join(bad)}", file=sys.stderr)
    raise SystemExit(1)
PY
