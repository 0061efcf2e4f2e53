"""Result files written before the stream columns existed still read."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sweeper.report import page as report
from sweeper.results.schema import COLUMN_NAMES
from sweeper.results.store import read_results


def test_old_result_files_without_stream_columns_still_read(tmp_path: Path) -> None:
    old = pa.table({"sweep_id": ["s"], "trial_id": ["t"], "status": ["ok"], "model": ["m"]})
    pq.write_table(old, tmp_path / "old.parquet")
    df = read_results([tmp_path])
    assert set(COLUMN_NAMES) <= set(df.columns)
    assert df["bucketing"].isna().all() and df["fell_back_to_eager"].isna().all()
    assert "Input stream" not in report.build_html(df)
