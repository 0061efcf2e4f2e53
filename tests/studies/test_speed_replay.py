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


def test_the_pairing_replayed_finds_gpu_bound_trials_steady_and_launch_bound_ones_not() -> None:
    """Batch-64 trials on the H100 (steps within 0.2% at either host state) are steady and need only
    their planned windows; the H200's launch-bound small-batch trials follow the host, never steady.
    The headline speedups stay within 1% of the recorded ones."""
    gpu_bound = replay_witness.replay(
        pd.read_parquet(REPO / "studies/speed/results/one_gpu_h100_fixed/forkserver/results.parquet"), 16)
    steady = gpu_bound[gpu_bound["state_now"] == "steady"]
    assert len(steady) >= 5 and (steady["needed_now"] == 16).sum() >= 4
    assert (steady["timed"] > 16).sum() >= 4  # windows the host's state added then
    r1 = REPO / "studies/decisive/results/final/r1/results.parquet"
    launch_bound = replay_witness.replay(pd.read_parquet(r1), 10)
    assert (launch_bound["state_now"] != "steady").all()
    compiled = gpu_bound.dropna(subset=["speedup_now"])
    assert ((compiled["speedup_now"] / compiled["speedup_then"] - 1).abs() < 0.01).all()
