"""Exact nearest-neighbour search in torch, for the unbounded cache where FAISS cannot run on the
GPU (faiss-gpu absent: its wheels and the CUDA runtime they need do not travel everywhere).

Squared Euclidean distances as FAISS's ``IndexFlatL2`` computes them for a batch of queries
(``‖q‖² + ‖x‖² − 2 q·x``, in float32, clamped at 0), by chunked matrix products over the
stored states, keeping the k smallest of each chunk and of the running best with ``topk``:
memory is bounded by ``chunk_elements`` distances whatever the datastore's size.

The stored states live either in memory on the search's device (GPU memory on CUDA), in
fixed-size slabs so that a growing datastore is never copied, or, given ``stored_states`` (a
memory-mapped ``groc dump``), on disk: each search then streams the rows added so far from it,
chunk by chunk, and only what the cache adds (its count) is kept.

The interface is the part of a FAISS index the cache uses: ``ntotal``, ``add``, ``search``.
"""

from __future__ import annotations

import numpy as np
import torch

#: Rows of one memory slab (the datastore grows by a slab at a time, never copied).
SLAB_ROWS = 65_536
#: Distances computed at once, per device: [queries, rows] float32. CPU: 16 MB, which keeps the
#: product in cache-friendly pieces; CUDA: 256 MB, large enough to fill the GPU.
CHUNK_ELEMENTS = {"cpu": 2**22, "cuda": 2**26}


class TorchExactSearch:
    """Exact k-nearest-neighbour search by squared L2 over the states added so far.

    dim: the states' size; device: a torch device ("cpu", "cuda", "cuda:1"); stored_states:
    [N, dim] array-like whose row i is the i-th state added (then nothing is copied: ``add``
    only counts); chunk_elements: distances computed at once (default per device type).
    """

    def __init__(self, dim: int, device: str | torch.device = "cpu", stored_states=None,
                 chunk_elements: int | None = None):
        self.dim = int(dim)
        self.device = torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"torch search on {self.device}: torch sees no CUDA device")
        self.chunk_elements = int(chunk_elements or CHUNK_ELEMENTS.get(self.device.type, CHUNK_ELEMENTS["cpu"]))
        self.stored_states = stored_states
        self.ntotal = 0
        self._slabs: list[torch.Tensor] = []  # [SLAB_ROWS, dim] float32 on the device
        self._norms: list[torch.Tensor] = []  # [SLAB_ROWS] squared norms of the slab's rows

    @property
    def bytes_per_state(self) -> int:
        """Memory a stored state takes here: its float32 copy and squared norm, or none on disk."""
        return 0 if self.stored_states is not None else 4 * (self.dim + 1)

    def add(self, x: np.ndarray) -> None:
        n = len(x)
        if self.stored_states is None:
            rows = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(self.device)
            done = 0
            while done < n:
                slab, at = divmod(self.ntotal + done, SLAB_ROWS)
                if slab == len(self._slabs):
                    self._slabs.append(torch.empty(SLAB_ROWS, self.dim, device=self.device))
                    self._norms.append(torch.empty(SLAB_ROWS, device=self.device))
                take = min(n - done, SLAB_ROWS - at)
                part = rows[done : done + take]
                self._slabs[slab][at : at + take] = part
                self._norms[slab][at : at + take] = (part * part).sum(1)
                done += take
        self.ntotal += n

    def _chunks(self, rows: int):
        """(first position, states [c, dim] float32, squared norms [c]) over the stored states, at
        most ``rows`` at a time, on the device."""
        a = 0
        while a < self.ntotal:
            b = min(a + rows, self.ntotal)
            if self.stored_states is None:
                # A chunk never straddles two slabs: it ends at its slab's end at the latest.
                slab, at = divmod(a, SLAB_ROWS)
                b = min(b, (slab + 1) * SLAB_ROWS)
                yield a, self._slabs[slab][at : at + b - a], self._norms[slab][at : at + b - a]
            else:
                # The dump's rows (float16 in a default dump), read into memory (a writable copy: torch
                # refuses read-only arrays), as float32 on the device: the values the cache was given.
                x = torch.from_numpy(np.array(self.stored_states[a:b])).to(self.device).float()
                yield a, x, (x * x).sum(1)
            a = b

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(squared distances float32 [n, k] ascending, positions int64 [n, k]) of the k nearest
        stored states of each query; where fewer than k are stored, distance inf and position -1."""
        n = len(queries)
        q = torch.from_numpy(np.ascontiguousarray(queries, dtype=np.float32)).to(self.device)
        qn = (q * q).sum(1, keepdim=True)
        best_d = torch.empty(n, 0, device=self.device)
        best_i = torch.empty(n, 0, dtype=torch.int64, device=self.device)
        rows = max(1, self.chunk_elements // max(n, 1))
        # No TF32 on CUDA: the distances must be those of float32 products, as FAISS's.
        tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            for start, x, xn in self._chunks(rows):
                d = torch.addmm(qn + xn[None, :], q, x.T, alpha=-2.0).clamp_(min=0.0)
                d, i = torch.topk(d, min(k, d.shape[1]), dim=1, largest=False, sorted=False)
                d, at = torch.topk(torch.cat([best_d, d], 1), min(k, best_d.shape[1] + d.shape[1]), dim=1,
                                   largest=False, sorted=False)
                best_i = torch.gather(torch.cat([best_i, i + start], 1), 1, at)
                best_d = d
        finally:
            torch.backends.cuda.matmul.allow_tf32 = tf32
        best_d, order = torch.sort(best_d, dim=1)
        best_i = torch.gather(best_i, 1, order)
        dist = np.full((n, k), np.inf, dtype=np.float32)
        pos = np.full((n, k), -1, dtype=np.int64)
        dist[:, : best_d.shape[1]] = best_d.cpu().numpy()
        pos[:, : best_i.shape[1]] = best_i.cpu().numpy()
        return dist, pos
