"""Where a training step's time goes, per output kind: composition forward and backward,
LSTM forward and backward, softmax (logits + cross-entropy) forward and backward, and the
optimizer (clip + Adam), on real PTB.

    python benchmarks/step_phases.py --kinds tied,groc --emb 200 --hidden 200 --threads 1 \
        --lexicon results/work/ptb.lexicon.parquet

Prints ONE JSON object on stdout; progress on stderr. The step is cut into segments at the
composition's outputs (E_out, bias, E_in) and at the LSTM's output, each a detached leaf, so
every segment's forward and backward is timed alone (CPU time of this process and wall
time, medians over ``--steps`` after ``--warmup``); their sum is one ordinary step of
``benchmarks/train_throughput.py`` (reported beside it as ``sum_vs_step``, the same step
timed whole in the same round). Kinds take turns step by step, so load from other
processes hits every kind alike. For ``--top N`` (default 12) the composition's forward
and backward are also profiled once (``torch.profiler``) and their N costliest operators
listed. Kinds whose composition is a softmax over rows (every kind but adaptive) only.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from train_throughput import MALLOC_ENV, PTB_TRAIN, add_model_options, checked_kinds, model_config, read_corpus
from train_throughput import Runner as ThroughputRunner  # noqa: E402

from groc_cli.models import Lexicon, output_layer_class  # noqa: E402
from groc_cli.models.common import SoftmaxComposed  # noqa: E402

PHASES = ("compose_forward", "lstm_forward", "softmax_forward", "softmax_backward", "lstm_backward",
          "compose_backward", "optimizer")
COMPOSED_TENSORS = ("weight", "bias", "input_weight")


class Clock:
    """Accumulates (wall, CPU) seconds per phase for one step."""

    def __init__(self) -> None:
        self.times: dict[str, tuple[float, float]] = {}
        self._start = (0.0, 0.0)

    def start(self) -> None:
        self._start = (time.perf_counter(), time.process_time())

    def stop(self, phase: str) -> None:
        wall, cpu = time.perf_counter() - self._start[0], time.process_time() - self._start[1]
        self.times[phase] = (wall, cpu)


class Runner(ThroughputRunner):
    """train_throughput's runner (its ``step`` is the whole step, timed in ``wall``/``cpu``) plus the
    same step cut into segments."""

    def __init__(self, kind: str, config, vocab, lexicon, data: torch.Tensor, args) -> None:
        super().__init__(kind, config, vocab, lexicon, data, args, torch.device("cpu"))
        self.phases: dict[str, list[tuple[float, float]]] = {p: [] for p in PHASES}

    def segmented_step(self, timed: bool) -> None:
        x, y = self.batch()
        clock = Clock()
        clock.start()
        composed = self.model.compose(grad=True)
        clock.stop("compose_forward")
        if not isinstance(composed, SoftmaxComposed):
            sys.exit(f"error: {self.kind}'s composition is not a softmax over rows; choose other --kinds")
        # The composition's outputs as leaves: what the rest of the step sees, cut from the graph.
        leaves = copy.copy(composed)
        pairs = []
        for name in COMPOSED_TENSORS:
            tensor = getattr(composed, name)
            if tensor is not None and tensor.requires_grad:
                leaf = tensor.detach().requires_grad_()
                setattr(leaves, name, leaf)
                pairs.append((tensor, leaf))
        clock.start()
        hidden, state = self.model(x, self.model.detach_state(self.state), leaves)
        hidden_leaf = hidden.detach().requires_grad_()
        clock.stop("lstm_forward")
        clock.start()
        loss = leaves.nll(hidden_leaf.reshape(-1, hidden_leaf.size(-1)).float(), y.reshape(-1)).mean()
        loss = loss + self.model.regularization()
        clock.stop("softmax_forward")
        self.optimizer.zero_grad(set_to_none=True)
        clock.start()
        loss.backward()
        clock.stop("softmax_backward")
        clock.start()
        hidden.backward(hidden_leaf.grad)
        clock.stop("lstm_backward")
        clock.start()
        grads = [(t, leaf.grad) for t, leaf in pairs if leaf.grad is not None]
        if grads:
            torch.autograd.backward([t for t, _ in grads], [g for _, g in grads])
        clock.stop("compose_backward")
        clock.start()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 0.1)
        self.optimizer.step()
        clock.stop("optimizer")
        self.state = state
        if timed:
            for phase, value in clock.times.items():
                self.phases[phase].append(value)

    def profile_composition(self, top: int) -> list[dict]:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            composed = self.model.compose(grad=True)
            outs = [getattr(composed, n) for n in COMPOSED_TENSORS if getattr(composed, n) is not None]
            torch.autograd.backward(outs, [torch.ones_like(t) for t in outs])
        self.model.zero_grad(set_to_none=True)
        rows = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)[:top]
        return [{"op": e.key, "self_cpu_ms": round(e.self_cpu_time_total / 1000, 2), "calls": e.count} for e in rows]

    def result(self) -> dict:
        def med(values: list[tuple[float, float]], i: int) -> float:
            return round(statistics.median(v[i] for v in values), 4)

        whole = list(zip(self.wall, self.cpu))
        out = {phase: {"wall_s": med(v, 0), "cpu_s": med(v, 1)} for phase, v in self.phases.items()}
        total_cpu = sum(p["cpu_s"] for p in out.values())
        for p in out.values():
            p["share_of_cpu"] = round(p["cpu_s"] / total_cpu, 3)
        return {
            "phases": out,
            "sum_cpu_s": round(total_cpu, 4),
            "step_cpu_s": med(whole, 1),
            "step_wall_s": med(whole, 0),
            "sum_vs_step": round(total_cpu / med(whole, 1), 3),
            "parameters": self.model.num_parameters(),
        }


def gemm_rate(rows: int, inner: int = 256, cols: int = 512, repeats: int = 7) -> float:
    """This process's float32 matrix-product rate (GFLOP/s, median of ``repeats``) at the shape of
    GroC's highway layer over ``rows`` strings: the floor under the composition's cost."""
    a, b = torch.randn(rows, inner), torch.randn(inner, cols)
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - start)
    return round(2 * rows * inner * cols / statistics.median(times[1:]) / 1e9, 1)


def main() -> None:
    if os.environ.get("GROC_BENCH_MALLOC", "1") == "1" and any(k not in os.environ for k in MALLOC_ENV):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **MALLOC_ENV})
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kinds", default="tied,groc", help="comma-separated output kinds (default tied,groc)")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per kind and way (after --warmup)")
    ap.add_argument("--warmup", type=int, default=2)
    add_model_options(ap, emb=200, hidden=200)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--bptt", type=int, default=35)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    ap.add_argument("--lexicon", type=Path, help="lexicon Parquet for GroC (groc lexicon --vocab ... output)")
    ap.add_argument("--train", type=Path, default=PTB_TRAIN, help="penn training text")
    ap.add_argument("--top", type=int, default=12, help="costliest composition operators to list (0: no profile)")
    ap.set_defaults(amp=False)  # float32 on CPU (train_throughput's runner reads it)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    kinds = checked_kinds(args)
    needs_lexicon = any(output_layer_class(k).needs_lexicon for k in kinds)
    if needs_lexicon and not (args.lexicon and args.lexicon.is_file()):
        sys.exit("error: GroC needs --lexicon PATH.parquet (groc lexicon --vocab DATASET -o PATH.parquet)")
    vocab, data = read_corpus(args.train)
    lexicon = Lexicon.from_parquet(args.lexicon) if needs_lexicon else None
    runners = {}
    for kind in kinds:
        config = model_config(args, kind)
        runners[kind] = Runner(kind, config, vocab, lexicon, data, args)
    for step in range(args.warmup + args.steps):
        for runner in runners.values():
            runner.segmented_step(timed=step >= args.warmup)
            runner.step(timed=step >= args.warmup)
        print(f"step {step + 1}/{args.warmup + args.steps}", file=sys.stderr, flush=True)
    results = {kind: r.result() for kind, r in runners.items()}
    if "tied" in results:
        base = results["tied"]
        for r in results.values():
            r["step_cpu_vs_tied"] = round(r["step_cpu_s"] / base["step_cpu_s"], 3)
            r["extra_cpu_over_tied_by_phase"] = {
                p: round(r["phases"][p]["cpu_s"] - base["phases"][p]["cpu_s"], 4) for p in PHASES}
    for kind, runner in runners.items():
        strings = getattr(runner.model.output_layer, "num_strings", None)
        if strings:  # GroC: how many strings a composition encodes, and the matrix-product rate at its shape
            results[kind]["strings_composed"] = strings
            results[kind]["gemm_gflops_at_highway_shape"] = gemm_rate(strings)
    if args.top:
        for kind, runner in runners.items():
            results[kind]["composition_top_ops"] = runner.profile_composition(args.top)
    print(json.dumps({
        "benchmark": "step_phases",
        "settings": {"corpus": str(args.train), "vocab": len(vocab), "emb": args.emb, "hidden": args.hidden,
                     "layers": args.layers, "batch": args.batch, "bptt": args.bptt, "steps": args.steps,
                     "warmup": args.warmup, "threads": torch.get_num_threads(), "torch": torch.__version__,
                     "machine": platform.processor() or platform.machine(),
                     "lexicon": str(args.lexicon) if args.lexicon else None, "config": args.config,
                     "dropout": args.dropout},
        "results": results,
    }, indent=1))


if __name__ == "__main__":
    main()
