"""The sweep's baseline self-check: in-trial eager against the eager trial of its context, and the
reported interval over an unstable baseline."""

from __future__ import annotations

import pandas as pd
import pytest

from sweeper.analysis.drift import baseline_drift_pct


def test_baseline_drift_compares_in_trial_eager_with_the_eager_trial_of_its_context():
    base = {"sweep_id": "s", "model": "m", "phase": "infer", "precision": "bf16", "seq_len": None,
            "workload": None, "bucketing": "none", "device_name": "H200", "matmul_precision": "high", "status": "ok"}
    rows = [
        {**base, "mode": "eager", "batch_size": 64, "throughput_items_s": 100.0, "eager_throughput_items_s": 100.0},
        {**base, "mode": "reduce-overhead", "batch_size": 64, "throughput_items_s": 400.0,
         "eager_throughput_items_s": 50.0},  # its baseline ran at half speed: a neighbour's doing
        {**base, "mode": "default", "batch_size": 64, "throughput_items_s": 150.0, "eager_throughput_items_s": 102.0},
        {**base, "mode": "default", "batch_size": 8, "throughput_items_s": 15.0, "eager_throughput_items_s": 10.0},
        {**base, "sweep_id": "other", "mode": "default", "batch_size": 64, "throughput_items_s": 1.0,
         "eager_throughput_items_s": 1.0},
    ]
    drift = baseline_drift_pct(pd.DataFrame(rows))
    assert pd.isna(drift[0]) and drift[1] == pytest.approx(-50.0) and drift[2] == pytest.approx(2.0)
    assert pd.isna(drift[3]) and pd.isna(drift[4])  # no eager trial of that batch / in that sweep


def _context_rows(eager_spread_pct: float, in_trial_eager_items_s: float) -> pd.DataFrame:
    base = {"sweep_id": "s", "model": "m", "phase": "infer", "precision": "bf16", "seq_len": None, "batch_size": 64,
            "workload": None, "bucketing": "none", "device_name": "H200", "matmul_precision": "high", "status": "ok"}
    return pd.DataFrame([
        {**base, "mode": "eager", "throughput_items_s": 100.0, "eager_throughput_items_s": 100.0,
         "throughput_spread_pct": eager_spread_pct, "speedup_vs_eager": 1.0, "speedup_ci_low": 1.0,
         "speedup_ci_high": 1.0},
        {**base, "mode": "reduce-overhead", "throughput_items_s": 300.0,
         "eager_throughput_items_s": in_trial_eager_items_s,
         "speedup_vs_eager": 300.0 / in_trial_eager_items_s, "speedup_ci_low": 300.0 / in_trial_eager_items_s * 0.98,
         "speedup_ci_high": 300.0 / in_trial_eager_items_s * 1.02},
    ])


def test_reported_interval_widens_over_an_unstable_baseline_and_reaches_the_eager_trial():
    from sweeper.analysis.drift import eager_trial_speedup, reported_interval
    from sweeper.analysis.floors import RUN_TO_RUN_FLOOR, UNSTABLE_BASELINE_FLOOR
    from sweeper.measure.timing import IN_TRIAL_FLOOR

    assert IN_TRIAL_FLOOR < RUN_TO_RUN_FLOOR < UNSTABLE_BASELINE_FLOOR
    stable = _context_rows(eager_spread_pct=1.0, in_trial_eager_items_s=100.0)
    low, high = reported_interval(stable)
    assert (low[1], high[1]) == pytest.approx((3.0 * (1 - RUN_TO_RUN_FLOOR), 3.0 * (1 + RUN_TO_RUN_FLOOR)))
    assert (low[0], high[0]) == (1.0, 1.0)  # the eager trial is its own baseline: no interval added
    unstable = _context_rows(eager_spread_pct=30.0, in_trial_eager_items_s=100.0)
    low, high = reported_interval(unstable)
    assert (low[1], high[1]) == pytest.approx((3.0 * (1 - UNSTABLE_BASELINE_FLOOR),
                                               3.0 * (1 + UNSTABLE_BASELINE_FLOOR)))
    drifted = _context_rows(eager_spread_pct=1.0, in_trial_eager_items_s=60.0)  # in-trial baseline slowed: 5x
    assert eager_trial_speedup(drifted)[1] == pytest.approx(3.0) and pd.isna(eager_trial_speedup(drifted)[0])
    low, high = reported_interval(drifted)
    assert low[1] == pytest.approx(3.0) and high[1] == pytest.approx(5.0 * (1 + RUN_TO_RUN_FLOOR))
    wide = stable.assign(speedup_ci_low=[1.0, 2.0], speedup_ci_high=[1.0, 4.0])  # a wider in-trial interval stands
    assert tuple(reported_interval(wide)[0]) == pytest.approx((1.0, 2.0))
    no_interval = stable.assign(speedup_ci_low=[1.0, None], speedup_ci_high=[1.0, None])
    assert pd.isna(reported_interval(no_interval)[0][1]) and pd.isna(reported_interval(no_interval)[1][1])


def test_a_rows_own_eager_spread_wins_over_the_eager_trials():
    from sweeper.analysis.drift import baseline_spread_pct, reported_interval
    from sweeper.analysis.floors import RUN_TO_RUN_FLOOR

    rows = _context_rows(eager_spread_pct=30.0, in_trial_eager_items_s=100.0).assign(eager_spread_pct=[30.0, 1.0])
    assert baseline_spread_pct(rows)[1] == pytest.approx(1.0)
    low, high = reported_interval(rows)
    assert (low[1], high[1]) == pytest.approx((3.0 * (1 - RUN_TO_RUN_FLOOR), 3.0 * (1 + RUN_TO_RUN_FLOOR)))


def test_the_drift_limit_widens_to_twice_the_combined_error_of_the_two_medians_compared():
    from sweeper.analysis.drift import DRIFT_LIMIT_PCT, SE_FACTOR, drift_limit_pct
    from sweeper.analysis.floors import RUN_TO_RUN_FLOOR

    rows = _context_rows(eager_spread_pct=1.0, in_trial_eager_items_s=93.0)  # a stable baseline, 7% off
    assert drift_limit_pct(rows)[1] == pytest.approx(max(DRIFT_LIMIT_PCT, RUN_TO_RUN_FLOOR * 100))  # no errors
    precise = rows.assign(eager_median_se_pct=[1.0, 1.0])
    assert drift_limit_pct(precise)[1] == pytest.approx(max(DRIFT_LIMIT_PCT, RUN_TO_RUN_FLOOR * 100))
    noisy = rows.assign(eager_median_se_pct=[3.0, 4.0])  # the eager trial's median +-3%, the row's +-4%
    assert drift_limit_pct(noisy)[1] == pytest.approx(SE_FACTOR * 5.0)
    from sweeper.analysis.frames import prepare

    assert prepare(precise)["drift_cause"][1] is not None  # 7% past a 5% limit: not established
    assert prepare(noisy)["drift_cause"][1] is None  # inside what the two medians' own noise allows
