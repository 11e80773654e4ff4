#!/usr/bin/env bash
# CPU-scale comparison of the seven output layers on PTB with one small configuration and the
# same token budget (paper Table 2 in small): recipes/table2.sh at SCALE=small on PTB, then
# one JSON line per output layer (validation and test perplexity, |Θ|, tokens, tokens/s).
#   bash benchmarks/kinds_small.sh        (DATA=../shared/data RESULTS=results TOKENS=400000)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d .venv/bin ] && export PATH="$PWD/.venv/bin:$PATH"
DATASETS=ptb SCALE=small bash recipes/table2.sh >&2
WORK=${WORK:-${RESULTS:-results}/work}
for kind in lookup tied bilinear deep-residual adaptive convolutional groc; do
  python - "$WORK" "$kind" <<'PY'
import json, sys
from pathlib import Path
work, kind = Path(sys.argv[1]), sys.argv[2]
s = json.loads((work / "runs" / "small" / f"ptb-{kind}" / "summary.json").read_text())
e = json.loads((work / "evals" / "small" / f"ptb-{kind}.test.json").read_text())
print(json.dumps({"kind": kind, "valid_ppl": round(s["best_valid_ppl"], 2), "test_ppl": round(e["perplexity"], 2),
                  "parameters": s["parameters"], "tokens": s["tokens"], "tokens_per_s": round(s["final"]["tokens_per_s"])}))
PY
done
