"""The training step and the validation chunks as CUDA graphs (torch.cuda.CUDAGraph): captured once, replayed
every step, so a step costs what its kernels cost, not their launches and the host's waits.

At the paper's batch (20 x 35 tokens) a GPU step is mostly launches: hundreds of small kernels (LSTM, the
composition's buckets, clipping, Adam) that the host issues one by one. A graph replays them all with one
launch. What a graph needs, and how the step gives it:

* static shapes and addresses: the inputs, targets and the carried LSTM state live in buffers that every
  step copies into (``StaticStep.x``, ``.y``, ``.state``); the last, shorter window of an epoch runs eagerly
  on the same buffers;
* no host synchronisation inside: the loss, the training objective, the gradient norm and the window's NLL
  sum are written on the device into a ring (``StaticStep.ring``), which the trainer reads once every
  ``READ_EVERY`` steps, at a checkpoint and at the end of an epoch (``StaticStep.read``);
* an optimizer that runs inside a graph: Adam with ``capturable=True`` and its learning rate a device
  tensor, which a decay fills in place (SGD with ``fused=True``);
* dropout masks drawn inside the graph (the CUDA generator's graph-safe offsets).

The first ``WARMUP`` steps run eagerly on a side stream (cuBLAS, cuDNN and the optimizer's state are set up
then, as torch's whole-network capture requires); the next one is captured and replayed. Every one of them
is a real training step: the graph changes how a step is launched, not what it computes.

Not captured, and trained eagerly instead (``graph_unsupported`` says why): sparse updates (``update_prob``
< 1: a step composes with or without autograd by a draw on the host, and the sparse path's ``unique`` needs
the host), several processes (the gradients' all-reduce), and a CPU device. ``StaticStep(capture=False)``
runs the same restructured step without a graph, on any device: the CPU test compares it with the eager
step (tests/training/test_graphed.py).
"""

from __future__ import annotations

import math

import torch

#: Eager steps before the capture (torch's whole-network capture: warm up on a side stream).
WARMUP = 3
#: Steps between reads of the device-side ring of per-step values.
READ_EVERY = 100


def graph_unsupported(model, config, device: torch.device, world: int) -> str | None:
    """Why the training step of ``model`` cannot be one CUDA graph here, or None when it can."""
    if device.type != "cuda":
        return "CUDA graphs need a CUDA device"
    if world > 1:
        return "several processes all-reduce their gradients between backward and step"
    if model.output_layer.sparse_updates and model.config.update_prob < 1.0:
        return "update_prob < 1 draws on the host whether a step composes with autograd"
    if config.optimizer not in ("adam", "sgd"):
        return f"no capturable {config.optimizer}"
    return None


def make_graph_optimizer(parameters, config, device: torch.device) -> torch.optim.Optimizer:
    """The optimizer of ``config`` in a form a graph can replay: Adam capturable, SGD fused, the learning rate
    a tensor on the device (a float would be frozen into the captured kernels)."""
    lr = torch.tensor(config.lr, dtype=torch.float32, device=device)
    if config.optimizer == "sgd":
        return torch.optim.SGD(parameters, lr=lr, weight_decay=config.weight_decay, fused=True)
    return torch.optim.Adam(parameters, lr=lr, eps=config.adam_eps, weight_decay=config.weight_decay,
                            capturable=True, foreach=True)


def tensor_lr(optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    """After ``load_state_dict`` (which restores a float learning rate), the learning rate as a device tensor
    again, and the step counts on the device (capturable Adam)."""
    for group in optimizer.param_groups:
        if not isinstance(group["lr"], torch.Tensor):
            group["lr"] = torch.tensor(float(group["lr"]), dtype=torch.float32, device=device)


class StaticStep:
    """One training step on static buffers, with its per-step values summed on the device; captured as a CUDA
    graph after ``WARMUP`` eager steps when ``capture``.

    ``run(begin)`` trains on the window that ``x`` and ``y`` hold (``begin``: the epoch's first window, whose
    state starts at zeros); ``eager_step(x, y)`` trains on a window of another length with the same buffers;
    ``read()`` returns the rows of the steps since the last read: (NLL sum, objective, gradient norm)."""

    def __init__(self, model, optimizer, config, batch: int, device: torch.device, autocast, penalty, capture: bool):
        self.model, self.optimizer, self.config = model, optimizer, config
        self.device, self.autocast, self.penalty, self.capture = device, autocast, penalty, capture
        self.x = torch.zeros(config.bptt, batch, dtype=torch.long, device=device)
        self.y = torch.zeros_like(self.x)
        self.state = [(h.detach().clone(), c.detach().clone()) for h, c in model.init_state(batch)]
        self.ring = torch.zeros(READ_EVERY, 3, dtype=torch.float64, device=device)
        self.index = torch.zeros(1, dtype=torch.long, device=device)
        self.pending = 0  # steps in the ring since the last read
        self.steps_run = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.clip = config.clip if config.clip > 0 else math.inf

    # -- state --------------------------------------------------------------------------------
    def set_state(self, state) -> None:
        """Copy a carried state (or zeros for None) into the buffers."""
        with torch.no_grad():
            for (h, c), new in zip(self.state, state or [None] * len(self.state)):
                if new is None:
                    h.zero_()
                    c.zero_()
                else:
                    h.copy_(new[0])
                    c.copy_(new[1])

    def get_state(self):
        return [(h.clone(), c.clone()) for h, c in self.state]

    # -- one step -------------------------------------------------------------------------------
    def _body(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Forward, backward, clip, record and update, reading and writing only static tensors."""
        model = self.model
        with self.autocast():
            composed = model.compose(grad=True)
            hidden, new_state = model(x, self.state, composed)
            nll = composed.nll(hidden.reshape(-1, hidden.size(-1)).float(), y.reshape(-1))
            loss = nll.mean() + model.regularization() + self.penalty(hidden)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), self.clip)
        values = torch.stack([nll.detach().double().sum(), loss.detach().double(), norm.detach().double()])
        self.ring.index_copy_(0, self.index, values.view(1, 3))
        self.index.add_(1)
        self.optimizer.step()
        with torch.no_grad():
            for (h, c), (nh, nc) in zip(self.state, new_state):
                h.copy_(nh)
                c.copy_(nc)

    def run(self) -> None:
        """Train on the window in ``x`` and ``y`` (full length): eagerly for the first steps, then by replay."""
        if self.pending >= READ_EVERY:
            raise RuntimeError("StaticStep.read() was not called before the ring filled")
        if self.graph is not None:
            self.graph.replay()
        elif self.capture and self.steps_run >= WARMUP:
            self._capture()
            self.graph.replay()
        elif self.capture:
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                self.optimizer.zero_grad(set_to_none=True)
                self._body(self.x, self.y)
            torch.cuda.current_stream(self.device).wait_stream(side)
        else:
            self.optimizer.zero_grad(set_to_none=True)
            self._body(self.x, self.y)
        self.steps_run += 1
        self.pending += 1

    def _capture(self) -> None:
        # Recorded, not run: the replay right after it trains this step. Gradients are allocated by the captured
        # backward (set to None first) and so live at fixed addresses in the graph's pool.
        self.optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._body(self.x, self.y)
        self.graph = graph

    def eager_step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """A window of another length (an epoch's last): the same step, eagerly, on the same state buffers. The
        gradients are zeroed in place, so a captured graph keeps its addresses."""
        if self.pending >= READ_EVERY:
            raise RuntimeError("StaticStep.read() was not called before the ring filled")
        self.optimizer.zero_grad(set_to_none=self.graph is None)
        self._body(x, y)
        self.steps_run += 1
        self.pending += 1

    def read(self) -> list[tuple[float, float, float]]:
        """(NLL sum, objective, gradient norm) of every step since the last read, in order: one host sync."""
        if not self.pending:
            return []
        rows = self.ring[: self.pending].tolist()
        self.index.zero_()
        self.pending = 0
        return [tuple(r) for r in rows]


class GraphedEval:
    """Validation as graphs: the composition without autograd (one graph) and one chunk of ``chunk`` x
    ``batch`` tokens (another, reading the first's outputs), replayed for every full chunk; the last, shorter
    chunk runs eagerly on the same composition. The NLL is summed on the device and read once. Parameters are
    updated in place by the optimizer, so the graphs stay valid for the whole run."""

    def __init__(self, model, batch: int, chunk: int, device: torch.device, autocast):
        self.model, self.batch, self.chunk, self.device, self.autocast = model, batch, chunk, device, autocast
        self.x = torch.zeros(chunk, batch, dtype=torch.long, device=device)
        self.y = torch.zeros_like(self.x)
        self.state = [(h.clone(), c.clone()) for h, c in model.init_state(batch)]
        self.total = torch.zeros((), dtype=torch.float64, device=device)
        self.compose_graph = self.chunk_graph = None
        self.composed = None

    def _compose(self):
        with torch.no_grad(), self.autocast():
            return self.model.output_layer.compose(grad=False)

    def _chunk(self, x: torch.Tensor, y: torch.Tensor) -> None:
        with torch.no_grad(), self.autocast():
            hidden, new_state = self.model(x, self.state, self.composed)
            nll = self.composed.nll(hidden.reshape(-1, hidden.size(-1)).float(), y.reshape(-1))
            self.total.add_(nll.double().sum())
            for (h, c), (nh, nc) in zip(self.state, new_state):
                h.copy_(nh)
                c.copy_(nc)

    def _capture(self) -> None:
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):  # warm-up, as capture requires
            self.composed = self._compose()
            self._chunk(self.x, self.y)
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.compose_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.compose_graph):
            self.composed = self._compose()
        self.chunk_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.chunk_graph, pool=self.compose_graph.pool()):
            self._chunk(self.x, self.y)

    def loss(self, columns: torch.Tensor) -> tuple[float, int]:
        """Summed NLL and token count over [N, batch] columns on the device, the state carried across chunks."""
        if self.compose_graph is None:
            self._capture()
        self.compose_graph.replay()
        for h, c in self.state:
            h.zero_()
            c.zero_()
        self.total.zero_()
        count = 0
        for i in range(0, columns.size(0) - 1, self.chunk):
            n = min(self.chunk, columns.size(0) - 1 - i)
            if n == self.chunk:
                self.x.copy_(columns[i : i + n])
                self.y.copy_(columns[i + 1 : i + 1 + n])
                self.chunk_graph.replay()
            else:
                self._chunk(columns[i : i + n], columns[i + 1 : i + 1 + n])
            count += n * columns.size(1)
        return float(self.total), count
