"""The sweep's self-check: each compiled row's in-trial eager baseline against the eager trial of
the same context in the same sweep, and the interval the report and `recommend` give a speedup.

A compiled trial times eager windows alternating with its compiled ones, and the speedup is their
ratio. Those eager windows should run as fast as the sweep's own eager trial of the same model,
phase, precision, batch, input and device. When they do not, something slowed (or sped) the
baseline inside the trial (a neighbour's compile, a slow state of the host's CPUs that lasted the
whole trial), and the speedup is not established.

The in-trial interval (`speedup_ci_low`/`_high`: paired bootstrap, at least +-2%) sees only what
changed from window to window inside one trial: not what differs between two trials of one
setting (another compile, which may pick other kernels; another state of the host). The reported
interval (`speedup_low`/`_high`) widens it by what was measured beyond the trial:

* every compiled row gets at least +-`RUN_TO_RUN_FLOOR`, the run-to-run range of settings whose
  eager windows held still (below);
* an unstable baseline (eager windows spread `STABLE_SPREAD_PCT` or more: a launch-bound eager
  step) gets at least +-`UNSTABLE_BASELINE_FLOOR`, the run-to-run range measured for such
  settings (below);
* where the eager trial of the context ran at another speed than the in-trial baseline, the
  interval reaches the speedup against the eager trial too: two measurements of one baseline
  disagree, and the truth may lie anywhere between.

Pure pandas.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

MATCH_KEYS = ["sweep_id", "model", "phase", "precision", "batch_size", "seq_len", "workload", "bucketing",
              "device_name", "matmul_precision"]
"""What makes an eager trial the baseline of a compiled row: same sweep, same work, same device."""

STABLE_SPREAD_PCT = 5.0
"""A baseline whose timed windows spread less than this ((max - min) / median) is stable."""
RUN_TO_RUN_FLOOR = 0.04
"""Least half-width of the reported interval of any compiled row, as a fraction: the largest
difference between two runs' speedups of one setting whose eager windows held still (spread
under `STABLE_SPREAD_PCT`), rounded up to a whole percent. Measured on 2x H200
(experiments/results/h200/truth: 16 settings at once and alone, 4 of them in 2 more sweeps):
3.8% (resnet50 bf16 `default`, 2.25x alone, 2.16x in a repeat), while each trial's own interval
was +-2%. `python benchmarks/truth.py DIR` measures it for a host of your own."""
UNSTABLE_BASELINE_FLOOR = 0.09
"""Least half-width of the reported interval over an unstable baseline, as a fraction: the largest
difference between two runs' speedups of one such setting, rounded up to a whole percent,
measured in the same study: 8.4% (bert-base bf16 `default`, eager windows spread 10-60%: 1.51x
at once, 1.64x alone)."""


class _EagerTrials:
    """The ok eager trials of each row's context, matched once per frame: the context key is
    built once, and each column's per-context median once."""

    def __init__(self, df: pd.DataFrame):
        self.df = df
        parts = [df[k].astype("string").fillna("<null>") for k in MATCH_KEYS if k in df.columns]
        self.key = functools.reduce(lambda a, b: a + "|" + b, parts)
        self.eager = df["status"].eq("ok") & df["mode"].eq("eager")
        self._matched: dict[str, pd.Series] = {}

    def match(self, column: str) -> pd.Series:
        """Per row: `column` of the ok eager trial(s) of the row's context (median), or null."""
        if column not in self._matched:
            values = pd.to_numeric(self.df[column], errors="coerce")[self.eager]
            self._matched[column] = self.key.map(values.groupby(self.key[self.eager]).median()).astype("float64")
        return self._matched[column]


def _compiled_ok(df: pd.DataFrame, values: pd.Series) -> pd.Series:
    return values.where(~df["mode"].eq("eager") & df["status"].eq("ok") & np.isfinite(values)).astype("float64")


def self_check(df: pd.DataFrame) -> dict[str, pd.Series]:
    """The self-check's columns of a prepared frame: baseline_drift_pct, eager_trial_speedup,
    speedup_low and speedup_high, from one match of every row with its eager trial."""
    trials = _EagerTrials(df) if not df.empty else None
    other = eager_trial_speedup(df, trials)
    low, high = reported_interval(df, trials, other)
    return {"baseline_drift_pct": baseline_drift_pct(df, trials), "eager_trial_speedup": other,
            "speedup_low": low, "speedup_high": high}


def baseline_drift_pct(df: pd.DataFrame, trials: _EagerTrials | None = None) -> pd.Series:
    """Per row: in-trial eager throughput vs the eager trial's, in percent (positive: the in-trial
    baseline ran faster). Null for eager rows, failed rows and rows with no eager trial to match."""
    if df.empty:
        return pd.Series(dtype="float64", index=df.index)
    inside = pd.to_numeric(df["eager_throughput_items_s"], errors="coerce")
    with np.errstate(divide="ignore", invalid="ignore"):
        drift = (inside / (trials or _EagerTrials(df)).match("throughput_items_s") - 1.0) * 100.0
    return _compiled_ok(df, drift)


def eager_trial_speedup(df: pd.DataFrame, trials: _EagerTrials | None = None) -> pd.Series:
    """Per compiled row: its throughput over the eager trial's of its context (null without one)."""
    if df.empty:
        return pd.Series(dtype="float64", index=df.index)
    eager_items_s = (trials or _EagerTrials(df)).match("throughput_items_s")
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = pd.to_numeric(df["throughput_items_s"], errors="coerce") / eager_items_s
    return _compiled_ok(df, ratio)


def baseline_spread_pct(df: pd.DataFrame, trials: _EagerTrials | None = None) -> pd.Series:
    """Per row: the spread of its eager windows; for rows that do not carry it (older rows), the
    spread of the eager trial of its context."""
    own = pd.to_numeric(df.get("eager_spread_pct", pd.Series(index=df.index, dtype="float64")), errors="coerce")
    if df.empty:
        return own.astype("float64")
    return own.fillna((trials or _EagerTrials(df)).match("throughput_spread_pct")).astype("float64")


def reported_interval(df: pd.DataFrame, trials: _EagerTrials | None = None,
                      other: pd.Series | None = None) -> tuple[pd.Series, pd.Series]:
    """(speedup_low, speedup_high) per row: the in-trial interval widened as the module says
    (`other`: the rows' eager_trial_speedup, when the caller has it). Null where the row has no
    in-trial interval (its ranking then falls back to the window spread)."""
    trials = trials or (_EagerTrials(df) if not df.empty else None)
    speedup = pd.to_numeric(df["speedup_vs_eager"], errors="coerce")
    low = pd.to_numeric(df["speedup_ci_low"], errors="coerce")
    high = pd.to_numeric(df["speedup_ci_high"], errors="coerce")
    unstable = baseline_spread_pct(df, trials).ge(STABLE_SPREAD_PCT)
    floor = pd.Series(RUN_TO_RUN_FLOOR, index=df.index).where(~unstable, UNSTABLE_BASELINE_FLOOR)
    floor = floor.where(~df["mode"].eq("eager"), 0.0)
    low = np.fmin(low, speedup * (1 - floor)).where(low.notna())
    high = np.fmax(high, speedup * (1 + floor)).where(high.notna())
    other = eager_trial_speedup(df, trials) if other is None else other
    low = low.where(low.isna() | other.isna(), np.fmin(low, other))
    high = high.where(high.isna() | other.isna(), np.fmax(high, other))
    return low.astype("float64"), high.astype("float64")
