"""Causality, normalisation, hand-checked values, interpolation and validation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from groc_cli.caches import StreamCache, check_weights, interpolate, make_cache

from .caches_reference import score_in_chunks, with_future_changed

SMALL = {
    "unigram": {},
    "unigram-window": {"cache_size": 7},
    "local": {"thetas": [0.0, 0.5, 2.0], "cache_size": 50},
    "unbounded": {"index": "Flat", "knn": [4, 32], "kernels": ["gaussian", "epanechnikov"],
                  "bandwidth_scales": [1.0, 1.5]},
}


def build(name: str, dim: int):
    kind = name.split("-")[0]
    opts = dict(SMALL[name])
    if kind == "unbounded":
        opts["dim"] = dim
    return make_cache(kind, **opts)


@pytest.mark.parametrize("name", list(SMALL))
def test_is_a_stream_cache_with_one_setting_per_column(ptb_stream, name):
    h, y = ptb_stream
    cache = build(name, h.shape[1])
    assert isinstance(cache, StreamCache)
    out = cache.score(h[:10], y[:10])
    assert out.shape == (10, len(cache.settings)) and out.dtype == np.float64
    assert np.isnan(out[0]).all()  # empty cache at t = 0
    assert len(cache) == min(10, cache.config.get("cache_size") or 10)


@pytest.mark.parametrize("name", list(SMALL))
def test_changing_the_future_does_not_change_the_past(ptb_stream, name):
    h, y = ptb_stream
    h, y = h[:400], y[:400]
    cut = 250
    h2, y2 = with_future_changed(h, y, cut)
    a = score_in_chunks(build(name, h.shape[1]), h, y, 300)  # chunk straddles the cut
    b = score_in_chunks(build(name, h.shape[1]), h2, y2, 300)
    np.testing.assert_array_equal(a[:cut], b[:cut])
    assert not np.array_equal(a[cut:], b[cut:], equal_nan=True)


@pytest.mark.parametrize("name", list(SMALL))
@pytest.mark.parametrize("t", [1, 5, 120])
def test_distribution_over_the_vocabulary_sums_to_one(ptb_stream, name, t):
    h, y = ptb_stream
    vocab = np.unique(np.r_[y[:t], [9999]])  # every word seen so far and one unseen
    probs = []
    for word in vocab:
        cache = build(name, h.shape[1])
        cache.score(h[:t], y[:t])
        probs.append(np.exp(cache.score(h[t : t + 1], np.array([word]))[0]))
    probs = np.array(probs)  # [vocab, settings]
    if name == "unbounded":  # epanechnikov with s = 1 is undefined while every weight is 0
        defined = ~np.isnan(probs).any(0)
        probs = probs[:, defined]
        assert defined.any()
    np.testing.assert_allclose(probs.sum(0), 1.0, rtol=1e-6)
    assert (probs[vocab == 9999] == 0).all()


def test_unigram_by_hand():
    y = np.array([5, 7, 5, 5, 9, 7])
    got = make_cache("unigram").score(None, y)[:, 0]
    want = [math.nan, -math.inf, math.log(1 / 2), math.log(2 / 3), -math.inf, math.log(1 / 5)]
    np.testing.assert_allclose(got, want)
    got = make_cache("unigram", cache_size=2).score(None, y)[:, 0]  # window of the last 2
    want = [math.nan, -math.inf, math.log(1 / 2), math.log(1 / 2), -math.inf, -math.inf]
    np.testing.assert_allclose(got, want)


def test_local_memory_is_bounded_by_the_window(ptb_stream):
    h, y = ptb_stream
    cache = make_cache("local", cache_size=100)
    cache.score(h[:200], y[:200])
    size = cache.nbytes
    cache.score(h[200:], y[200:])
    assert cache.nbytes == size and len(cache) == 100


def test_interpolate_endpoints_and_nan():
    model = np.log(np.array([0.1, 0.2, 0.3, 0.4]))
    cache = np.log(np.array([[np.nan, 0.5], [0.5, 1.0], [0.9, 0.1], [0.2, 1.0]]))
    cache[1, 1] = -np.inf  # the cache gives the target zero probability
    out = interpolate(model, cache, [0.0, 0.25, 1.0])
    assert out.shape == (4, 6)  # column p * len(weights) + i
    np.testing.assert_allclose(out[:, [0, 3]], model[:, None].repeat(2, 1))  # w = 0
    np.testing.assert_allclose(out[1:, 2], cache[1:, 0])  # w = 1 gives the cache
    np.testing.assert_array_equal(out[:, 5], cache[:, 1])  # ... including -inf
    np.testing.assert_allclose(out[0, :3], model[0])  # NaN cache: the model alone
    np.testing.assert_allclose(out[2, 1], math.log(0.75 * 0.3 + 0.25 * 0.9))
    np.testing.assert_allclose(out[1, 4], math.log(0.75 * 0.2))  # cache gives 0
    tiny = interpolate(np.array([-1000.0]), np.array([-1001.0]), [0.5])  # no underflow
    np.testing.assert_allclose(tiny, np.logaddexp(-1000, -1001) + math.log(0.5))


@pytest.mark.parametrize("weights", [[1.5], [-0.1], [float("nan")], []])
def test_bad_weights(weights):
    with pytest.raises(ValueError):
        check_weights(weights)
    with pytest.raises(ValueError):
        interpolate(np.zeros(2), np.zeros((2, 1)), weights)


@pytest.mark.parametrize(
    "kind,opts,match",
    [
        ("lru", {}, "unknown cache kind 'lru'"),
        ("local", {"cache_size": 0}, "cache_size"),
        ("local", {"thetas": [-1.0]}, "thetas"),
        ("local", {"window": 5}, "unknown option 'window'"),
        ("unigram", {"cache_size": 0}, "cache_size"),
        ("unbounded", {"dim": 8, "index": "Flat", "knn": 0}, "knn"),
        ("unbounded", {"dim": 8, "index": "Flat", "kernels": ["box"]}, "kernel"),
        ("unbounded", {"dim": 8, "index": "Flat", "nprobe": 0}, "nprobe"),
        ("unbounded", {"index": "Flat"}, "dim"),
        ("unbounded", {"dim": 32, "index": "Bogus"}, "FAISS rejected index 'Bogus'"),
        ("unbounded", {"dim": 30, "index": "IVF16,PQ8"}, "multiple of the number of subquantizers"),
        ("unbounded", {"dim": 32, "index": "IVF16,PQ8"}, "needs training"),
    ],
)
def test_construction_validates(kind, opts, match):
    with pytest.raises(ValueError, match=match) as err:
        make_cache(kind, **opts)
    assert "\n" not in str(err.value)


def test_chunk_validation(ptb_stream):
    h, y = ptb_stream
    cache = make_cache("local", cache_size=10)
    with pytest.raises(ValueError, match="hidden"):
        cache.score(h[:5], y[:4])
    with pytest.raises(ValueError, match="target ids"):
        cache.score(h[:2], np.array([1, -3]))
    cache.score(h[:5], y[:5])
    with pytest.raises(ValueError, match="dimension"):
        cache.score(h[:5, :8], y[:5])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_local_tiny_probability_does_not_underflow(dtype):
    hidden = np.array([[10.0], [-10.0], [10.0]], dtype=np.float32)
    out = make_cache("local", thetas=[1.0], dtype=dtype).score(hidden, np.array([7, 8, 8]))
    # t = 2: sims 100 (word 7) and -100 (word 8): p(8) = e^-100 / (e^100 + e^-100)
    np.testing.assert_allclose(out[2, 0], -200.0, rtol=1e-6)
