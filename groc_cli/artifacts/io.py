"""Parquet and JSON files with their provenance: written with it (as JSON in a Parquet schema's
metadata, as Hugging Face `datasets` does), and read back only after checking that each is the
file groc wrote there."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from ..console import strict_json
from ..errors import DamagedInput, first_line
from ..json_input import parse_json
from ..version import __version__
from .atomic import atomic_file

METADATA_KEY = b"groc"


def provenance(stage: str, **fields: Any) -> dict:
    return {"tool": "groc", "version": __version__, "stage": stage, **fields}


def _with_provenance(schema: pa.Schema, meta: dict) -> pa.Schema:
    return schema.with_metadata({**(schema.metadata or {}), METADATA_KEY: strict_json(meta, sort_keys=True).encode()})


def write_parquet(table: pa.Table, path: Path, meta: dict, row_group_size: int | None = None) -> None:
    """Write `table` to `path` with `meta` as JSON in the schema metadata (not atomic: use inside atomic_*)."""
    table = table.replace_schema_metadata(_with_provenance(table.schema, meta).metadata)
    pq.write_table(table, path, row_group_size=row_group_size, compression="zstd")


def parquet_writer(path: Path, schema: pa.Schema, meta: dict) -> pq.ParquetWriter:
    """A writer for a table too large to hold, one row group at a time; with the same row groups
    it writes the same bytes as write_parquet (not atomic: use inside atomic_*)."""
    return pq.ParquetWriter(path, _with_provenance(schema, meta), compression="zstd")


def read_metadata(path: Path) -> dict:
    """The provenance a groc Parquet file records ({} for none); a ValueError when it is not JSON
    groc could have written (``parse_json``)."""
    schema = pq.read_schema(path)
    raw = (schema.metadata or {}).get(METADATA_KEY)
    return parse_json(raw) if raw else {}


def open_parquet(path: Path, columns: dict[str, Callable[[pa.DataType], bool]], rebuild: str) -> pq.ParquetFile:
    """A Parquet file that an earlier stage wrote, opened by its footer only, with each of `columns`
    present and of a type its test accepts. A missing, truncated or foreign file (valid Parquet
    with another schema) is one DamagedInput naming it and `rebuild`, the command that writes it."""
    path = Path(path)
    if not path.is_file():
        raise DamagedInput(path, "is missing", rebuild)
    try:
        handle = pq.ParquetFile(path)
        schema = handle.schema_arrow
    except (pa.ArrowException, OSError) as exc:
        raise DamagedInput(path, f"is not a readable Parquet file ({first_line(exc)})", rebuild) from None
    for name, accepts in columns.items():
        if name not in schema.names or not accepts(schema.field(name).type):
            have = ", ".join(f"{f.name} {f.type}" for f in list(schema)[:6]) + (", ..." if len(schema) > 6 else "")
            raise DamagedInput(path, f"is not the file groc wrote here: no column {name!r} of the right type "
                               f"(it has: {have})", rebuild)
    return handle


def read_parquet(path: Path, columns: dict[str, Callable[[pa.DataType], bool]], rebuild: str) -> pa.Table:
    """`columns` of the Parquet file at `path`, checked as `open_parquet` does; damage inside the
    data pages, which the footer does not show, is the same one-line DamagedInput."""
    handle = open_parquet(path, columns, rebuild)
    try:
        return handle.read(columns=list(columns))
    except (pa.ArrowException, OSError) as exc:
        raise DamagedInput(path, f"is damaged ({first_line(exc)})", rebuild) from None


def parquet_checksum(schema: pa.Schema) -> str | None:
    """The dataset checksum a groc Parquet file records in its provenance, if any."""
    raw = (schema.metadata or {}).get(METADATA_KEY)
    try:
        return parse_json(raw).get("checksum") if raw else None
    except (ValueError, AttributeError):
        return None


def write_json(obj: Any, path: Path) -> None:
    with atomic_file(path, "w") as handle:
        handle.write(strict_json(obj, indent=2, sort_keys=True) + "\n")


def read_json(path: Path, what: str, rebuild: str = "recreate it") -> dict:
    """The JSON object in `path`; `rebuild` names the command that writes it again."""
    try:
        data = parse_json(Path(path).read_bytes())
    except FileNotFoundError:
        raise DamagedInput(path, f"({what}) is missing", rebuild) from None
    except ValueError as exc:
        raise DamagedInput(path, f"({what}) is not JSON groc wrote ({first_line(exc)})", rebuild) from None
    if not isinstance(data, dict):
        raise DamagedInput(path, f"({what}) holds a JSON {type(data).__name__}, not an object", rebuild)
    return data
