"""The training step eagerly against the step as one CUDA graph (groc_cli/training/graphed.py), per model, in one
process, with groc's own Trainer on real PTB:

    python benchmarks/graph_step.py --device cuda --lexicon results/work/ptb.lexicon.parquet

Prints ONE JSON object on stdout (progress on stderr): per model and mode (eager; graph on CUDA, the restructured
step without capture on CPU) the median milliseconds a step, a validation pass (PTB valid, batch 10, chunks of
256: through its own graphs in graph mode) in seconds, and seconds an epoch (steps an epoch x the step, plus the
validation); the graph's speedup; and the largest relative difference of the per-step losses between the modes
over the same steps from the same seed (the graph changes how a step is launched, not what it computes: on
CUDA the two differ by kernel rounding only). ``--profile`` adds the costliest CUDA kernels of one replayed step.

Models (``--variant NAME=KIND:CONFIG``, repeatable; default the paper-scale tied row, GroC with groc's 256-filter
encoder and GroC with the paper-size encoder): each built from the config's [model] section, then
--emb/--hidden over it when given. Record the device, torch and CUDA versions the JSON names with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from groc_cli.models import Lexicon, ModelConfig, build_model, output_layer_class  # noqa: E402
from groc_cli.settings import toml_loads  # noqa: E402
from groc_cli.training.data import batchify  # noqa: E402
from groc_cli.training.loop import Trainer, TrainConfig, evaluate_loss  # noqa: E402

from train_throughput import MALLOC_ENV, PTB_TRAIN, read_corpus, wordnet_lexicon  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_VARIANTS = [f"tied=tied:{ROOT}/recipes/configs/penn/tied.toml",
                    f"groc-small-encoder=groc:{ROOT}/recipes/configs/penn/groc-small-encoder.toml",
                    f"groc-paper-encoder=groc:{ROOT}/recipes/configs/penn/groc.toml"]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def variants(specs: list[str]) -> dict[str, tuple[str, dict]]:
    out = {}
    for spec in specs:
        name, _, rest = spec.partition("=")
        kind, _, path = rest.partition(":")
        if not name or not kind or not Path(path).is_file():
            sys.exit(f"error: --variant {spec!r}: expected NAME=KIND:CONFIG with an existing CONFIG")
        settings = toml_loads(Path(path).read_text(encoding="utf-8")).get("model", {})
        out[name] = (kind, {**settings, "output": kind})
    return out


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(name, settings, mode, vocab, lexicon, train_ids, valid_ids, args, device, steps_per_epoch: int) -> dict:
    torch.manual_seed(1)
    config = ModelConfig(**{**settings, **({"emb": args.emb} if args.emb else {}),
                            **({"hidden": args.hidden} if args.hidden else {})})
    lex = lexicon if output_layer_class(config.output).needs_lexicon else None
    model = build_model(config, vocab, lexicon=lex).to(device)
    cfg = TrainConfig(batch_size=20, bptt=35, graph=mode == "graph")
    train_cols, valid_cols = batchify(train_ids, 20), batchify(valid_ids, 10)
    trainer = Trainer(model, train_cols, valid_cols, cfg, Path(os.devnull), device,
                      static=False if mode == "eager" else None if device.type == "cuda" else True)
    model.train()
    trainer.state = model.init_state(20)
    if trainer.static is not None:
        trainer.static.set_state(None)
    losses, times = [], []
    for step in range(args.warmup + args.steps):
        i = step * 35
        sync(device)
        start = time.perf_counter()
        if trainer.static is not None:
            trainer._static_window(i, 35)
        else:
            trainer._eager_window(i, 35)
        sync(device)
        times.append(time.perf_counter() - start)
        trainer._unread.append((step + 1, 1, 0, 700, 0.0, 0.0))
        if trainer.static is None or trainer.static.pending >= 50:
            trainer._read_steps()
    trainer._read_steps()
    losses = [row[3] for row in trainer.steps]
    profile = None
    if args.profile and mode == "graph" and device.type == "cuda":
        from torch.profiler import ProfilerActivity, profile as torch_profile

        with torch_profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            trainer._static_window(0, 35)
            sync(device)
        trainer.static.read()
        events = sorted(prof.key_averages(), key=lambda e: -getattr(e, "self_device_time_total", 0))
        profile = [{"kernel": e.key[:80], "us": round(getattr(e, "self_device_time_total", 0), 1), "calls": e.count}
                   for e in events[: args.profile]]
    sync(device)
    start = time.perf_counter()
    graphed = trainer.graphed_eval
    evaluate_loss(model, valid_cols, graphed=graphed)  # the first pass captures the graphs: not timed
    sync(device)
    first_valid = time.perf_counter() - start
    start = time.perf_counter()
    total, count = evaluate_loss(model, valid_cols, graphed=graphed)
    sync(device)
    valid = time.perf_counter() - start
    step_ms = 1000 * statistics.median(times[args.warmup:])
    log(f"{name} {mode}: {step_ms:.2f} ms a step, validation {valid:.2f} s")
    return {"ms_per_step": round(step_ms, 3), "validation_s": round(valid, 3), "first_validation_s": round(first_valid, 3),
            "epoch_s": round(steps_per_epoch * step_ms / 1000 + valid, 1), "steps_per_epoch": steps_per_epoch,
            "parameters": model.num_parameters(), "valid_ppl": round(float(torch.tensor(total / count).exp()), 2),
            "losses": losses, "captured": bool(trainer.static is not None and trainer.static.graph is not None),
            **({"profile": profile} if profile else {})}


def main() -> None:
    if os.environ.get("GROC_BENCH_MALLOC", "1") == "1" and any(k not in os.environ for k in MALLOC_ENV):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **MALLOC_ENV})
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    ap.add_argument("--steps", type=int, default=30, help="timed steps per model and mode (after --warmup)")
    ap.add_argument("--warmup", type=int, default=6, help="untimed steps first (the graph is captured in them)")
    ap.add_argument("--variant", action="append", help="NAME=KIND:CONFIG (repeatable; default: the three of the doc)")
    ap.add_argument("--emb", type=int, help="override the configs' emb")
    ap.add_argument("--hidden", type=int, help="override the configs' hidden")
    ap.add_argument("--lexicon", type=Path, help="lexicon Parquet for GroC (default: built from WordNet)")
    ap.add_argument("--train", type=Path, default=PTB_TRAIN)
    ap.add_argument("--threads", type=int, help="torch threads (CPU)")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="the N costliest kernels of one replayed step")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: --device cuda but CUDA is not available; use --device cpu")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    models = variants(args.variant or DEFAULT_VARIANTS)
    vocab, train_ids = read_corpus(args.train)
    valid_text = args.train.with_name(args.train.name.replace("train", "valid"))
    index = {w: i for i, w in enumerate(vocab)}
    valid_ids = torch.tensor([index.get(t, index["<unk>"]) for line in valid_text.read_text().splitlines()
                              for t in line.split() + ["<eos>"]])
    steps_per_epoch = len(range(0, train_ids.numel() // 20 - 1, 35))  # of the whole training split
    need = (args.warmup + args.steps) * 35 * 20 + 20
    train_ids = train_ids[: max(need, 20 * 400)]
    lexicon = None
    if any(kind == "groc" for kind, _ in models.values()):
        lexicon = Lexicon.from_parquet(args.lexicon) if args.lexicon else wordnet_lexicon(vocab)
    modes = ("eager", "graph" if args.device == "cuda" else "static")
    results = {}
    for name, (_, settings) in models.items():
        r = {mode: measure(name, settings, mode, vocab, lexicon, train_ids, valid_ids, args, device, steps_per_epoch)
             for mode in modes}
        eager, other = r["eager"], r[modes[1]]
        diffs = [abs(a - b) / abs(a) for a, b in zip(eager.pop("losses"), other.pop("losses"))]
        r["speedup"] = round(eager["ms_per_step"] / other["ms_per_step"], 2)
        r["epoch_speedup"] = round(eager["epoch_s"] / other["epoch_s"], 2)
        r["max_loss_rel_diff"] = max(diffs) if diffs else None
        results[name] = r
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    print(json.dumps({
        "benchmark": "graph_step",
        "settings": {"device": args.device, "gpu": gpu, "torch": torch.__version__,
                     "cuda": torch.version.cuda if device.type == "cuda" else None,
                     "cudnn": torch.backends.cudnn.version() if device.type == "cuda" else None,
                     "machine": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
                     "steps": args.steps, "warmup": args.warmup, "batch": 20, "bptt": 35, "emb": args.emb,
                     "hidden": args.hidden, "variants": {n: s for n, s in zip(models, args.variant or DEFAULT_VARIANTS)}},
        "results": results,
    }, indent=1))


if __name__ == "__main__":
    main()
