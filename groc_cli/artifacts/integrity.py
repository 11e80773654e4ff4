"""Integrity records: the size and SHA-256 of a file an earlier stage wrote, checked on every read
(GUIDE 15). A large file (a dump's multi-GB hidden states) is hashed in a fixed sample of blocks."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


#: A file up to WHOLE_BYTES is hashed whole; a larger one (a dump's multi-GB hidden states) in
#: SAMPLE_BLOCKS blocks of SAMPLE_BLOCK bytes spread evenly over it, first and last included, so
#: checking it on every read costs a fixed 16 MiB, not a pass over the file.
WHOLE_BYTES = 256 << 20
SAMPLE_BLOCKS = 256
SAMPLE_BLOCK = 64 << 10


def integrity_record(path: Path) -> dict:
    """Size and SHA-256 of ``path`` (whole, or of a fixed sample of blocks: ``sampled_blocks`` > 0)."""
    size = Path(path).stat().st_size
    blocks = 0 if size <= WHOLE_BYTES else SAMPLE_BLOCKS
    return {"bytes": size, "sha256": _sampled_sha256(path, size, blocks, SAMPLE_BLOCK), "sampled_blocks": blocks,
            "block_bytes": SAMPLE_BLOCK}


def integrity_problem(path: Path, record: Any) -> str | None:
    """What is wrong with ``path`` against its ``integrity_record`` (None: it matches); the record's
    own sampling is used, so a record written with other constants is still checked as written."""
    try:
        size, digest = int(record["bytes"]), str(record["sha256"])
        blocks, block = int(record["sampled_blocks"]), int(record["block_bytes"])
    except (KeyError, TypeError, ValueError):
        return "has an integrity record in meta.json that is not one groc writes"
    actual = Path(path).stat().st_size
    if actual != size:
        return f"holds {actual:,} bytes, but meta.json records {size:,}"
    if blocks < 0 or block < 1 or _sampled_sha256(path, size, blocks, block) != digest:
        how = f"in {blocks} sampled blocks" if blocks else "as a whole"
        return f"does not match the SHA-256 meta.json records ({how}): it changed after it was written"
    return None


def _sampled_sha256(path: Path, size: int, blocks: int, block: int) -> str:
    if blocks == 0:
        return sha256_file(path)
    digest = hashlib.sha256()
    last = max(size - block, 0)
    with open(path, "rb") as handle:
        for k in range(blocks):
            handle.seek(last * k // max(blocks - 1, 1))
            digest.update(handle.read(block))
    return digest.hexdigest()
