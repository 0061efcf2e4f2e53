"""The sweep's closing baseline line, on rows measured on the H200 (committed with their studies)."""

from __future__ import annotations

import sweeper
from sweeper.api.summary import baseline_check
from tests.helpers import REPO


def test_a_sweep_whose_baselines_agree_says_its_speedups_are_established():
    line = baseline_check(sweeper.load(REPO / "studies/generate/results/smoke").df)
    assert line.startswith("baseline check: 3 compiled rows checked")
    assert "0 drift past their limit" in line and line.endswith("every one is established")


def test_a_sweep_with_drifted_baselines_names_each_row_and_says_not_established():
    lines = baseline_check(sweeper.load(REPO / "studies/anymodel/results/sweep").df).splitlines()
    assert lines[0].endswith("their speedup is not established") and "0 drift" not in lines[0]
    drifted = int(lines[0].split(", ")[1].split()[0])
    assert drifted == len(lines) - 1 > 0
    assert all("in-trial eager" in line and "limit" in line for line in lines[1:])
