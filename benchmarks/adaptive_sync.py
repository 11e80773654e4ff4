"""The adaptive output layer's training step on a GPU with and without host syncs, alone and with other
trainings sharing the GPU (as `recipes/gpu-table2.sh` runs every layer at once).

    python benchmarks/adaptive_sync.py --load 6

Prints ONE JSON object on stdout: the median milliseconds a step of `tied`, of `adaptive` as groc
trains it, and of `adaptive-synced`, in the same round-robin: first alone, then with --load
`tied` trainings (benchmarks/train_throughput.py processes) on the same GPU. `adaptive-synced` is the
layer as it was before it went sync-free on GPUs: the cluster mask checked on the device (two waits a step) and each
tail bin's rows selected with `nonzero` (one wait a bin), the path groc keeps on the CPU. Each wait
blocks the process until the GPU has run everything queued before it, and with other processes on the
GPU until their turns are over too. Models: recipes/configs/penn/{tied,adaptive}.toml (2 x 1024 LSTM,
emb 300, cutoffs 2000 and 7000), batch 20, BPTT 35, Adam, as train_throughput.py steps them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_throughput as tt  # noqa: E402

from groc_cli.models import adaptive  # noqa: E402


def synced_head(self, hidden: torch.Tensor) -> torch.Tensor:
    """AdaptiveComposed._head before it went sync-free: the empty-bin mask made and tested on the device."""
    logits = F.linear(hidden, self.tables[0])
    if self.cluster is not None:
        cl = self.cluster(hidden)
        empty = torch.tensor([self.bounds[i + 1] == self.bounds[i] for i in range(1, len(self.bounds) - 1)],
                             device=cl.device)
        if bool(empty.any()):
            cl = cl.masked_fill(empty, float("-inf"))
        logits = torch.cat([logits, cl.to(logits.dtype)], dim=-1)
    return F.log_softmax(logits.float(), dim=-1)


HEAD, SYNC_FREE = adaptive.AdaptiveComposed._head, adaptive.sync_free


def use(synced: bool) -> None:
    adaptive.AdaptiveComposed._head = synced_head if synced else HEAD
    adaptive.sync_free = (lambda device: False) if synced else SYNC_FREE


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=40, help="timed steps per model and phase (after --warmup)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--load", type=int, default=6, help="tied trainings sharing the GPU in the second phase (0: none)")
    ap.add_argument("--settle", type=float, default=25.0, help="seconds the load processes get to start training")
    ap.add_argument("--train", type=Path, default=tt.PTB_TRAIN, help="penn training text")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cpu only checks that the script runs: the two adaptive paths differ on a GPU")
    ap.add_argument("--emb", type=int, default=300)
    ap.add_argument("--hidden", type=int, default=1024)
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: --device cuda but CUDA is not available")
    device = torch.device(args.device)
    settings = argparse.Namespace(batch=20, bptt=35, amp=False, emb=args.emb, hidden=args.hidden, layers=2,
                                  dropout=None, config=str(Path(__file__).resolve().parents[1] /
                                                           "recipes/configs/penn/KIND.toml"))
    vocab, data = tt.read_corpus(args.train)
    runners = {name: tt.Runner(kind, tt.model_config(settings, kind), vocab, None, data, settings, device)
               for name, kind in (("tied", "tied"), ("adaptive", "adaptive"), ("adaptive-synced", "adaptive"))}

    def phase() -> dict:
        for r in runners.values():
            r.wall.clear()
        for i in range(args.warmup + args.steps):
            for name, r in runners.items():
                use(synced=name == "adaptive-synced")
                r.step(timed=i >= args.warmup)
        use(synced=False)
        return {name: round(statistics.median(r.wall) * 1000, 2) for name, r in runners.items()}

    out = {"benchmark": "adaptive_sync",
           "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
           "torch": torch.__version__, "steps": args.steps, "load": args.load}
    tt.log("alone")
    out["alone_ms"] = phase()
    if args.load:
        command = [sys.executable, str(Path(__file__).resolve().parent / "train_throughput.py"), "--device",
                   args.device, "--kinds", "tied", "--steps", "1000000", "--warmup", "0", "--train", str(args.train)]
        loads = [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(args.load)]
        try:
            time.sleep(args.settle)
            tt.log(f"with {args.load} tied trainings on the device")
            out[f"with_{args.load}_tied_ms"] = phase()
        finally:
            for p in loads:
                p.kill()
                p.wait()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
