"""Batched caches against token-by-token references on real PTB word ids."""

from __future__ import annotations

import numpy as np
import pytest

from groc_cli.caches import make_cache

from . import caches_reference as ref
from .caches_reference import score_in_chunks

THETAS = [0.0, 0.3, 1.0, 3.0]


def assert_same(got: np.ndarray, want: np.ndarray, rtol: float, atol: float = 0.0) -> None:
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=rtol, atol=atol)


@pytest.mark.slow
@pytest.mark.parametrize("cache_size", [None, 1, 50, 700])
@pytest.mark.parametrize("chunk", [1, 37, 512, 3000])
def test_unigram_matches_reference(ptb_stream, cache_size, chunk):
    _, y = ptb_stream
    want = ref.unigram(y, cache_size)
    got = score_in_chunks(make_cache("unigram", cache_size=cache_size), None, y, chunk)
    assert_same(got, want, rtol=1e-12)


@pytest.fixture(scope="module")
def local_refs(ptb_stream):
    h, y = ptb_stream
    return {w: ref.local(h, y, THETAS, w) for w in (1, 100, 700, 5000)}


@pytest.mark.slow
@pytest.mark.parametrize("cache_size", [1, 100, 700, 5000])
@pytest.mark.parametrize("chunk,block", [(1, 512), (64, 512), (333, 128), (3000, 256), (3000, 4096)])
def test_local_matches_reference_float64(ptb_stream, local_refs, cache_size, chunk, block):
    # chunks/blocks smaller and larger than the window, and a window longer than the stream
    h, y = ptb_stream
    cache = make_cache("local", thetas=THETAS, cache_size=cache_size, block_size=block, dtype="float64")
    got = score_in_chunks(cache, h, y, chunk)
    assert_same(got, local_refs[cache_size], rtol=1e-9, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("chunk", [100, 3000])
def test_local_float32_close_to_reference(ptb_stream, local_refs, chunk):
    h, y = ptb_stream
    cache = make_cache("local", thetas=THETAS, cache_size=700)
    got = score_in_chunks(cache, h, y, chunk)
    assert_same(got, local_refs[700], rtol=1e-6, atol=1e-6)


def test_local_theta_zero_is_windowed_unigram(ptb_stream):
    h, y = ptb_stream
    local = score_in_chunks(make_cache("local", thetas=[0.0], cache_size=100), h, y, 250)
    unigram = score_in_chunks(make_cache("unigram", cache_size=100), None, y, 250)
    assert_same(local, unigram, rtol=1e-6)


UNB = dict(knn=[1, 8, 64], kernels=["gaussian", "epanechnikov"], bandwidth_scales=[1.0, 2.0])


@pytest.fixture(scope="module")
def unbounded_ref(ptb_stream):
    h, y = ptb_stream
    n = 1500
    return ref.unbounded(h[:n], y[:n], UNB["knn"], UNB["kernels"], UNB["bandwidth_scales"])


@pytest.mark.slow
@pytest.mark.parametrize("chunk,block", [(1, 1024), (50, 1024), (1500, 128), (1500, 2048)])
def test_unbounded_flat_matches_exact_knn(ptb_stream, unbounded_ref, chunk, block):
    h, y = ptb_stream
    n = 1500
    want, tie = unbounded_ref
    cache = make_cache("unbounded", dim=h.shape[1], index="Flat", block_size=block, **UNB)
    got = score_in_chunks(cache, h[:n], y[:n], chunk)
    assert len(cache.settings) == want.shape[1] == 12
    # Exact ties at the k-th neighbour make the neighbour set implementation-defined.
    assert tie.mean() < 0.01
    assert_same(got[~tie], want[~tie], rtol=1e-9, atol=1e-12)
