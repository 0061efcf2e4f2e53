"""The sweep's closing baseline line, on rows measured on the H200 (committed with their studies)."""

from __future__ import annotations

import sweeper
from sweeper.api.summary import baseline_check, host_build_lines
from tests.helpers import REPO


def test_a_sweep_whose_baselines_agree_says_its_speedups_are_established():
    line = baseline_check(sweeper.load(REPO / "studies/generate/results/smoke").df)
    assert line.startswith("baseline check: 3 compiled rows checked")
    assert "0 drift past their limit" in line and line.endswith("every one is established")


def test_a_sweep_with_drifted_baselines_names_each_row_and_says_which_are_not_established():
    # the ungated arm's second repeat on the H200: one side of a row ran slow throughout
    lines = baseline_check(sweeper.load(REPO / "studies/decisive/results/ungated/r2").df).splitlines()
    assert lines[0].endswith(": 1 between processes at one host speed (their intervals span both speedups), "
                             "1 not established") and "0 drift" not in lines[0]
    drifted = int(lines[0].split(", ")[1].split()[0])
    assert drifted == len(lines) - 1 == 2
    assert all("in-trial eager" in line and "limit" in line for line in lines[1:])
    blocked = [line for line in lines[1:] if line.endswith("speedup not established")]
    assert len(blocked) == 1 and "ran slow through one side" in blocked[0] and blocked[0].startswith("  vit_tiny")
    assert all("between processes" in line and "; interval " in line for line in lines[1:] if line not in blocked)


def test_models_nobody_tuned_for_drift_between_processes_only():
    # the any-model sweep on the H200: three launch-bound vision rows drift, each at one host speed
    lines = baseline_check(sweeper.load(REPO / "studies/anymodel/results/sweep").df).splitlines()
    assert lines[0].endswith("3 drift past their limit (5% / 9%): 3 between processes at one host speed "
                             "(their intervals span both speedups)")
    assert all(line.lstrip().startswith("timm:") and "between processes" in line for line in lines[1:])


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


def test_a_factory_built_on_the_host_after_failing_on_the_device_gets_one_line_per_model():
    why = "failed under cuda:0 (TypeError: can't convert cuda:0 device type tensor to numpy.)"
    rows = [{"model": "mine", "model_built_on": f"host: {why}"}, {"model": "mine", "model_built_on": f"host: {why}"},
            {"model": "zoo", "model_built_on": "device"}, {"model": "cpu", "model_built_on": "host"},
            {"model": "old"}]
    assert host_build_lines(rows) == [f"model mine: built on the host in 2 trial(s), its code {why}; built on the "
                                      "device it would build faster (docs/writing-specs.md)"]
