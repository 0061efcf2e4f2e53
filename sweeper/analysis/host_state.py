"""The host's speed state of a row's witness readings: at the fast state, or not.

A reading is at the fast state within WITNESS_SLOW_FACTOR of its host's fast state (the median of the
references its rows recorded),
except on a host whose readings showed one speed (TWO_SPEED_FACTOR): there the split would part two
processes by noise, and every reading counts as fast. Pure pandas, used by the self-check.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from sweeper.results.schema import WITNESS_SLOW_FACTOR

HostFigures = tuple[pd.Series, pd.Series]
"""Per row: its host's fast state (ms) and whether its host showed one speed (`host_figures`)."""


def host_figures(df: pd.DataFrame) -> HostFigures:
    """Per row: its host's fast state and whether that host's readings showed one speed, computed
    once for the frame (every window's readings are parsed here) and passed to the judgements."""
    fast_state = _host_fast_state(df)
    return fast_state, _one_speed_host(df, fast_state)


def at_fast_state(df: pd.DataFrame, reading: pd.Series, figures: HostFigures | None = None) -> pd.Series:
    """Per row: a witness `reading` of it was at the host's fast state (within WITNESS_SLOW_FACTOR of
    its host's fast state, or on a host that showed one speed), or its trial found its steps the
    same at either state (`host_state` steady); True for rows without witness readings (older rows)."""
    fast_state, one_speed = figures or host_figures(df)
    state = df["host_state"] if "host_state" in df.columns else pd.Series(None, index=df.index, dtype="object")
    fast = (read_fast(df, reading, (fast_state, one_speed)) & (state.ne("slow") | one_speed)) | state.eq("steady")
    return fast.where(reading.notna() & fast_state.notna(), True).astype(bool)


TWO_SPEED_FACTOR = 1.5
"""A host shows a second speed when at least 5% of its witness readings (every timed window's, and the
rows' medians) are this many times its fast state or more: the H200 host's slow state read
1.5-2.3x. Where none does (a CPU whose readings spread 1.1-1.35x around one speed), the state split
would part two processes by noise: every reading there counts as the fast state."""


def _one_speed_host(df: pd.DataFrame, host_fast_state: pd.Series) -> pd.Series:
    """Per row: its host's witness readings showed one speed (see TWO_SPEED_FACTOR); False without
    readings."""
    host = _hosts(df)
    fast_state = host_fast_state.to_numpy()
    medians = [numeric_column(df, c).to_numpy() for c in ("witness_ms", "eager_witness_ms", "eager_alone_witness_ms")]
    windows = df["windows_json"].tolist() if "windows_json" in df.columns else [None] * len(df)
    ratios: dict[str, list[float]] = {}
    for i, name in enumerate(host.tolist()):  # positions: labels may repeat
        if not np.isfinite(fast_state[i]) or fast_state[i] <= 0:
            continue
        readings = [m[i] for m in medians] + window_readings(windows[i])
        ratios.setdefault(name, []).extend(x / fast_state[i] for x in readings if np.isfinite(x))
    one = {name: bool(r) and float(np.percentile(r, 95)) < TWO_SPEED_FACTOR for name, r in ratios.items()}
    return pd.Series([one.get(name, False) for name in host.tolist()], index=df.index, dtype=bool)


def window_readings(text: object) -> list[float]:
    """Every timed window's witness reading of one row (its `windows_json`), both arms."""
    if not isinstance(text, str):
        return []
    try:
        windows = json.loads(text)
    except ValueError:
        return []
    return [float(x) for k in ("eager_witness_ms", "compiled_witness_ms") for x in windows.get(k) or [] if x]


def _host_fast_state(df: pd.DataFrame) -> pd.Series:
    """Per row: its host's fast state, the median of the witness references its host's rows recorded
    (the lowest can be a fluke a whole sweep would then read as slow)."""
    return numeric_column(df, "witness_ref_ms").groupby(_hosts(df)).transform("median")


def _hosts(df: pd.DataFrame) -> pd.Series:
    return (df["hostname"] if "hostname" in df.columns else pd.Series("", index=df.index)).astype("string").fillna("")


def read_fast(df: pd.DataFrame, reading: pd.Series, figures: HostFigures | None = None) -> pd.Series:
    """Per row: `reading` was within WITNESS_SLOW_FACTOR of its host's fast state, or its host showed one
    speed; False without a reading."""
    fast_state, one_speed = figures or host_figures(df)
    within = (reading <= fast_state * WITNESS_SLOW_FACTOR) | (one_speed & fast_state.notna())
    return (within & reading.notna()).astype(bool)


def numeric_column(df: pd.DataFrame, column: str) -> pd.Series:
    """A numeric column of `df`, all null where the frame lacks it (rows older than the column)."""
    if column not in df.columns:
        return pd.Series(np.nan, index=df.index, dtype="float64")
    return pd.to_numeric(df[column], errors="coerce").astype("float64")
