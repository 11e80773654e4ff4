"""Per-token records: one Parquet row per prediction, written as the stream goes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..artifacts.atomic import atomic_path
from ..artifacts.io import METADATA_KEY
from ..console import strict_json

ROW_GROUP = 1 << 17

SCHEMA = pa.schema(
    [
        ("position", pa.int64()),  # index of the predicted token in the split (0 is context only)
        ("word", pa.string()),
        ("in_train", pa.bool_()),  # word is in the model's training vocabulary
        ("train_freq", pa.int64()),  # its count in the model's training data (0 when absent)
        ("model_logp", pa.float64()),  # natural log, before any cache (after --downweight-new/--uniform-weight)
        ("final_logp", pa.float64()),  # natural log, after the cache
    ]
)


class PerTokenWriter:
    """Context manager: rows are appended per chunk into a temporary file renamed on success."""

    def __init__(self, path: Path, split_words: list[str], model_words: list[str], model_counts: list[int], meta: dict):
        self.path = Path(path)
        self.dictionary = pa.array(split_words, type=pa.string())
        index = {w: c for w, c in zip(model_words, model_counts)}
        self.in_train = np.fromiter((w in index for w in split_words), dtype=bool, count=len(split_words))
        self.freq = np.fromiter((index.get(w, 0) for w in split_words), dtype=np.int64, count=len(split_words))
        self.schema = SCHEMA.with_metadata({METADATA_KEY: strict_json(meta, sort_keys=True).encode()})
        self._ctx = None
        self._writer = None
        self._pending: list[tuple] = []
        self._pending_rows = 0

    def __enter__(self) -> "PerTokenWriter":
        self._ctx = atomic_path(self.path)
        tmp = self._ctx.__enter__()
        self._writer = pq.ParquetWriter(tmp, self.schema, compression="zstd")
        return self

    def write(self, positions: np.ndarray, dataset_ids: np.ndarray, model_logp: np.ndarray, final_logp: np.ndarray) -> None:
        self._pending.append((positions.astype(np.int64), dataset_ids.astype(np.int64), np.asarray(model_logp, np.float64),
                              np.asarray(final_logp, np.float64)))
        self._pending_rows += len(positions)
        if self._pending_rows >= ROW_GROUP:  # stream chunks are small; Parquet row groups should not be
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        pos, ids, model_logp, final_logp = (np.concatenate(c) for c in zip(*self._pending))
        self._pending, self._pending_rows = [], 0
        table = pa.Table.from_arrays(
            [pa.array(pos), self.dictionary.take(pa.array(ids)), pa.array(self.in_train[ids]), pa.array(self.freq[ids]),
             pa.array(model_logp), pa.array(final_logp)],
            schema=self.schema,
        )
        self._writer.write_table(table)

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self._flush()
        self._writer.close()
        return self._ctx.__exit__(exc_type, exc, tb)
