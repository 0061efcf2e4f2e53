"""The one missing-value test of the analysis side, and the yes/no cells built on it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sweeper.analysis.frames import flag, fmt_num, is_missing, prepare


@pytest.mark.parametrize("value", [None, pd.NA, pd.NaT, float("nan"), np.float64("nan"), np.float32("nan")])
def test_missing_values(value):
    assert is_missing(value) and flag(value) is None and fmt_num(value) == "—"


@pytest.mark.parametrize("value", [0, 0.0, "", "nan text", False, float("inf"), [], np.int64(3)])
def test_values_that_are_there(value):
    assert not is_missing(value)


def test_yes_no_cells_become_nullable_booleans():
    df = prepare(pd.DataFrame({"accuracy_ok": [True, None, np.nan, 0, pd.NA], "status": ["ok"] * 5}))
    assert df["accuracy_ok"].dtype == "boolean"
    assert df["accuracy_ok"].tolist() == [True, pd.NA, pd.NA, False, pd.NA]
