"""The quickstart's table, printed only (recipes/quickstart/run.sh)."""

from __future__ import annotations

import json
from pathlib import Path


from groc_cli.environment import describe as describe_environment

from report import report


QUICKSTART_SETS = {"emma": "in-domain (Emma, valid)", "near": "near (Persuasion)", "far": "far (Thursday)"}


@report
def quickstart(out: Path, seconds: int) -> None:
    """The quickstart's table, printed only (quickstart.sh; SECONDS: its running time)."""
    runs = [json.loads((out / k / "summary.json").read_text()) for k in ("tied", "groc")]
    print(f"\nOpen-vocabulary perplexity on the embedded sample (trained on {runs[0]['tokens']:,} tokens of Emma, "
          f"one epoch; |Θ| tied {runs[0]['parameters']:,}, GroC {runs[1]['parameters']:,})\n")
    print(f"{'test set':<26} {'tokens':>7} {'OOV':>6} {'new words':>9} | {'model':<5} {'no cache':>9} | "
          f"{'cache on':>8} {'+local':>8} {'+unbounded':>10}")
    print("-" * 101)
    evals = {(kind, d): {n: json.loads((out / "evals" / f"{kind}-{d}-{n}.json").read_text())
                         for n in ("base", "local", "unbounded")}
             for d in QUICKSTART_SETS for kind in ("tied", "groc")}
    for d, label in QUICKSTART_SETS.items():
        for kind in ("tied", "groc"):
            e = evals[kind, d]
            b = e["base"]
            print(f"{label if kind == 'tied' else '':<26} {b['tokens'] if kind == 'tied' else '':>7} "
                  f"{format(b['oov_rate'], '.1%') if kind == 'tied' else '':>6} {b['new_words'] if kind == 'tied' else '':>9} | "
                  f"{kind:<5} {b['perplexity']:>9.1f} | {_cache_base(e):>8.1f} {e['local']['perplexity']:>8.1f} "
                  f"{e['unbounded']['perplexity']:>10.1f}")
    print("\nOpen vocabulary: every test word is scored. GroC composes unseen words from characters and WordNet;")
    print("tied gives them a 1% uniform share. Caches: weight 0.1 (local: θ 0.5, window 2,000; unbounded: exact kNN, k 256)")
    print("on the model of 'cache on': tied's as it is; GroC's with its new words down-weighted by 0.1 (paper 5.1).")
    print(verdict(evals))
    print(f"Outputs in {out}/; {seconds} s.")
    # The last digits depend on the CPU's vector extensions and the thread count (issue 31): say where it ran.
    recorded = {json.dumps(json.loads((out / "evals" / f"{kind}-{d}-{n}.json").read_text()).get("environment"),
                           sort_keys=True)
                for kind in ("tied", "groc") for d in QUICKSTART_SETS for n in ("base", "local", "unbounded")}
    # Tied's evaluations read no lexicon, so only GroC's record WordNet: one line per machine, not per model.
    found = [json.loads(r) for r in sorted(recorded)]
    wordnet = next((m["wordnet"] for m in found if m and m.get("wordnet")), None)
    machines = []
    for m in found:
        m = m and {**{k: v for k, v in m.items() if k != "wordnet"}, **({"wordnet": wordnet} if wordnet else {})}
        if m not in machines:
            machines.append(m)
    if machines == [None]:
        print("Machine: not recorded (evaluations written before groc recorded its environment).")
    for env in machines:
        print(f"Machine: {describe_environment(env) if env else 'not recorded in some evaluations'}")


def _cache_base(e: dict) -> float:
    """The perplexity both cache columns improve on: the model as the caches were given it (GroC's new
    words down-weighted), which each cache evaluation records as its model_perplexity."""
    return e["local"]["model_perplexity"]


def _pct(new: float, old: float) -> str:
    return f"{100 * (new / old - 1):+.1f}%"


def verdict(evals: dict) -> str:
    """One line of what the table shows: GroC against tied without a cache, and what each cache does
    to the perplexity it starts from."""
    names = {"emma": "Emma", "near": "near", "far": "far"}
    ahead = [f"{names[d]} {_pct(evals['groc', d]['base']['perplexity'], evals['tied', d]['base']['perplexity'])}"
             for d in QUICKSTART_SETS]
    changes = {c: [evals[k, d][c]["perplexity"] / _cache_base(evals[k, d]) - 1 for k, d in evals]
               for c in ("local", "unbounded")}
    caches = ", ".join(f"{c} {100 * max(v):+.1f}% to {100 * min(v):+.1f}%" for c, v in changes.items())
    lower = sum(x < 0 for v in changes.values() for x in v)
    return (f"Verdict (perplexity change, - is better): GroC against tied, no cache: {', '.join(ahead)}; each cache "
            f"against 'cache on': {caches} ({lower} of {sum(map(len, changes.values()))} lower).")

