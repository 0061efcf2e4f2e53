"""The replay benchmark's arithmetic (hypervolume, front, grid order) on hand-made points, and a
short replay of a committed H200 sweep through the searchers `sweeper run` uses."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from studies.search import replay as bench
from studies.search.replay_table import generated_table
from tests.helpers import REPO


def test_hypervolume_of_hand_made_fronts():
    assert bench.hypervolume([(0.5,)], (1.0,)) == pytest.approx(0.5)
    assert bench.hypervolume([(0.0, 0.5), (0.5, 0.0)], (1.0, 1.0)) == pytest.approx(0.75)
    assert bench.hypervolume([(0.0, 0.0, 0.0)], (1.0, 2.0, 3.0)) == pytest.approx(6.0)
    cubes = [(0.0, 0.5, 0.5), (0.5, 0.0, 0.5), (0.5, 0.5, 0.0)]
    assert bench.hypervolume(cubes, (1.0, 1.0, 1.0)) == pytest.approx(3 * 0.25 - 3 * 0.125 + 0.125)
    assert bench.hypervolume([(2.0, 0.0)], (1.0, 1.0)) == 0.0
    assert sorted(bench.front([(0, 1), (1, 0), (1, 1), (0, 1)])) == [(0, 1), (0, 1), (1, 0)]


def test_generated_table_is_a_full_study_in_grid_order():
    df = generated_table()
    assert len(df) == 520 and df.trial_id.is_unique and (df["mode"] == "eager").sum() == 40
    assert bench.grid_order(df).trial_id.tolist() == df.trial_id.tolist()  # generated in grid order
    ok = df[df.status == "ok"]
    assert ok.throughput_items_s.gt(0).all() and ok.peak_mem_gib.gt(0).all()


def test_a_short_replay_of_the_h200_smoke_sweep():
    df = pd.read_parquet(REPO / "studies" / "gpu_smoke" / "results" / "results.parquet")
    s = bench.study("smoke", df, seeds=2, search_share=1.0)
    assert s["settings"] == 48 and s["eager"] == 16
    for algorithm, curves in s["curves"].items():
        for c in curves:
            assert np.all(np.diff(c) >= -1e-12) and len(c) == 48, algorithm  # every trial, once
            assert c[-1] == pytest.approx(1.0)  # the whole table holds the whole front


def test_search_front_compares_a_search_with_its_grid(tmp_path):
    from studies.search import front as search_front

    grid = REPO / "studies" / "gpu_smoke" / "results"
    spec = REPO / "studies" / "search" / "search.yaml"
    rows = pd.read_parquet(grid / "results.parquet")
    fastest = rows.loc[rows.throughput_items_s.idxmax(), "trial_id"]  # on any front with throughput max
    for name, part in (("all", rows), ("without_fastest", rows[rows.trial_id != fastest])):
        (tmp_path / name).mkdir()
        part.to_parquet(tmp_path / name / "results.parquet")
    whole = "\n".join(search_front.compare(spec, tmp_path / "all", grid, seeds=1))
    assert "**100.0%** of the grid front's hypervolume" in whole and "| no |" not in whole
    lines = search_front.compare(spec, tmp_path / "without_fastest", grid, seeds=1)
    share = float(lines[2].split("**")[1].rstrip("%"))
    assert 0 < share < 100
    assert sum(line.endswith("| no |") for line in lines) == 1
