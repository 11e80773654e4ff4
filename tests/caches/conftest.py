"""Shared data for the cache tests: real PTB word ids and history-determined hidden states."""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np
import pytest
import torch

PTB_VALID = Path("/work/shared/data/ptb/ptb.valid.txt")
NUM_TOKENS = 3000
DIM = 32


@pytest.fixture(scope="package", autouse=True)
def _one_thread():
    # Tiny matrices: OpenMP spin-waiting makes FAISS k-means and small torch ops many
    # times slower with 2 threads on a busy 2-core machine; one thread loses nothing here.
    # Package scope: restored once this folder's tests are done.
    before = faiss.omp_get_max_threads(), torch.get_num_threads()
    faiss.omp_set_num_threads(1)
    torch.set_num_threads(1)
    yield
    faiss.omp_set_num_threads(before[0])
    torch.set_num_threads(before[1])


@pytest.fixture(scope="session")
def ptb_stream() -> tuple[np.ndarray, np.ndarray]:
    """(hidden [n, DIM] float32, targets [n] int64) for the first NUM_TOKENS PTB valid tokens.

    Word ids are assigned in order of first appearance (<eos> ends each line).  The state
    h_t is a fixed random Elman RNN, h_t = tanh(R h_{t-1} + E[w_t]), run over the words up to
    and including w_t; the target of position t is w_{t+1}.  So states are deterministic
    functions of the history, as an LM's are.
    """
    if not PTB_VALID.is_file():
        pytest.skip(f"{PTB_VALID} not available")
    words: list[str] = []
    with PTB_VALID.open(encoding="utf-8") as f:
        for line in f:
            words.extend(line.split() + ["<eos>"])
            if len(words) > NUM_TOKENS:
                break
    vocab: dict[str, int] = {}
    ids = np.array([vocab.setdefault(w, len(vocab)) for w in words[: NUM_TOKENS + 1]])
    rng = np.random.default_rng(1234)
    emb = rng.standard_normal((len(vocab), DIM))
    rec = rng.standard_normal((DIM, DIM)) * (0.9 / np.sqrt(DIM))
    hidden = np.empty((NUM_TOKENS, DIM))
    h = np.zeros(DIM)
    for t in range(NUM_TOKENS):
        h = np.tanh(rec @ h + emb[ids[t]])
        hidden[t] = h
    # Multiples of 1/256 in [-1, 1]: every dot product and squared distance of two states
    # (|x| <= 4 * DIM < 2**8, steps of 2**-16) is exact in float32, so FAISS, torch and the
    # float64 references agree exactly on which neighbours are nearest.
    hidden = np.round(hidden * 256) / 256
    return hidden.astype(np.float32), ids[1 : NUM_TOKENS + 1].astype(np.int64)
