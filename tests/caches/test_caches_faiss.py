"""Unbounded cache with compressed FAISS indexes: training, persistence, sanity."""

from __future__ import annotations

import json

import numpy as np
import pytest

from groc_cli.caches import make_cache

from .caches_reference import score_in_chunks

FACTORY = "IVF16,PQ8"


@pytest.fixture(scope="module")
def split(ptb_stream):
    # Index training uses other states than the evaluated ones (a held-out stream).
    h, y = ptb_stream
    return h[:2000], h[2000:], y[2000:]


def test_ivfpq_gives_sensible_log_probs(split):
    train, h, y = split
    cache = make_cache("unbounded", index=FACTORY, nprobe=4, knn=64, train_vectors=train)
    assert cache.train_seconds > 0 and cache.config["training"]["num_vectors"] == 2000
    out = score_in_chunks(cache, h, y, 256)[:, 0]
    seen_before = np.array([y[t] in set(y[:t]) for t in range(len(y))])
    assert np.isnan(out[0]) and not np.isnan(out[1:]).any()
    assert (out[1:][~seen_before[1:]] == -np.inf).all()  # a cache cannot predict unseen words
    finite = np.isfinite(out)
    assert (out[finite] <= 1e-12).all()
    assert finite[seen_before].mean() > 0.5
    # compressed memory: 8-byte codes (+ ids) instead of 32 float32s
    flat = make_cache("unbounded", dim=h.shape[1], index="Flat", knn=64)
    flat.score(h, y)
    assert cache.nbytes < flat.nbytes / 3


def test_knn_larger_than_the_memory(split):
    train, h, y = split
    cache = make_cache("unbounded", index=FACTORY, nprobe=16, knn=5000, train_vectors=train)
    out = cache.score(h[:300], y[:300])
    assert not np.isnan(out[1:]).any()


def test_trained_index_round_trips(split, tmp_path):
    train, h, y = split
    path = tmp_path / "trained.faiss"
    first = make_cache("unbounded", index=FACTORY, knn=32, train_vectors=train)
    first.save_trained(path)
    assert json.loads((tmp_path / "trained.faiss.json").read_text())["factory"] == FACTORY
    expected = score_in_chunks(first, h, y, 300)
    first.save_trained(tmp_path / "again.faiss")  # saving after adding still writes it empty
    for source in (path, tmp_path / "again.faiss"):
        loaded = make_cache("unbounded", dim=h.shape[1], index=FACTORY, knn=32, trained_index=source)
        assert loaded.train_seconds == 0 and len(loaded) == 0
        np.testing.assert_array_equal(score_in_chunks(loaded, h, y, 300), expected)
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.slow
def test_trained_index_mismatch_is_rejected(split, tmp_path):
    train, h, _ = split
    path = tmp_path / "trained.faiss"
    make_cache("unbounded", index=FACTORY, train_vectors=train).save_trained(path)
    with pytest.raises(ValueError, match="expected 'IVF16,PQ4'"):
        make_cache("unbounded", dim=h.shape[1], index="IVF16,PQ4", trained_index=path)
    with pytest.raises(ValueError, match="does not exist"):
        make_cache("unbounded", dim=h.shape[1], index=FACTORY, trained_index=tmp_path / "nope")


def test_too_few_training_vectors(split):
    train, _, _ = split
    with pytest.raises(ValueError, match="training FAISS index 'IVF16,PQ8' on 10 vectors"):
        make_cache("unbounded", index=FACTORY, train_vectors=train[:10])


def test_use_gpu_without_a_gpu_is_a_clear_error():
    import faiss

    if faiss.get_num_gpus() > 0:
        pytest.skip("a GPU is available")
    with pytest.raises(ValueError, match="sees no GPU"):
        make_cache("unbounded", dim=8, index="Flat", use_gpu=True)


@pytest.mark.gpu
def test_gpu_flat_matches_cpu_flat(ptb_stream):
    import faiss

    if faiss.get_num_gpus() == 0:
        pytest.skip("FAISS sees no GPU")
    h, y = ptb_stream
    opts = dict(dim=h.shape[1], index="Flat", knn=[8, 64])
    cpu = make_cache("unbounded", use_gpu=False, **opts).score(h[:1000], y[:1000])
    gpu = make_cache("unbounded", use_gpu=True, **opts).score(h[:1000], y[:1000])
    np.testing.assert_allclose(gpu, cpu, rtol=1e-4, atol=1e-6)
