"""Per-token tables of records in the records' format: float32 log-probabilities, and no ``final_logp``
column where it equals ``model_logp`` (an evaluation without a cache). ``groc eval --per-token`` writes
float64 and both columns; a record keeps what its reports read at a third of the size
(docs/records/README.md). Rewrites each table in place (written aside, then moved), keeping its
metadata; a table already slim is left as it is.

    python recipes/lib/slim_records.py docs/records/converge/groc-add   # every per-token table below it
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

LOGP = ("model_logp", "final_logp")


def slim(path: Path) -> bool:
    """Slim one per-token table; False if it is not one (no model_logp) or is already slim."""
    schema = pq.read_schema(path)
    if "model_logp" not in schema.names:
        return False
    table = pq.read_table(path)
    if "final_logp" in table.column_names and table["final_logp"].equals(table["model_logp"]):
        table = table.drop_columns(["final_logp"])
    changed = table.schema != schema.remove_metadata()
    for name in LOGP:
        if name in table.column_names and table.schema.field(name).type != pa.float32():
            i = table.column_names.index(name)
            table = table.set_column(i, pa.field(name, pa.float32()), table[name].cast(pa.float32()))
            changed = True
    if not changed:
        return False
    tmp = path.with_name(path.name + ".slim")
    pq.write_table(table.replace_schema_metadata(schema.metadata), tmp, compression="zstd")
    tmp.replace(path)
    return True


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for arg in argv:
        root = Path(arg)
        if not root.exists():
            print(f"slim_records: no such file or folder: {root}", file=sys.stderr)
            return 2
        for path in sorted([root] if root.is_file() else root.rglob("*.parquet")):
            if slim(path):
                print(f"slimmed {path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
