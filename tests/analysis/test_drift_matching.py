"""The sweep's self-check at the same host speed: an eager trial that ran slow throughout is
compared by its slow-state figures, and a drift that remains names its cause."""

from __future__ import annotations

import pandas as pd
import pytest

from sweeper.analysis import drift, floors, host_state

BASE = {"sweep_id": "s", "model": "m", "phase": "infer", "precision": "bf16", "seq_len": None, "workload": None,
        "bucketing": "none", "device_name": "H200", "matmul_precision": "high", "status": "ok", "batch_size": 16,
        "hostname": "h", "witness_ref_ms": 1.0, "speedup_ci_low": 1.9, "speedup_ci_high": 2.1}


def _rows(eager_trial: dict, compiled: dict) -> pd.DataFrame:
    eager = {**BASE, "mode": "eager", "eager_spread_pct": 1.0, "host_state": "fast", **eager_trial}
    eager.setdefault("eager_throughput_items_s", eager["throughput_items_s"])
    row = {**BASE, "mode": "reduce-overhead", "eager_spread_pct": 1.0, "host_state": "fast", "witness_ms": 1.0,
           "eager_witness_ms": 1.0, **compiled}
    row["speedup_vs_eager"] = row["throughput_items_s"] / row["eager_throughput_items_s"]
    return pd.DataFrame([eager, row])


def test_both_sides_at_the_fast_state_compare_their_headlines():
    df = _rows({"throughput_items_s": 100.0, "witness_ms": 1.05},
               {"throughput_items_s": 200.0, "eager_throughput_items_s": 98.0})
    checked = drift.self_check(df)
    assert checked["baseline_drift_pct"][1] == pytest.approx(-2.0)
    assert checked["drift_state"][1] == "fast" and checked["drift_cause"][1] is None


def test_an_eager_trial_slow_throughout_is_compared_at_the_slow_state():
    # the eager trial ran at the host's slow state (witness 1.6x): 62.5 items/s; the compiled row's
    # baseline ran 100 items/s fast and 63 in its slow windows
    df = _rows({"throughput_items_s": 62.5, "witness_ms": 1.6, "host_state": "slow", "throughput_slow_items_s": 62.5},
               {"throughput_items_s": 200.0, "eager_throughput_items_s": 100.0,
                "eager_throughput_slow_items_s": 63.0, "throughput_slow_items_s": 190.0})
    checked = drift.self_check(df)
    assert checked["drift_state"][1] == "slow"
    assert checked["baseline_drift_pct"][1] == pytest.approx(0.8)  # 63 vs 62.5: no drift at one speed
    assert checked["eager_trial_speedup"][1] == pytest.approx(190.0 / 62.5)
    # compared as before (headline against headline), it read a 60% drift
    assert pytest.approx(60.0) == (100.0 / 62.5 - 1) * 100


def test_a_drift_without_a_common_state_names_the_host_as_its_cause():
    df = _rows({"throughput_items_s": 62.5, "witness_ms": 1.6, "host_state": "slow"},
               {"throughput_items_s": 200.0, "eager_throughput_items_s": 100.0})
    checked = drift.self_check(df)
    assert checked["drift_state"][1] == "mismatched"
    assert checked["baseline_drift_pct"][1] == pytest.approx(60.0)
    assert "ran slow through one side" in checked["drift_cause"][1]


def test_a_drift_at_one_speed_is_between_processes_and_a_neighbours_compile_is_named():
    df = _rows({"throughput_items_s": 100.0, "witness_ms": 1.0},
               {"throughput_items_s": 200.0, "eager_throughput_items_s": 80.0, "speedup_ci_low": 2.4,
                "speedup_ci_high": 2.6})
    checked = drift.self_check(df)  # 2.5x in the trial, 2.0x against the eager trial
    assert checked["drift_cause"][1] == "between processes: both sides ran at the host's fast speed"
    assert not checked["drift_blocks"][1]  # the in-trial ratio holds; the interval spans 200/100 too
    assert checked["speedup_low"][1] == pytest.approx(2.0) and checked["speedup_high"][1] >= 2.6
    df.loc[1, "host_busy_windows_pct"] = 40.0
    checked = drift.self_check(df)
    assert checked["drift_cause"][1] == "a neighbour trial compiled during 40% of the timed windows"
    assert checked["drift_blocks"][1]  # a compile beside the eager windows biases the ratio itself
    assert pd.isna(checked["drift_blocks"][0])  # the eager trial is checked against nothing


def test_a_drift_blocks_where_the_two_sides_ran_at_different_speeds_or_nothing_read_the_host():
    mismatched = _rows({"throughput_items_s": 62.5, "witness_ms": 1.6, "host_state": "slow"},
                       {"throughput_items_s": 200.0, "eager_throughput_items_s": 100.0})
    assert drift.self_check(mismatched)["drift_blocks"][1]
    unread = _rows({"throughput_items_s": 100.0}, {"throughput_items_s": 200.0, "eager_throughput_items_s": 80.0})
    unread = unread.drop(columns=["witness_ms", "eager_witness_ms", "witness_ref_ms", "host_state"])
    checked = drift.self_check(unread)
    assert checked["drift_cause"][1].startswith("unexplained: the row carries no host-speed reading")
    assert checked["drift_blocks"][1]
    slow = _rows({"throughput_items_s": 62.5, "witness_ms": 1.6, "host_state": "slow", "throughput_slow_items_s": 62.5},
                 {"throughput_items_s": 200.0, "eager_throughput_items_s": 100.0,
                  "eager_throughput_slow_items_s": 50.0, "throughput_slow_items_s": 190.0})
    checked = drift.self_check(slow)
    assert checked["drift_cause"][1] == "between processes: both sides ran at the host's slow speed"
    assert not checked["drift_blocks"][1]


def test_rows_without_witness_columns_are_checked_as_before():
    df = _rows({"throughput_items_s": 100.0}, {"throughput_items_s": 200.0, "eager_throughput_items_s": 90.0})
    df = df.drop(columns=["witness_ms", "eager_witness_ms", "witness_ref_ms", "host_state"])
    assert drift.self_check(df)["baseline_drift_pct"][1] == pytest.approx(-10.0)


def test_a_host_profile_replaces_the_floors(tmp_path):
    import json

    path = tmp_path / "host.json"
    path.write_text(json.dumps({"run_to_run_floor": 0.02, "unstable_baseline_floor": 0.05, "hostname": "h"}))
    df = _rows({"throughput_items_s": 100.0, "witness_ms": 1.0},
               {"throughput_items_s": 200.0, "eager_throughput_items_s": 100.0, "speedup_ci_low": 1.99,
                "speedup_ci_high": 2.01})
    wide = drift.self_check(df)["speedup_low"][1]
    with floors.host_floors(floors.read_profile(path)):
        narrow = drift.self_check(df)["speedup_low"][1]
    assert wide == pytest.approx(2.0 * (1 - floors.RUN_TO_RUN_FLOOR)) and narrow == pytest.approx(1.96)
    path.write_text("{}")
    with pytest.raises(ValueError, match=r"host profile .* is not readable"):
        floors.read_profile(path)


def test_an_eager_trial_timed_in_an_unusually_fast_stretch_no_longer_decides_its_context_alone():
    # the eager trial ran 2 s, in a fast stretch of the host; both compiled trials timed the same eager
    # step before their compile (uncompiled, other moments) and alternated with their compiled windows
    eager = {**BASE, "mode": "eager", "eager_spread_pct": 1.0, "host_state": "fast", "throughput_items_s": 1333.0,
             "eager_throughput_items_s": 1333.0, "witness_ms": 1.05}
    compiled = [{**BASE, "mode": mode, "eager_spread_pct": 1.0, "host_state": "fast", "witness_ms": 1.0,
                 "eager_witness_ms": 1.0, "throughput_items_s": 2000.0, "eager_throughput_items_s": in_trial,
                 "speedup_vs_eager": 2000.0 / in_trial} for mode, in_trial in (("default", 1140.0),
                                                                             ("reduce-overhead", 1150.0))]
    old = pd.DataFrame([eager, *compiled])
    checked = drift.self_check(old)  # rows without the figures of the eager windows before the compile
    assert checked["baseline_drift_pct"][1] == pytest.approx(-14.5, abs=0.1) and checked["drift_cause"][1]
    alone = old.assign(eager_alone_throughput_items_s=[None, 1160.0, 1145.0],
                       eager_alone_witness_ms=[None, 1.1, 1.0])
    checked = drift.self_check(alone)  # the median of 1333, 1160, 1145 and the other row's 1150: one
    assert checked["baseline_drift_pct"][1] == pytest.approx((1140.0 / 1155.0 - 1) * 100)  # stretch no longer decides
    assert checked["baseline_drift_pct"][2] == pytest.approx((1150.0 / 1152.5 - 1) * 100)  # its own 1150 left out
    assert checked["drift_state"][1] == "fast"
    assert checked["drift_cause"][1] is None and checked["drift_cause"][2] is None
    slow_alone = alone.assign(eager_alone_witness_ms=[None, 1.6, 1.6])  # before-compile windows at the slow state
    assert drift.self_check(slow_alone)["drift_cause"][1]  # not comparable: back to the eager trial


def test_the_consensus_counts_other_compiled_trials_in_trial_eager_but_never_the_rows_own():
    # r3 of the H200 reference arm, bert-base: the eager trial and one before-compile measurement at
    # the fast state; the other trial's before-compile windows ran slow. The two in-trial eager
    # figures agree with each other (935, 944) and sit 7-14% under the uncompiled ones
    eager = {**BASE, "mode": "eager", "eager_spread_pct": 1.0, "host_state": "fast", "throughput_items_s": 1010.6,
             "eager_throughput_items_s": 1010.6, "witness_ms": 1.0}
    compiled = [{**BASE, "mode": mode, "eager_spread_pct": 1.0, "host_state": "fast", "witness_ms": 1.0,
                 "eager_witness_ms": 1.0, "throughput_items_s": 5000.0, "eager_throughput_items_s": in_trial,
                 "speedup_vs_eager": 5000.0 / in_trial, "eager_alone_throughput_items_s": alone,
                 "eager_alone_witness_ms": alone_ms}
                for mode, in_trial, alone, alone_ms in (("default", 935.2, 1084.2, 1.0),
                                                        ("reduce-overhead", 943.6, 754.3, 2.0))]
    checked = drift.self_check(pd.DataFrame([eager, *compiled]))
    # row 1: median(1010.6, 1084.2, 943.6); row 2: median(1010.6, 1084.2, 935.2); the slow 754.3 never
    assert checked["baseline_drift_pct"][1] == pytest.approx((935.2 / 1010.6 - 1) * 100)
    assert checked["baseline_drift_pct"][2] == pytest.approx((943.6 / 1010.6 - 1) * 100)
    alone_only = pd.DataFrame([eager, compiled[0]])  # no other compiled row: the uncompiled ones alone
    assert drift.self_check(alone_only)["baseline_drift_pct"][1] == pytest.approx((935.2 / 1047.4 - 1) * 100)


def test_on_a_host_of_one_speed_the_state_split_does_not_decide():
    # the README's smoke sweep on a 2-core CPU: every witness reading 1.14-1.36x the fastest, one speed
    # with noise; the eager trial's median read 1.18x ("fast"), the compiled trial's 1.27x ("slow")
    eager = {**BASE, "mode": "eager", "eager_spread_pct": 1.0, "host_state": "fast", "throughput_items_s": 613.0,
             "eager_throughput_items_s": 613.0, "witness_ms": 1.18}
    row = {**BASE, "mode": "default", "eager_spread_pct": 1.0, "host_state": "slow", "witness_ms": 1.27,
           "eager_witness_ms": 1.27, "throughput_items_s": 380.0, "eager_throughput_items_s": 564.6,
           "speedup_vs_eager": 380.0 / 564.6, "eager_alone_throughput_items_s": 562.8, "eager_alone_witness_ms": 1.3}
    checked = drift.self_check(pd.DataFrame([eager, row]))
    assert checked["drift_state"][1] == "fast"  # the consensus of the uncompiled measurements: 613 and 562.8
    assert checked["baseline_drift_pct"][1] == pytest.approx((564.6 / 587.9 - 1) * 100)
    assert checked["drift_cause"][1] is None
    two_speeds = pd.DataFrame([eager, {**row, "eager_witness_ms": 1.6}])  # a reading of a second speed
    checked = drift.self_check(two_speeds)
    assert checked["drift_state"][1] == "mismatched"
    assert checked["baseline_drift_pct"][1] == pytest.approx((564.6 / 613.0 - 1) * 100)
    assert "ran slow through one side" in checked["drift_cause"][1]


def test_a_host_of_one_speed_is_read_from_every_timed_window():
    import json

    eager = {**BASE, "mode": "eager", "host_state": "fast", "throughput_items_s": 100.0, "witness_ms": 1.1}
    row = {**BASE, "mode": "default", "host_state": "slow", "witness_ms": 1.3, "eager_witness_ms": 1.3,
           "throughput_items_s": 200.0, "eager_throughput_items_s": 100.0}
    windows = {"eager_witness_ms": [1.2, 1.3, 1.3, 1.2], "compiled_witness_ms": [1.3, 1.2, 1.3, 1.3]}
    df = pd.DataFrame([eager, {**row, "windows_json": json.dumps(windows)}])
    assert host_state.read_fast(df, df["witness_ms"]).all()
    windows["compiled_witness_ms"] = [1.3, 2.2, 2.1, 1.3]  # half of one arm's windows at a second speed
    df = pd.DataFrame([eager, {**row, "windows_json": json.dumps(windows)}])
    assert host_state.read_fast(df, df["witness_ms"]).tolist() == [True, False]


def test_a_fast_state_drift_names_a_witness_that_read_the_host_slower_in_that_process():
    # both read "fast" (within the state's band), but the row's eager windows read the witness 8% slower
    # and ran 20% slower than the eager trial: a fast state of another speed, named; still between processes
    df = _rows({"throughput_items_s": 100.0, "witness_ms": 1.0},
               {"throughput_items_s": 200.0, "eager_throughput_items_s": 80.0, "eager_witness_ms": 1.08,
                "speedup_ci_low": 2.4, "speedup_ci_high": 2.6})
    checked = drift.self_check(df)
    assert checked["drift_state"][1] == "fast"
    assert checked["drift_cause"][1] == ("between processes: both sides ran at the host's fast speed; the host-speed "
                                         "witness read 8% slower in this trial's eager windows than in the eager "
                                         "trial's (a fast state of another speed)")
    assert not checked["drift_blocks"][1]
    # a witness gap against the drift's direction, or under WITNESS_GAP_PCT, explains nothing: not named
    for eager_witness_ms in (0.92, 1.02):
        df.loc[1, "eager_witness_ms"] = eager_witness_ms
        assert drift.self_check(df)["drift_cause"][1] == "between processes: both sides ran at the host's fast speed"
