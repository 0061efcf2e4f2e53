"""Pareto fronts against a brute-force reference on random tables with ties and NaNs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from sweeper.analysis import pareto
from sweeper.analysis.pareto import DEFAULT_OBJECTIVES, pareto_front

OBJECTIVE_SETS = [
    DEFAULT_OBJECTIVES,
    [("throughput_items_s", "max"), ("peak_mem_gib", "min")],
    [("throughput_items_s", "max"), ("compile_s", "min")],
    [("peak_mem_gib", "max"), ("compile_s", "max"), ("throughput_items_s", "min")],
]


def brute_force(df: pd.DataFrame, objectives, group_by) -> list[bool]:
    """The definition, written out: a row is on the front unless an eligible row of its group dominates it."""
    def value(r, name):
        v = r[name]
        if name == "compile_s" and r["mode"] == "eager" and (v is None or math.isnan(v)):
            return 0.0
        return v

    def ok(r) -> bool:
        if r["status"] != "ok" or r["accuracy_ok"] is False:
            return False
        return all(value(r, n) is not None and not math.isnan(value(r, n)) for n, _ in objectives)

    def better_or_equal(a, b, direction) -> bool:
        return a >= b if direction == "max" else a <= b

    def strictly_better(a, b, direction) -> bool:
        return a > b if direction == "max" else a < b

    records = df.to_dict("records")
    out = []
    for r in records:
        if not ok(r):
            out.append(False)
            continue
        same = [o for o in records if ok(o) and all(_same(o[k], r[k]) for k in group_by)]
        dominated = any(
            all(better_or_equal(value(o, n), value(r, n), d) for n, d in objectives)
            and any(strictly_better(value(o, n), value(r, n), d) for n, d in objectives)
            for o in same)
        out.append(not dominated)
    return out


def _same(a, b) -> bool:
    return (pd.isna(a) and pd.isna(b)) or a == b


def random_table(rng: np.random.Generator, n: int) -> pd.DataFrame:
    def col(levels: int, nan_rate: float) -> list[float]:
        vals = rng.integers(0, levels, n).astype(float)  # few levels: many ties
        vals[rng.random(n) < nan_rate] = np.nan
        return list(vals)

    return pd.DataFrame({
        "model": rng.choice(["a", "b"], n),
        "phase": rng.choice(["infer", "train"], n),
        "precision": ["fp32"] * n,
        "device_name": [None if x else "H200" for x in rng.random(n) < 0.2],
        "mode": rng.choice(["eager", "default", "max-autotune"], n),
        "status": rng.choice(["ok", "ok", "ok", "oom"], n),
        "accuracy_ok": [rng.choice([True, True, False, None]) for _ in range(n)],
        "throughput_items_s": col(4, 0.05),
        "peak_mem_gib": col(3, 0.05),
        "compile_s": col(3, 0.2),
    }, index=rng.permutation(n) * 3 + 7)  # an index that is neither sorted nor 0..n-1


@pytest.mark.parametrize("seed", range(40))
def test_matches_brute_force_on_random_tables(seed: int) -> None:
    rng = np.random.default_rng(seed)
    df = random_table(rng, int(rng.integers(0, 45)))
    objectives = OBJECTIVE_SETS[seed % len(OBJECTIVE_SETS)]
    for group_by in (pareto.DEFAULT_GROUP_BY, ("model",), ()):
        got = pareto_front(df, objectives, group_by)
        assert got.index.equals(df.index)
        assert got.dtype == bool
        assert got.tolist() == brute_force(df, objectives, group_by), (objectives, group_by)


def test_chunked_comparison_matches_brute_force(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pareto, "_CHUNK_CELLS", 7)  # force many small chunks
    rng = np.random.default_rng(123)
    df = random_table(rng, 60)
    got = pareto_front(df)
    assert got.tolist() == brute_force(df, DEFAULT_OBJECTIVES, pareto.DEFAULT_GROUP_BY)


def _table(points: list[tuple[float, float, float]], **extra) -> pd.DataFrame:
    n = len(points)
    base = {"model": ["m"] * n, "phase": ["infer"] * n, "precision": ["fp32"] * n, "device_name": ["g"] * n,
            "mode": ["default"] * n, "status": ["ok"] * n, "accuracy_ok": [True] * n,
            "throughput_items_s": [p[0] for p in points], "peak_mem_gib": [p[1] for p in points],
            "compile_s": [p[2] for p in points]}
    base.update(extra)
    return pd.DataFrame(base)


def test_identical_points_are_all_on_the_front() -> None:
    df = _table([(10, 1, 5), (10, 1, 5), (9, 1, 5)])
    assert pareto_front(df).tolist() == [True, True, False]


def test_equal_on_all_but_one_objective_is_dominated() -> None:
    df = _table([(10, 1, 5), (10, 1, 6), (10, 2, 5), (11, 3, 9)])
    assert pareto_front(df).tolist() == [True, False, False, True]


def test_two_objectives_staircase() -> None:
    df = _table([(1, 1, 0), (2, 2, 0), (3, 3, 0), (2, 3, 0), (1, 2, 0)])
    two = [("throughput_items_s", "max"), ("peak_mem_gib", "min")]
    assert pareto_front(df, two).tolist() == [True, True, True, False, False]


def test_failed_and_inaccurate_rows_are_never_on_the_front_nor_dominate() -> None:
    df = _table([(100, 0.1, 0), (100, 0.1, 0), (5, 5, 5)],
                status=["oom", "ok", "ok"], accuracy_ok=[True, False, True])
    assert pareto_front(df).tolist() == [False, False, True]


def test_unchecked_accuracy_may_be_on_the_front() -> None:
    df = _table([(10, 1, 1)], accuracy_ok=[None])
    assert pareto_front(df).tolist() == [True]


def test_eager_missing_compile_time_counts_as_zero() -> None:
    df = _table([(10, 1, math.nan), (10, 1, 0.5)], mode=["eager", "default"])
    assert pareto_front(df).tolist() == [True, False]


def test_compiled_row_missing_a_measurement_is_left_out() -> None:
    df = _table([(10, 1, math.nan), (5, 1, 1), (math.nan, 0.1, 0.1)])
    assert pareto_front(df).tolist() == [False, True, False]


def test_groups_are_separate_and_null_group_keys_form_a_group() -> None:
    df = _table([(10, 1, 1), (1, 9, 9), (1, 9, 9)], model=["a", "b", None])
    assert pareto_front(df).tolist() == [True, True, True]
    assert pareto_front(df, group_by=()).tolist() == [True, False, False]


def test_empty_and_missing_group_columns() -> None:
    empty = _table([])
    assert pareto_front(empty).tolist() == []
    df = _table([(1, 1, 1), (2, 1, 1)]).drop(columns=["device_name", "precision"])
    assert pareto_front(df).tolist() == [False, True]


def test_objective_errors_name_the_problem() -> None:
    df = _table([(1, 1, 1)])
    with pytest.raises(ValueError, match="latency"):
        pareto_front(df, [("latency", "min")])
    with pytest.raises(ValueError, match="direction"):
        pareto_front(df, [("compile_s", "lowest")])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="at least one"):
        pareto_front(df, [])


def test_non_dominated_on_all_permutations_of_a_small_grid() -> None:
    points = np.array(list(itertools.product([0, 1, 2], repeat=3)), dtype=float)
    keep = pareto.non_dominated(points)
    assert keep.tolist() == [p.tolist() == [0, 0, 0] for p in points]
