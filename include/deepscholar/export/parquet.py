"""The Parquet files' column types: the warehouse's own, so a file says what a column is even when this
month left it empty.

Design notes: docs/MODULE_NOTES.md, `deepscholar.export.parquet`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["PYTHON_COLUMNS", "arrow_types", "write_parquet"]

# PostgreSQL type OIDs -> Arrow type names (pyarrow's constructors), for the types the exported SQL yields.
_PG_TYPES = {
    16: "bool_", 20: "int64", 21: "int64", 23: "int64", 700: "float64", 701: "float64", 1700: "float64",
    25: "large_string", 1043: "large_string", 1042: "large_string", 19: "large_string", 114: "large_string",
    3802: "large_string", 1184: "timestamp_utc", 1114: "timestamp", 1082: "date32",
}
# Columns the exporter computes in Python (export/writer.py, metrics_frame): their type by declaration.
PYTHON_COLUMNS = {
    "license": "large_string", "redistributable": "bool_", "text_withheld": "large_string",
    "metric": "large_string", "family": "large_string", "dimension": "large_string", "position": "int64",
    "label": "large_string", "headline_variant": "large_string", "variants": "large_string",
    "bounded": "bool_", "in_geometric_mean": "bool_", "ranks_track": "large_string",
}


def _arrow(name: str) -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]

    if name == "timestamp_utc":
        return pa.timestamp("us", tz="UTC")
    if name == "timestamp":
        return pa.timestamp("us")
    return getattr(pa, name)()


def arrow_types(description: Any) -> dict[str, str]:
    """{column: Arrow type name} from a DB-API cursor description (PostgreSQL type OIDs); a type not listed
    is left to inference (none of the exported queries yields one: tests/integration/test_export_dataset.py)."""
    return {col[0]: _PG_TYPES[col[1]] for col in description or () if col[1] in _PG_TYPES}


def write_parquet(frame: pd.DataFrame, path: Path, types: dict[str, str]) -> None:
    """Write `frame` with every column of `types` (else PYTHON_COLUMNS) at that type; values are unchanged
    (an integer column read back as floats because of gaps is cast back, exactly)."""
    import pyarrow as pa
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    table = pa.Table.from_pandas(frame, preserve_index=False)
    fields = []
    for f in table.schema:
        wanted = types.get(f.name) or PYTHON_COLUMNS.get(f.name)
        fields.append(pa.field(f.name, _arrow(wanted) if wanted else f.type))
    schema = pa.schema(fields, metadata=table.schema.metadata)
    if schema != table.schema:
        table = table.cast(schema)
    pq.write_table(table, path, compression="snappy")
