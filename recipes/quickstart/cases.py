"""The test cases of this recipe's report (recipes/lib/made_up.py says how they are used): each
builds, in the current directory, the outputs the report reads, then runs the report's command line.
CASES: name -> (builder, its keyword arguments, the report's command line); paths are relative."""

from pathlib import Path

from made_up import ppl, write_json
from report import recipe


QUICKSTART_ENVIRONMENT = {"groc": "0.1.0", "python": "3.11.2", "torch": "2.13.0+cpu", "faiss": "1.15.1", "numpy": "2.4.6",
                          "pyarrow": "21.0.0", "platform": "Linux-6.1-x86_64", "cpu": "AMD EPYC 7B13",
                          "cpu_flags": ["sse4_2", "avx", "avx2", "fma"], "torch_cpu_capability": "AVX2", "cpu_count": 2,
                          "threads": 2, "device": "cpu", "gpu": None, "wordnet": "3.0"}


def build_quickstart(rng):
    for kind in ("tied", "groc"):
        write_json(Path(f"out/{kind}/summary.json"), {"tokens": 170_123, "parameters": rng.randrange(300_000, 500_000)})
        for d in recipe("quickstart").QUICKSTART_SETS:
            cache_base = ppl(rng)  # the model the caches are given: GroC's new words down-weighted
            for n in ("base", "local", "unbounded"):
                write_json(Path(f"out/evals/{kind}-{d}-{n}.json"), {"tokens": rng.randrange(20_000, 40_000), "oov_rate": rng.random() / 5,
                                                                    "new_words": rng.randrange(100, 3_000), "perplexity": ppl(rng),
                                                                    "model_perplexity": cache_base,
                                                                    "environment": QUICKSTART_ENVIRONMENT})


CASES = {
    "quickstart": (build_quickstart, {}, ["quickstart", "--out=out", "--seconds=238"]),
}
