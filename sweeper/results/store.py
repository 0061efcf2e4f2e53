"""Results on disk: rows to an Arrow table, atomic Parquet writes, and reading many runs back.

No torch, no Ray: a report can be rebuilt anywhere from Parquet files copied off a cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sweeper.results.files import atomic_write_bytes
from sweeper.results.schema import (BOOL, COLUMNS, COLUMN_NAMES, FLOAT, INT, STR, TIMESTAMP, Kind,
                                    ResultsError, normalize_row)

log = logging.getLogger(__name__)

RESULTS_FILE = "results.parquet"
MANIFEST_FILE = "sweep.json"

ARROW_TYPES: dict[Kind, pa.DataType] = {STR: pa.string(), FLOAT: pa.float64(), INT: pa.int64(), BOOL: pa.bool_(),
                                        TIMESTAMP: pa.timestamp("us", tz="UTC")}
"""The Arrow type of each column kind of the row contract (results.schema)."""
SCHEMA = pa.schema([pa.field(c.name, ARROW_TYPES[c.kind]) for c in COLUMNS])
_TIMESTAMP_COLUMNS = [c.name for c in COLUMNS if c.kind == TIMESTAMP]


def rows_to_table(rows: Iterable[dict[str, Any]]) -> pa.Table:
    """Rows checked against the schema (ValueError naming the column), as one Arrow table."""
    rows = [normalize_row(r) for r in rows]
    for r in rows:
        for k in _TIMESTAMP_COLUMNS:
            if isinstance(r[k], str):
                r[k] = pd.Timestamp(r[k]).to_pydatetime()
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write all rows to `path` atomically: a crash leaves the previous file intact."""
    sink = pa.BufferOutputStream()
    pq.write_table(rows_to_table(rows), sink, compression="zstd")
    atomic_write_bytes(path, sink.getvalue().to_pybytes())


def _read_one(path: Path) -> pd.DataFrame:
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise ResultsError(f"{path}: not a readable Parquet file ({str(e).splitlines()[0]})") from None
    missing_id = {"sweep_id", "trial_id", "status"} - set(table.column_names)
    if missing_id:
        raise ResultsError(f"{path}: not a sweeper results file (no {', '.join(sorted(missing_id))} column)")
    df = table.to_pandas()
    for name in COLUMN_NAMES:  # files from older versions lack newer columns
        if name not in df.columns:
            df[name] = pd.Series([None] * len(df), dtype="object")
    return df


def find_result_files(paths: Iterable[str | Path]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.rglob("*.parquet") if not f.name.startswith("."))
            if not found:
                raise ResultsError(f"{p}: no .parquet files in this directory")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            raise ResultsError(f"{p}: no such file or directory")
    return files


def read_results(paths: Iterable[str | Path]) -> pd.DataFrame:
    """Rows of every results file under `paths`; the same trial of the same sweep once."""
    files = find_result_files(paths)
    frames = [_read_one(f) for f in files]
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMN_NAMES)
    before = len(df)
    df = df.drop_duplicates(subset=["sweep_id", "trial_id"], keep="last").reset_index(drop=True)
    if len(df) < before:
        log.info("dropped %d duplicate rows (same sweep_id and trial_id)", before - len(df))
    return df
