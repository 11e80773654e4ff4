"""The unbounded cache's exact search in torch (search="torch") against FAISS's exact "Flat":
the same neighbours and the same log-probabilities, in memory, across slabs and chunks, and
streamed from states on disk."""

from __future__ import annotations

import faiss
import numpy as np
import pytest
import torch

from groc_cli.caches import interpolate, knn_torch, make_cache
from groc_cli.caches.knn_torch import TorchExactSearch
from groc_cli.caches.unbounded import choose_search

from .caches_reference import score_in_chunks
from .test_caches_disk import on_disk


def test_search_finds_faiss_flat_neighbours_across_slabs_and_chunks(monkeypatch):
    # Unrounded Gaussian states: the distances are float32 sums in both libraries, so they agree
    # to rounding, and the neighbours do wherever two candidates are not that close.
    monkeypatch.setattr(knn_torch, "SLAB_ROWS", 700)  # four slabs for 2,500 states
    rng = np.random.default_rng(5)
    states = rng.standard_normal((2500, 24)).astype(np.float32)
    queries = rng.standard_normal((90, 24)).astype(np.float32)
    flat = faiss.IndexFlatL2(24)
    ours = TorchExactSearch(24, chunk_elements=90 * 256)  # chunks of 256 rows, cut at each slab's end
    for a in range(0, len(states), 333):  # added block by block, as the cache does
        flat.add(states[a : a + 333])
        ours.add(states[a : a + 333])
    assert ours.ntotal == flat.ntotal == 2500 and len(ours._slabs) == 4
    want_d, want_i = flat.search(queries, 50)
    got_d, got_i = ours.search(queries, 50)
    assert got_d.dtype == np.float32 and got_i.dtype == np.int64
    np.testing.assert_allclose(got_d, want_d, rtol=1e-5, atol=1e-5)
    gaps = np.diff(want_d, axis=1)
    close = np.zeros_like(want_i, dtype=bool)
    close[:, 1:] |= gaps < 1e-4
    close[:, :-1] |= gaps < 1e-4
    assert (got_i == want_i)[~close].all() and (~close).mean() > 0.95
    # Fewer stored states than k: the rest is (inf, -1), as FAISS pads.
    few = TorchExactSearch(24)
    few.add(states[:3])
    d, i = few.search(queries[:2], 5)
    assert (i[:, 3:] == -1).all() and np.isinf(d[:, 3:]).all() and (i[:, :3] >= 0).all()


@pytest.mark.slow
@pytest.mark.parametrize("block_size", [1024, 97])
def test_torch_search_scores_as_faiss_flat(ptb_stream, block_size):
    # The PTB states are exact in float32 (conftest.py): every distance agrees to the last bit.
    h, y = ptb_stream
    opts = dict(dim=32, index="Flat", knn=[8, 64], kernels=["gaussian", "epanechnikov"], bandwidth_scales=[0.5, 1.0],
                block_size=block_size)
    faiss_cache = make_cache("unbounded", **opts)
    torch_cache = make_cache("unbounded", search="torch", **opts)
    want = score_in_chunks(faiss_cache, h, y, 300)
    got = score_in_chunks(torch_cache, h, y, 300)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    assert np.isfinite(got).sum() > 1000
    model = np.full(len(y), np.log(1 / 1000))  # a uniform model over 1,000 words, mixed with each column
    ppl = lambda out: np.exp(-interpolate(model, out, [0.1]).mean(0))
    np.testing.assert_allclose(ppl(got), ppl(want), rtol=1e-12)  # the same perplexity
    assert torch_cache.config["search"] == "torch (cpu)" and faiss_cache.config["search"] == "faiss"
    assert torch_cache.nbytes == len(h) * (4 * 33 + 4)  # float32 state + norm + target id


def test_torch_search_streams_states_from_disk(ptb_stream, tmp_path):
    h, y = ptb_stream
    stored = on_disk(h, tmp_path / "hidden.npy")
    opts = dict(dim=32, index="Flat", knn=[8, 64], search="torch")
    memory = make_cache("unbounded", **opts)
    disk = make_cache("unbounded", stored_states=stored, **opts)
    disk._store.chunk_elements = 1024 * 500  # several chunks per block
    np.testing.assert_array_equal(score_in_chunks(disk, h, y, 256), score_in_chunks(memory, h, y, 256))
    assert disk.nbytes == len(h) * 4  # only the target ids: the states stay on disk


def test_torch_search_needs_the_exact_index():
    with pytest.raises(ValueError, match="replaces index 'Flat', not 'IVF16,PQ8'"):
        make_cache("unbounded", dim=32, index="IVF16,PQ8", search="torch")
    with pytest.raises(ValueError, match="search .cuda.: expected one of auto, faiss, torch"):
        make_cache("unbounded", dim=32, index="Flat", search="cuda")


def test_auto_takes_torch_on_cuda_only_without_faiss_gpu(monkeypatch):
    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 0)
    assert choose_search("auto", True, "cuda") == "torch"
    assert choose_search("auto", False, "cuda") == "faiss"  # a compressed index stays FAISS's (on the CPU)
    assert choose_search("auto", True, "cpu") == "faiss"
    assert choose_search("torch", True, "cpu") == "torch" and choose_search("faiss", True, "cuda") == "faiss"
    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 1)  # faiss-gpu installed: it stays the choice
    assert choose_search("auto", True, "cuda") == "faiss"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_torch_search_on_cuda_scores_as_on_the_cpu(ptb_stream):
    h, y = ptb_stream
    opts = dict(dim=32, index="Flat", knn=[8, 64], search="torch")
    cpu = score_in_chunks(make_cache("unbounded", **opts), h, y, 300)
    cuda = make_cache("unbounded", device="cuda", **opts)
    np.testing.assert_allclose(score_in_chunks(cuda, h, y, 300), cpu, rtol=1e-12, atol=0)
    assert cuda._store._slabs[0].is_cuda
