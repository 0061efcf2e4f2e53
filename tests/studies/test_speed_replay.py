"""Today's witness rules replayed on the H100 yardstick's recorded readings (studies/speed/replay_witness.py)."""

from __future__ import annotations

import pandas as pd

from studies.speed import replay_witness
from tests.helpers import REPO


def test_the_fluke_low_reference_no_longer_makes_every_later_window_slow() -> None:
    rows = pd.read_parquet(REPO / "studies/speed/results/one_gpu_h100/forkserver/results.parquet")
    t = replay_witness.replay(rows)
    assert len(t) == 20 and t["ref_then_ms"].min() < 0.94  # the fluke: 0.936 ms, set by the 12th trial
    late = t.iloc[11:]
    assert (late["slow_then_pct"] >= 90).sum() == 8  # then: 8 of the 9 later trials read (almost) all slow
    assert (late["slow_now_pct"] <= 25).all() and late["ref_now_ms"].min() > 1.2  # now: the host's median state
    assert (t["ref_now_ms"] >= t["ref_then_ms"] - 1e-4).all()  # never below the reference a trial had then
