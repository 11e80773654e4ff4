"""Training throughput of every output-layer kind on real penn (paper Table 10 analogue).

    python benchmarks/train_throughput.py --steps 20 --threads 2

Prints ONE JSON object on stdout: per kind tokens/s, seconds/step, |Θ| and the ratio of
its step time to `tied` (with the same ``--cpu-matmul`` library), plus GroC at each
``--update-prob``. Progress goes to stderr.
Every kind uses the same prefix network (default: the paper's 2 x 1024 LSTM, emb 300,
batch 20, BPTT 35, Adam 1e-3, gradient-norm clip 0.1; paper B.1).

GroC needs a lexicon: ``--lexicon PATH.parquet`` (columns word, relations, definition);
without it one is built here from the system WordNet through NLTK (first synset of each
vocabulary word, up to 3 single-word synonyms then hyponyms, sorted, and the first 10
lowercased definition tokens).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from groc_cli.models import KINDS, Lexicon, ModelConfig, build_model, output_layer_class  # noqa: E402
from groc_cli.errors import SettingError  # noqa: E402
from groc_cli.models.kernels import CHOICES, choice, cpu_matmul  # noqa: E402
from groc_cli.environment import environment  # noqa: E402
from groc_cli.settings import toml_loads  # noqa: E402

# glibc hands every large freed block back to the OS, so each step page-faults its memory in
# again (3-8x slower steps here); these keep it in the process. The benchmark re-executes
# itself with them unless GROC_BENCH_MALLOC=0. `groc train` sets the same with mallopt.
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "4294967296", "MALLOC_TRIM_THRESHOLD_": "68719476736"}
PTB_TRAIN = Path(os.environ.get("GROC_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")) / "ptb" / "ptb.train.txt"

# The 45 WordNet lexicographer files (lexnames(5WN)), in NLTK's "lexnames" format.
def parse_variants(specs: list[str]) -> dict[str, tuple[str, str]]:
    """--variant NAME=KIND:CONFIG values as {NAME: (KIND, CONFIG)}, or a one-line exit."""
    out = {}
    for spec in specs:
        name, _, rest = spec.partition("=")
        kind, _, path = rest.partition(":")
        if not name or kind not in KINDS or not Path(path).is_file() or name in out:
            sys.exit(f"error: --variant {spec!r}: expected a new NAME=KIND:CONFIG with KIND one of {', '.join(KINDS)} "
                     "and CONFIG an existing file")
        out[name] = (kind, path)
    return out


def model_config(args, kind: str, config: str | None = None, **extra) -> ModelConfig:
    """KIND's settings: the [model] section of ``config`` or ``--config`` (KIND in the path standing for
    the kind) when given, then --emb/--hidden/--layers and --dropout (when given) over it."""
    settings = {}
    config = config or args.config
    if config:
        path = Path(config.replace("KIND", kind))
        if not path.is_file():
            sys.exit(f"error: --config {path} not found")
        settings = toml_loads(path.read_text(encoding="utf-8")).get("model", {})
    settings.update(output=kind, emb=args.emb, hidden=args.hidden, layers=args.layers, **extra)
    if args.dropout is not None:
        settings["dropout"] = args.dropout
    try:
        return ModelConfig(**settings)
    except SettingError as exc:  # e.g. a GroC file given to every kind: say which, in one line
        hint = f" (--config {path}: KIND in its path names a file per kind)" if config and "KIND" not in config else ""
        sys.exit(f"error: {kind}: {exc}{hint}")


def add_model_options(ap: argparse.ArgumentParser, emb: int, hidden: int) -> None:
    ap.add_argument("--config", help="a config file whose [model] section gives each kind's settings, KIND in the path "
                    "standing for the kind (e.g. recipes/configs/penn/KIND.toml); the options below override it")
    ap.add_argument("--emb", type=int, default=emb)
    ap.add_argument("--hidden", type=int, default=hidden)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dropout", type=float, help="the prefix network's dropout (default: the config's, else none)")


def checked_kinds(args) -> list[str]:
    """--kinds as a list, after checking it and --train (one-line exits)."""
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        sys.exit(f"error: unknown kind(s) {bad} in --kinds; choose from {', '.join(KINDS)}")
    if not args.train.is_file():
        sys.exit(f"error: training text {args.train} not found; pass --train")
    return kinds


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def read_corpus(path: Path) -> tuple[list[str], torch.Tensor]:
    lines = path.read_text(encoding="utf-8").splitlines()
    tokens = [tok for line in lines for tok in line.split() + ["<eos>"]]
    counts = Counter(tokens)
    vocab = sorted(counts, key=lambda w: (-counts[w], w))
    index = {w: i for i, w in enumerate(vocab)}
    return vocab, torch.tensor([index[t] for t in tokens], dtype=torch.long)


def wordnet_lexicon(vocab: list[str]) -> Lexicon:
    """The same lexicon `groc lexicon --vocab` builds (groc_cli.lexicon), from the system WordNet."""
    from groc_cli.lexicon.extract import LexiconOptions, build_entries
    from groc_cli.lexicon.wordnet import open_wordnet

    lex = Lexicon()
    for entry in build_entries(open_wordnet("auto").reader, vocab, LexiconOptions(), jobs=2):
        if entry.relations:
            lex.relations[entry.word] = entry.relations
        if entry.definition:
            lex.definitions[entry.word] = entry.definition
    return lex


class Runner:
    """One kind's model, optimizer and data position; `step` trains one BPTT window."""

    def __init__(self, kind, config, vocab, lexicon, data, args, device, compiled: bool = False, matmul: str = "auto",
                 amp: bool | None = None):
        torch.manual_seed(1)
        self.kind, self.matmul = kind, matmul
        self.model = build_model(config, vocab, lexicon=lexicon if output_layer_class(kind).needs_lexicon else None).to(device)
        self.model.train()
        if compiled:  # the prefix network and the output layer's composition, each one torch.compile'd callable
            self.model.forward = torch.compile(self.model.forward)
            self.model.output_layer.compose = torch.compile(self.model.output_layer.compose)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        length = data.numel() // args.batch
        self.columns = data[: length * args.batch].view(args.batch, length).t().contiguous()
        self.bptt, self.device, self.amp = args.bptt, device, args.amp if amp is None else amp
        self.generator = torch.Generator().manual_seed(7)
        self.position = 0
        self.state = self.model.init_state(args.batch)
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.updates = 0
        self.loss = float("nan")

    def batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The next BPTT window's inputs and targets on the device (from the start after the end)."""
        i = self.position
        if i + self.bptt + 1 > self.columns.size(0):
            i = 0
        self.position = i + self.bptt
        return self.columns[i : i + self.bptt].to(self.device), self.columns[i + 1 : i + 1 + self.bptt].to(self.device)

    def step(self, timed: bool) -> None:
        x, y = self.batch()
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        wall, cpu = time.perf_counter(), time.process_time()
        update = self.model.sample_update(self.generator)
        autocast = torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.amp)
        with autocast, cpu_matmul(self.matmul):  # the products' library is fixed in the forward
            composed = self.model.compose(grad=update)
            hidden, state = self.model(x, self.model.detach_state(self.state), composed)
            loss = composed.nll(hidden.reshape(-1, hidden.size(-1)).float(), y.reshape(-1)).mean() + self.model.regularization()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 0.1)
        self.optimizer.step()
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        self.state = state
        self.loss = float(loss.detach())
        if timed:
            self.wall.append(time.perf_counter() - wall)
            self.cpu.append(time.process_time() - cpu)
            self.updates += int(update)

    def result(self) -> dict:
        tokens = self.columns.size(1) * self.bptt
        median = statistics.median(self.wall)
        return {
            "seconds_per_step": round(median, 4),
            "mean_seconds_per_step": round(statistics.fmean(self.wall), 4),
            "cpu_seconds_per_step": round(statistics.median(self.cpu), 4),
            "tokens_per_s": round(tokens / median, 1),
            "parameters": self.model.num_parameters(),
            "final_loss": round(self.loss, 4),
            "full_updates": self.updates,
        }


def _resolved(matmul: str) -> str:
    """What ``matmul`` (auto, onednn, torch) runs here."""
    with cpu_matmul(matmul):
        return choice()


def main() -> None:
    if os.environ.get("GROC_BENCH_MALLOC", "1") == "1" and any(k not in os.environ for k in MALLOC_ENV):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **MALLOC_ENV})
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per kind (after --warmup)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated output kinds")
    add_model_options(ap, emb=300, hidden=1024)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--bptt", type=int, default=35)
    ap.add_argument("--update-prob", default="1.0,0.3", help="comma-separated GroC update probabilities")
    ap.add_argument("--lexicon", type=Path, help="lexicon Parquet for GroC (default: built from WordNet)")
    ap.add_argument("--train", type=Path, default=PTB_TRAIN, help="penn training text")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--amp", action="store_true", help="bf16 autocast (CUDA or CPU), as `groc train --amp`")
    ap.add_argument("--also-amp", action="store_true", help="also run every kind and variant under bf16 autocast, as "
                    "NAME+amp in the same round-robin, with its step time against NAME's (float32) as step_time_vs_float32")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (CPU)")
    ap.add_argument("--compile", action="store_true", help="also run each kind with torch.compile (its forward and "
                    "its output layer's composition; default inductor backend) as KIND+compile, in the same round-robin; "
                    "compilation happens in the warmup steps, which are not timed")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=KIND:CONFIG",
                    help="also time KIND with the [model] section of CONFIG (then --emb/--hidden/--layers/--dropout over "
                    "it) under NAME, in the same round-robin; repeatable, e.g. groc-paper=groc:recipes/configs/penn/groc.toml "
                    "groc-small=groc:recipes/configs/penn/groc-small-encoder.toml")
    ap.add_argument("--cpu-matmul", default="auto", help="comma-separated libraries of the output layer's matrix "
                    f"products on CPU ({', '.join(CHOICES)}; groc_cli/models/kernels.py): every kind but adaptive (whose "
                    "products are torch's) runs with each, as KIND+LIBRARY after the first, in the same round-robin")
    args = ap.parse_args()
    matmuls = args.cpu_matmul.split(",")
    if not matmuls or any(m not in CHOICES for m in matmuls):
        sys.exit(f"error: --cpu-matmul takes {', '.join(CHOICES)}, got {args.cpu_matmul!r}")

    if args.threads:
        torch.set_num_threads(args.threads)
    kinds = checked_kinds(args)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: --device cuda but CUDA is not available; use --device cpu")
    device = torch.device(args.device)
    probs = [float(p) for p in args.update_prob.split(",")]

    vocab, data = read_corpus(args.train)
    log(f"corpus: {data.numel()} tokens, vocabulary {len(vocab)}")
    lexicon = None
    if "groc" in kinds:
        t0 = time.perf_counter()
        lexicon = Lexicon.from_parquet(args.lexicon) if args.lexicon else wordnet_lexicon(vocab)
        log(f"lexicon: {len(lexicon.relations)} words with relations, "
            f"{len(lexicon.definitions)} with definitions ({time.perf_counter() - t0:.1f}s)")

    variants = parse_variants(args.variant)
    if lexicon is None and any(kind == "groc" for kind, _ in variants.values()):
        lexicon = Lexicon.from_parquet(args.lexicon) if args.lexicon else wordnet_lexicon(vocab)
    runs = [(k, None) for k in kinds if k != "groc"]
    if "groc" in kinds:
        runs += [("groc", p) for p in probs]
    runners: dict[str, Runner] = {}
    for kind, p in runs:
        name = kind if p is None or p == 1.0 else f"groc@update_prob={p}"
        config = model_config(args, kind, **({} if p is None else {"update_prob": p}))
        for i, matmul in enumerate(matmuls if kind != "adaptive" else matmuls[:1]):
            runners[name if i == 0 else f"{name}+{matmul}"] = Runner(kind, config, vocab, lexicon, data, args, device,
                                                                     matmul=matmul)
        if args.compile:
            runners[f"{name}+compile"] = Runner(kind, config, vocab, lexicon, data, args, device, compiled=True)
    for name, (kind, path) in variants.items():
        runners[name] = Runner(kind, model_config(args, kind, config=path), vocab, lexicon, data, args, device)
    if args.also_amp:
        if args.amp:
            sys.exit("error: --also-amp runs each kind in float32 and under bf16 autocast; drop --amp")
        for name in [n for n in runners if "+" not in n]:
            r = runners[name]
            runners[f"{name}+amp"] = Runner(r.kind, r.model.config, vocab, lexicon, data, args, device, amp=True)
    # Round-robin over kinds, one step each: load from other processes on a shared
    # machine then hits every kind alike; the median step time drops stragglers.
    for step in range(args.warmup + args.steps):
        for name, runner in runners.items():
            runner.step(timed=step >= args.warmup)
        log(f"step {step + 1}/{args.warmup + args.steps}: " + ", ".join(
            f"{n} {r.wall[-1]:.2f}s" for n, r in runners.items() if r.wall))
    results = {name: r.result() for name, r in runners.items()}
    if "tied" in results:
        for name, r in results.items():  # against tied with the same matrix-product library
            same = "tied+amp" if name.endswith("+amp") else f"tied+{runners[name].matmul}"
            base = results[same if same in results and not name.endswith("+compile") else "tied"]
            r["step_time_vs_tied"] = round(r["seconds_per_step"] / base["seconds_per_step"], 3)
            r["cpu_time_vs_tied"] = round(r["cpu_seconds_per_step"] / base["cpu_seconds_per_step"], 3)
    for name, r in results.items():  # bf16 autocast against float32, the same kind in the same process
        if name.endswith("+amp"):
            r["step_time_vs_float32"] = round(r["seconds_per_step"] / results[name[:-len("+amp")]]["seconds_per_step"], 3)
    for name, r in results.items():  # compiled against eager, the same kind in the same process
        if name.endswith("+compile"):
            r["step_time_vs_eager"] = round(r["seconds_per_step"] / results[name[:-len("+compile")]]["seconds_per_step"], 3)
    env = environment(args.device)  # the CPU and its vector flags as every run's record names them
    print(json.dumps({
        "benchmark": "train_throughput",
        "settings": {
            "corpus": str(args.train), "vocab": len(vocab), "emb": args.emb, "hidden": args.hidden,
            "layers": args.layers, "batch": args.batch, "bptt": args.bptt, "optimizer": "Adam(1e-3)", "amp": args.amp,
            "also_amp": args.also_amp, "cpu_flags": env["cpu_flags"], "cpu": env["cpu"],
            "clip": 0.1, "steps": args.steps, "warmup": args.warmup, "device": args.device, "compile": args.compile,
            "threads": torch.get_num_threads(), "torch": torch.__version__, "machine": platform.processor() or platform.machine(),
            "malloc_env": {k: os.environ.get(k) for k in MALLOC_ENV},
            "lexicon": str(args.lexicon) if args.lexicon else "wordnet (built in benchmark)" if lexicon else None,
            "config": args.config, "dropout": args.dropout,
            "cpu_matmul": {m: _resolved(m) for m in matmuls},
        },
        "results": results,
    }, indent=1))


if __name__ == "__main__":
    main()
