"""Unbounded cache whose exact refinement stage reads states from disk (stored_states)."""

from __future__ import annotations

import shutil

import faiss
import numpy as np
import pytest

from groc_cli.caches import make_cache

from .caches_reference import score_in_chunks, with_future_changed

FACTORY = "IVF16,PQ8,RFlat"


@pytest.fixture(scope="module")
def trained(ptb_stream, tmp_path_factory):
    """The same trained empty index for every cache here: k_factor 1 (the factory's) and 4."""
    h, _ = ptb_stream
    folder = tmp_path_factory.mktemp("disk")
    paths = {1: folder / "k1.faiss", 4: folder / "k4.faiss"}
    make_cache("unbounded", index=FACTORY, train_vectors=h[:2000]).save_trained(paths[1])
    index = faiss.read_index(str(paths[1]))
    index.k_factor = 4  # candidates per neighbour; saved with the index
    faiss.write_index(index, str(paths[4]))
    shutil.copy(folder / "k1.faiss.json", folder / "k4.faiss.json")
    return paths


def on_disk(states: np.ndarray, path) -> np.ndarray:
    """float16 and memory-mapped, as `groc dump` writes hidden.npy (the PTB states are
    multiples of 1/256 in [-1, 1], exact in float16)."""
    array = np.lib.format.open_memmap(path, mode="w+", dtype=np.float16, shape=states.shape)
    array[:] = states
    array.flush()
    del array
    return np.load(path, mmap_mode="r")


def cache(index_path, stored=None, **kw):
    opts = dict(dim=32, index=FACTORY, nprobe=4, knn=[8, 64], trained_index=index_path, **kw)
    return make_cache("unbounded", stored_states=stored, **opts)


@pytest.mark.parametrize("k_factor", [1, 4])
def test_states_on_disk_give_the_in_memory_results(ptb_stream, trained, tmp_path, k_factor):
    h, y = ptb_stream
    h, y = h[2000:], y[2000:]
    stored = on_disk(h, tmp_path / "hidden.npy")
    memory = cache(trained[k_factor])
    disk = cache(trained[k_factor], stored)
    want = score_in_chunks(memory, h, y, 300)
    got = score_in_chunks(disk, h, y, 300)
    np.testing.assert_array_equal(got, want)
    assert np.isfinite(got).sum() > 400  # many positions whose word the cache has seen
    # Memory: 8-byte PQ codes + 8-byte FAISS ids + 4-byte target ids; the float32 copies are not.
    assert disk.nbytes == len(h) * (8 + 8 + 4) and memory.nbytes >= disk.nbytes + len(h) * 4 * 32
    assert disk.config["datastore"] == "stored_states" and memory.config["datastore"] == "memory"


def test_states_on_disk_stay_causal(ptb_stream, trained, tmp_path):
    h, y = ptb_stream
    h, y = h[:400], y[:400]
    cut = 250
    h2, y2 = with_future_changed(h, y, cut)
    a = score_in_chunks(cache(trained[1], on_disk(h, tmp_path / "a.npy")), h, y, 300)  # chunk straddles the cut
    b = score_in_chunks(cache(trained[1], on_disk(h2, tmp_path / "b.npy")), h2, y2, 300)
    np.testing.assert_array_equal(a[:cut], b[:cut])
    assert not np.array_equal(a[cut:], b[cut:], equal_nan=True)


def test_stored_states_must_be_the_stream_and_need_an_exact_stage(ptb_stream, trained, tmp_path):
    h, y = ptb_stream
    stored = on_disk(h[:500], tmp_path / "hidden.npy")
    disk = cache(trained[1], stored)
    disk.score(h[:100], y[:100])
    with pytest.raises(ValueError, match="positions 100..199 are not rows 100..199 of stored_states"):
        disk.score(h[200:300], y[200:300])
    with pytest.raises(ValueError, match="not rows"):  # past the end of stored_states
        cache(trained[1], on_disk(h[:50], tmp_path / "short.npy")).score(h[:100], y[:100])
    with pytest.raises(ValueError, match=r"no exact refinement stage .*',RFlat'"):
        make_cache("unbounded", index="IVF16,PQ8", train_vectors=h[:2000], stored_states=stored)
    with pytest.raises(ValueError, match=r"stored_states must be \[N, 32\]"):
        cache(trained[1], stored[:, :16])
