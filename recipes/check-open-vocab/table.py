"""Every output layer's open-vocabulary perplexity with each cache (recipes/check-open-vocab/run.sh)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

from report import OUTPUT_LAYERS, Table, load, report


CHECK_OUTPUTS = OUTPUT_LAYERS  # the layers run.sh trains: every one of recipes/lib/output-layers.txt
CHECK_CACHES = ("none", "unigram", "local", "unbounded")


@report
def check_open_vocab(out: Path, check_dir: Path, domains: list[str]) -> None:
    """Every output layer's open-vocabulary perplexity with each cache (check-open-vocab.sh, evaluations
    in CHECK_DIR/evals); exit status 1 if any is not finite."""
    t = Table("check-open-vocab", "Open-vocabulary perplexity of every output layer trained on Reuters (tiny models)",
              ["output", "domain", "tokens", "oov_pct", "new_words", *CHECK_CACHES, "all_finite"], {"oov_pct": ".1f"})
    bad = []
    for kind in CHECK_OUTPUTS:
        for d in domains:
            e = {x: load(check_dir / "evals" / f"{kind}-{d}-{x}.json") for x in CHECK_CACHES}
            finite = all(math.isfinite(v["perplexity"]) for v in e.values())
            bad += [] if finite else [f"{kind}/{d}"]
            t.add(output=kind, domain=d, tokens=e["none"]["tokens"], oov_pct=100 * e["none"]["oov_rate"],
                  new_words=e["none"]["new_words"], **{x: e[x]["perplexity"] for x in CHECK_CACHES}, all_finite=finite)
    t.write(out, notes=["--vocab union; table models interpolated with 1% uniform; GroC's new words down-weighted by 0.1 "
                        "before a cache. Caches: unigram/local weight 0.05 (θ 0.5, window 10,000), unbounded weight 0.1, "
                        "IVF64,PQ16, k 256. Tiny models: 64/128 units, 60K Reuters training tokens."])
    if bad:
        print(f"check-open-vocab: non-finite perplexity for {', '.join(bad)}", file=sys.stderr)
        raise SystemExit(1)
