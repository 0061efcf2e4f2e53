"""The row contract: column kinds, `check_row`, and its use where rows are written."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from sweeper.results.schema import ARROW_TYPE_NAMES, COLUMNS, check_row
from sweeper.results.store import ARROW_TYPES, SCHEMA, read_results, write_rows


def test_every_kind_maps_to_the_arrow_type_the_readme_names():
    assert {str(ARROW_TYPES[k]) for k in ARROW_TYPE_NAMES} == set(ARROW_TYPE_NAMES.values())
    assert all(str(ARROW_TYPES[k]) == name for k, name in ARROW_TYPE_NAMES.items())
    assert [(f.name, str(f.type)) for f in SCHEMA] == [(c.name, c.arrow_type_name) for c in COLUMNS]


def test_a_row_of_every_kind_passes():
    check_row({"sweep_id": "s", "batch_size": 8, "seq_len": 128.0, "compile_s": 1, "speedup_vs_eager": 1.5,
               "dynamic": None, "accuracy_ok": True, "started_at": "2025-01-01T00:00:00+00:00",
               "finished_at": datetime(2025, 1, 1, tzinfo=UTC), "break_even_iters": float("inf")})


@pytest.mark.parametrize(("row", "column", "words"), [
    ({"no_such_column": 1}, "no_such_column", "not in the results schema"),
    ({"batch_size": "8"}, "batch_size", "should be int, got str"),
    ({"batch_size": 8.5}, "batch_size", "should be int, got float"),
    ({"batch_size": True}, "batch_size", "should be int, got bool"),
    ({"compile_s": "1.0"}, "compile_s", "should be float, got str"),
    ({"accuracy_ok": 1}, "accuracy_ok", "should be bool, got int"),
    ({"model": 3}, "model", "should be str, got int"),
    ({"started_at": 1.0}, "started_at", "should be timestamp, got float"),
])
def test_a_row_that_breaks_the_contract_is_refused_naming_the_column(row, column, words):
    with pytest.raises(ValueError, match=f"'{column}'") as err:
        check_row(row)
    assert words in str(err.value)


def test_the_store_refuses_a_bad_row_and_writes_nothing(tmp_path: Path):
    path = tmp_path / "results.parquet"
    write_rows(path, [{"sweep_id": "s", "trial_id": "t", "status": "ok", "batch_size": 8}])
    with pytest.raises(ValueError, match="'batch_size'"):
        write_rows(path, [{"sweep_id": "s", "trial_id": "u", "status": "ok", "batch_size": "eight"}])
    assert list(read_results([path]).trial_id) == ["t"]
