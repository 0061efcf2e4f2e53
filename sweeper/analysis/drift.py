"""The sweep's self-check: each compiled row's in-trial eager baseline against the eager trial of
the same context in the same sweep.

A compiled trial times eager windows alternating with its compiled ones, and the speedup is their
ratio. Those eager windows should run as fast as the sweep's own eager trial of the same model,
phase, precision, batch, input and device. When they do not, something slowed (or sped) the
baseline inside the trial (a neighbour's compile on shared CPUs, a throttled clock), and the
speedup is not established. Pure pandas.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MATCH_KEYS = ["sweep_id", "model", "phase", "precision", "batch_size", "seq_len", "workload", "bucketing",
              "device_name", "matmul_precision"]
"""What makes an eager trial the baseline of a compiled row: same sweep, same work, same device."""


def baseline_drift_pct(df: pd.DataFrame) -> pd.Series:
    """Per row: in-trial eager throughput vs the eager trial's, in percent (positive: the in-trial
    baseline ran faster). Null for eager rows, failed rows and rows with no eager trial to match."""
    if df.empty:
        return pd.Series(dtype="float64", index=df.index)
    keys = [k for k in MATCH_KEYS if k in df.columns]
    key = df[keys].astype("string").fillna("<null>").agg("|".join, axis=1)
    ok = df["status"].eq("ok")
    eager = ok & df["mode"].eq("eager")
    ref = pd.to_numeric(df["throughput_items_s"], errors="coerce")[eager].groupby(key[eager]).median()
    baseline = key.map(ref)
    inside = pd.to_numeric(df["eager_throughput_items_s"], errors="coerce")
    with np.errstate(divide="ignore", invalid="ignore"):
        drift = (inside / baseline - 1.0) * 100.0
    return drift.where(~df["mode"].eq("eager") & ok & np.isfinite(drift)).astype("float64")
