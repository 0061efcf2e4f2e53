"""Non-dominated (Pareto) sets of trial rows, one front per context group. Pure pandas/numpy.

A row is on the front of its group when no other eligible row of the group is at least as
good on every objective and strictly better on one. Identical points do not dominate each
other, so ties are all on the front. Eligible rows: status "ok", accuracy not known to be
wrong (accuracy_ok not False) and every objective measured. The compile time of an eager
row is 0 when it is missing: eager pays no compile.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd

from sweeper.analysis.frames import flag

log = logging.getLogger(__name__)

Direction = Literal["max", "min"]
Objective = tuple[str, Direction]

DEFAULT_OBJECTIVES: list[Objective] = [
    ("throughput_items_s", "max"),
    ("peak_mem_gib", "min"),
    ("compile_s", "min"),
]
DEFAULT_GROUP_BY: tuple[str, ...] = ("model", "phase", "precision", "device_name")

_CHUNK_CELLS = 4_000_000  # bound the chunk x n x k comparison block to a few MB


def pareto_front(
    df: pd.DataFrame,
    objectives: Sequence[Objective] = DEFAULT_OBJECTIVES,
    group_by: Sequence[str] = DEFAULT_GROUP_BY,
) -> pd.Series:
    """Boolean Series aligned with `df`: True where the row is on its group's front.

    Group keys missing from `df` are ignored; null group values form their own group.
    """
    _check_objectives(df, objectives)
    result = pd.Series(False, index=df.index, dtype=bool)
    if df.empty:
        return result
    cost = _cost_matrix(df, objectives)
    ok = eligible(df) & ~np.isnan(cost).any(axis=1)
    positions = np.flatnonzero(ok.to_numpy())
    if positions.size == 0:
        return result
    keys = [k for k in group_by if k in df.columns]
    groups = (
        df.iloc[positions].groupby(keys, dropna=False, sort=False).indices
        if keys else {None: np.arange(positions.size)}
    )
    on_front = np.zeros(len(df), dtype=bool)
    for local in groups.values():
        rows = positions[local]
        on_front[rows] = non_dominated(cost[rows])
    result[:] = on_front
    return result


def eligible(df: pd.DataFrame) -> pd.Series:
    """Rows that may be on a front: they ran, and were not found inaccurate."""
    status_ok = df["status"].eq("ok") if "status" in df.columns else pd.Series(False, index=df.index)
    if "accuracy_ok" not in df.columns:
        return status_ok
    wrong = df["accuracy_ok"].map(lambda v: flag(v) is False)
    return status_ok & ~wrong.astype(bool)


def non_dominated(cost: np.ndarray) -> np.ndarray:
    """Mask of the rows of `cost` (n x k, all objectives to minimise, no NaN) nobody dominates."""
    n = cost.shape[0]
    keep = np.ones(n, dtype=bool)
    if n <= 1:
        return keep
    chunk = max(1, _CHUNK_CELLS // max(1, n * cost.shape[1]))
    for start in range(0, n, chunk):
        block = cost[start:start + chunk]  # the rows we test, against every row
        le = (cost[None, :, :] <= block[:, None, :]).all(axis=2)
        lt = (cost[None, :, :] < block[:, None, :]).any(axis=2)
        keep[start:start + chunk] = ~(le & lt).any(axis=1)
    return keep


def _cost_matrix(df: pd.DataFrame, objectives: Sequence[Objective]) -> np.ndarray:
    eager = df["mode"].eq("eager").to_numpy() if "mode" in df.columns else np.zeros(len(df), bool)
    columns = []
    for name, direction in objectives:
        values = pd.to_numeric(df[name], errors="coerce").astype("float64").to_numpy(copy=True)
        if name == "compile_s":
            values[eager & np.isnan(values)] = 0.0
        columns.append(-values if direction == "max" else values)
    return np.column_stack(columns)


def _check_objectives(df: pd.DataFrame, objectives: Sequence[Objective]) -> None:
    if not objectives:
        raise ValueError("pareto_front needs at least one objective")
    for name, direction in objectives:
        if direction not in ("max", "min"):
            raise ValueError(f"objective {name!r}: direction must be 'max' or 'min', not {direction!r}")
        if name not in df.columns:
            raise ValueError(f"objective {name!r} is not a column of the results")
