"""The sweep's closing baseline line, on rows measured on the H200 (committed with their studies)."""

from __future__ import annotations

import sweeper
from sweeper.api.summary import baseline_check
from tests.helpers import REPO


def test_a_sweep_whose_baselines_agree_says_its_speedups_are_established():
    line = baseline_check(sweeper.load(REPO / "studies/generate/results/smoke").df)
    assert line.startswith("baseline check: 3 compiled rows checked")
    assert "0 drift past their limit" in line and line.endswith("every one is established")


def test_a_sweep_with_drifted_baselines_names_each_row_and_says_which_are_not_established():
    lines = baseline_check(sweeper.load(REPO / "studies/anymodel/results/sweep").df).splitlines()
    assert lines[0].endswith(": 4 between processes at one host speed (their intervals span both speedups), "
                             "1 not established") and "0 drift" not in lines[0]
    drifted = int(lines[0].split(", ")[1].split()[0])
    assert drifted == len(lines) - 1 == 5
    assert all("in-trial eager" in line and "limit" in line for line in lines[1:])
    blocked = [line for line in lines[1:] if line.endswith("speedup not established")]
    assert len(blocked) == 1 and "ran slow through one side" in blocked[0]  # vit_base default: no common state
    assert all("between processes" in line and "; interval " in line for line in lines[1:] if line not in blocked)


def test_drift_between_processes_at_one_host_speed_leaves_every_speedup_established():
    # an H100 host's repeat of the launch-bound sweep: each in-trial eager 9-16% off the other
    # processes' at the fast state; each interval spans both speedups and stays on one side of 1
    df = sweeper.load(REPO / "studies/decisive/results/h100/repeats/r2").df
    lines = baseline_check(df).splitlines()
    assert lines[0].endswith("4 drift past their limit (9%): 4 between processes at one host speed (their "
                             "intervals span both speedups)")
    from sweeper.analysis import ranking
    from sweeper.analysis.frames import prepare
    kinds = [ranking.standing(r).kind for _, r in prepare(df).iterrows() if r["mode"] != "eager"]
    assert sorted(kinds) == ["faster", "faster", "faster", "slower"]
