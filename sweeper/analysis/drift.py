"""The sweep's self-check: each compiled row's in-trial eager baseline against the context's other
measurements of it (the eager trial first), and the interval the report and `recommend` give a speedup.

A compiled trial times eager windows alternating with its compiled ones; the speedup is their ratio.
Those eager windows should run as fast as the other measurements of the same eager step (same model,
phase, precision, batch, input and device), compared at the same host speed (`witness_ms`,
`host_state`). A drift past the larger of 5% and the row's run-to-run floor gets its cause named.
Where the cause biases the in-trial ratio (a neighbour compiled during the windows, or the two sides
ran at different host speeds, so the comparison says nothing) the speedup is not established
(`drift_blocks`). Where both sides ran at one host speed, the eager step ran at another speed in
another process: the in-trial ratio, eager and compiled windows alternated in one process, is what
repeats of the trial reproduce, and the reported interval spans the speedup against the other
processes' eager step too, so the verdict holds only where both agree.

The in-trial interval (paired bootstrap, at least +-2%) sees only what changed inside one trial. The
reported interval (`speedup_low`/`_high`) widens it to at least the run-to-run floor (wider over an
unstable, launch-bound baseline) and to the speedup against the other measurements of the baseline.
The floors are `sweeper.analysis.floors`'; a host profile (`sweeper calibrate`) replaces them. Pure pandas.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from sweeper.analysis.floors import STABLE_SPREAD_PCT, floors
from sweeper.analysis.host_state import at_fast_state, host_figures, numeric_column, read_fast

MATCH_KEYS = ["sweep_id", "model", "phase", "precision", "batch_size", "seq_len", "workload", "bucketing",
              "device_name", "accelerator_type", "matmul_precision", "new_tokens", "cache"]
"""What makes an eager trial the baseline of a compiled row: same sweep, same work, same device."""

class _EagerTrials:
    """The ok eager trials of each row's context, matched once per frame: the context key is
    built once, and each column's per-context median once."""

    def __init__(self, df: pd.DataFrame):
        self.df = df
        parts = [df[k].astype("string").fillna("<null>") for k in MATCH_KEYS if k in df.columns]
        self.key = functools.reduce(lambda a, b: a + "|" + b, parts)
        self.eager = df["status"].eq("ok") & df["mode"].eq("eager")
        self._matched: dict[str, pd.Series] = {}

    def match(self, column: str, values: pd.Series | None = None) -> pd.Series:
        """Per row: `column` (or `values`, named so) of the ok eager trial(s) of the row's context
        (median), or null."""
        if column not in self._matched:
            source = self.df.get(column, pd.Series(index=self.df.index, dtype="float64")) if values is None else values
            values = pd.to_numeric(source, errors="coerce")[self.eager]
            self._matched[column] = self.key.map(values.groupby(self.key[self.eager]).median()).astype("float64")
        return self._matched[column]


def _compiled_ok(df: pd.DataFrame, values: pd.Series) -> pd.Series:
    return values.where(~df["mode"].eq("eager") & df["status"].eq("ok") & np.isfinite(values)).astype("float64")


def self_check(df: pd.DataFrame) -> dict[str, pd.Series]:
    """The self-check's columns of a prepared frame: baseline_drift_pct, drift_state, drift_cause,
    drift_blocks, eager_trial_speedup and speedup_low / speedup_high, from one match of every row with
    its eager trial, at the same host speed."""
    if df.empty:
        empty = pd.Series(dtype="float64", index=df.index)
        return {"baseline_drift_pct": empty, "drift_state": empty.astype("object"),
                "drift_cause": empty.astype("object"), "drift_blocks": empty.astype("boolean"),
                "eager_trial_speedup": empty, "drift_limit_pct": empty, "speedup_low": empty, "speedup_high": empty}
    trials = _EagerTrials(df)
    m = _matched_state(df, trials)
    m["drift_limit_pct"] = drift_limit_pct(df, trials).where(m["baseline_drift_pct"].notna())
    low, high = reported_interval(df, trials, m["eager_trial_speedup"])
    cause = drift_cause(df, m, witness_gap_pct(df, trials))
    return {**m, "drift_cause": cause, "drift_blocks": drift_blocks(cause, m["baseline_drift_pct"]),
            "speedup_low": low, "speedup_high": high}


def _ratio(a: pd.Series, b: pd.Series) -> pd.Series:
    with np.errstate(divide="ignore", invalid="ignore"):
        return pd.to_numeric(a, errors="coerce") / b


def _matched_state(df: pd.DataFrame, trials: _EagerTrials) -> dict[str, pd.Series]:
    """Drift and the speedup against the context's other measurements of its eager baseline, at one
    host speed (see `baseline_consensus`)."""
    c = baseline_consensus(df, trials)
    base = numeric_column(df, "eager_throughput_items_s")
    slow_base = numeric_column(df, "eager_throughput_slow_items_s")
    use_slow = c["state"].eq("slow")
    drift = (_ratio(base.where(~use_slow, slow_base), c["reference"]) - 1.0) * 100.0
    compiled = df["throughput_items_s"].where(~use_slow, numeric_column(df, "throughput_slow_items_s"))
    other = _ratio(compiled, c["reference"])
    drift = _compiled_ok(df, drift)
    return {"baseline_drift_pct": drift, "eager_trial_speedup": _compiled_ok(df, other),
            "drift_state": c["state"].where(drift.notna(), None)}


def baseline_consensus(df: pd.DataFrame, trials: _EagerTrials | None = None) -> dict[str, pd.Series]:
    """Per compiled row: the eager throughput its in-trial baseline is checked against, and the host
    state of the comparison.

    The context's uncompiled measurements of its eager step come first: the eager trial's, and each
    compiled trial's eager windows timed before its compile (`eager_alone_*`): processes that had not
    compiled, at several moments of the sweep; and the other compiled rows' in-trial eager windows (a
    process that compiled times its eager step as one that did not: studies/decisive/results/precision).
    Where the row ran at the host's fast state, its reference is their median at that state, its own
    figure left out ("fast"): one process timed in an unusually fast or slow stretch no longer decides.
    Rows without those figures (older rows) are checked against the eager trial where that ran at the
    same host speed, else against the median of the context's other measurements at that speed: those read at the host's
    fast state when its own did; else the slow-state figures where both sides have them ("slow"); else
    all of them, the eager trial first ("mismatched": no common state).
    """
    trials = trials or _EagerTrials(df)
    ok = df["status"].eq("ok")
    eager_row = df["mode"].eq("eager")

    def baseline(column: str) -> pd.Series:  # an eager trial's own figure, a compiled row's in-trial eager one
        return numeric_column(df, f"eager_{column}").where(~eager_row, numeric_column(df, column))

    base, slow = baseline("throughput_items_s").where(ok), baseline("throughput_slow_items_s").where(ok)
    fast = at_fast_state(df, baseline("witness_ms"), figures := host_figures(df)) & ok
    alone = numeric_column(df, "eager_alone_throughput_items_s").where(ok & ~eager_row)
    alone_fast = read_fast(df, numeric_column(df, "eager_alone_witness_ms"), figures) & alone.notna()
    pure = np.where(eager_row & fast, base, np.where(alone_fast, alone, np.nan))  # uncompiled, at the fast state
    compiled = (ok & ~eager_row).to_numpy()
    arrays = [eager_row.to_numpy(), base.to_numpy(), slow.to_numpy(), fast.to_numpy()]
    reference, state = np.full(len(df), np.nan), np.full(len(df), None, dtype=object)
    has_alone = alone.notna().to_numpy()
    for idx in df.groupby(trials.key.to_numpy(), sort=False).indices.values():  # positions: labels may repeat
        uncompiled = pure[idx][np.isfinite(pure[idx])]
        for i in (i for i in idx if compiled[i] and np.isfinite(arrays[1][i])):
            if arrays[3][i] and has_alone[idx].any() and len(uncompiled):
                reference[i], state[i] = _fast_median(i, idx, uncompiled, compiled, arrays[1], arrays[3]), "fast"
            elif (found := _reference(i, [j for j in idx if j != i and np.isfinite(arrays[1][j])], *arrays)):
                reference[i], state[i] = found
    return {"reference": pd.Series(reference, index=df.index, dtype="float64"),
            "state": pd.Series(state, index=df.index, dtype="object")}


def _fast_median(i: int, idx: np.ndarray, uncompiled: np.ndarray, compiled: np.ndarray, base: np.ndarray,
                 fast: np.ndarray) -> float:
    """Row i's reference at the fast state: the median of its context's `uncompiled` measurements and
    of the other compiled rows' in-trial eager figures read at that state, its own left out."""
    others = np.asarray([base[j] for j in idx if j != i and compiled[j] and fast[j]], dtype="float64")
    members = np.concatenate([uncompiled, others])
    return float(np.median(members[np.isfinite(members)]))


def _reference(i: int, others: list, eager_row: np.ndarray, base: np.ndarray, slow: np.ndarray,
               fast: np.ndarray) -> tuple[float, str] | None:
    """(reference throughput, state) for row i among `others`: the eager trial where it ran at row
    i's state, else the median of the other measurements at that state."""
    def pick(candidates: list, values: np.ndarray, name: str) -> tuple[float, str] | None:
        chosen = [j for j in candidates if eager_row[j]] or candidates
        return (float(np.median(values[chosen])), name) if chosen else None

    same_slow = [j for j in others if np.isfinite(slow[j])]
    return ((pick([j for j in others if fast[j]], base, "fast") if fast[i] else None)
            or (pick(same_slow, slow, "slow") if np.isfinite(slow[i]) else None)
            or pick(others, base, "mismatched"))


def drift_limit_pct(df: pd.DataFrame, trials: _EagerTrials | None = None) -> pd.Series:
    """Per row: the drift past which its speedup is not established, in percent: the ranking's
    DRIFT_LIMIT_PCT, or the run-to-run floor its reported interval already carries where that is
    wider (a launch-bound baseline's, or a host profile's): a drift inside the floor is inside the
    interval, and two processes of one eager step differ by that much on this host. Wider still
    where the two medians compared are known less precisely than that: SE_FACTOR times their
    combined standard error (`eager_median_se_pct` of the row and of its eager trial)."""
    trials = trials or _EagerTrials(df)
    limit = np.fmax(run_to_run_floor(df, trials) * 100.0, DRIFT_LIMIT_PCT)
    own, ref = numeric_column(df, "eager_median_se_pct").fillna(0.0), trials.match("eager_median_se_pct").fillna(0.0)
    return np.fmax(limit, SE_FACTOR * np.hypot(own, ref)).astype("float64")


SE_FACTOR = 2.0
"""A drift inside this many combined standard errors of the two medians compared is their own noise."""


def run_to_run_floor(df: pd.DataFrame, trials: _EagerTrials | None = None) -> pd.Series:
    """Per row, as a fraction: the floors' run-to-run half-width, the unstable baseline's where its
    eager windows spread STABLE_SPREAD_PCT or more."""
    unstable = baseline_spread_pct(df, trials).ge(STABLE_SPREAD_PCT)
    f = floors()
    return pd.Series(f.run_to_run, index=df.index).where(~unstable, f.unstable_baseline)


DRIFT_LIMIT_PCT = 5.0
"""In-trial eager baseline vs the context's other measurements of it: past this (or past the row's
run-to-run floor, where wider: `drift_limit_pct`), the speedup is not established."""


BETWEEN_PROCESSES = "between processes"
"""How a drift cause begins where both sides ran at one host speed: the eager step ran at another
speed in another process, which does not bias the in-trial ratio (see the module docstring)."""


FAST_STATE_CAUSE = f"{BETWEEN_PROCESSES}: both sides ran at the host's fast speed"
ANOTHER_SPEED = "a fast state of another speed"
"""How a fast-state cause ends where the witness says the two processes' fast states differed."""

WITNESS_GAP_PCT = 3.0
"""A fast-state drift whose in-trial eager windows' witness read at least this much slower (faster)
than the eager trial's, the drift slower (faster) too, says the fast state itself differed."""


def witness_gap_pct(df: pd.DataFrame, trials: _EagerTrials) -> pd.Series:
    """Per compiled row: its eager windows' median witness reading against its eager trial's, in percent
    (positive: the row's process read the host slower)."""
    ratio = _ratio(numeric_column(df, "eager_witness_ms"), trials.match("witness_ms"))
    return ((ratio - 1.0) * 100.0).astype("float64")


def drift_cause(df: pd.DataFrame, m: dict[str, pd.Series], gap: pd.Series) -> pd.Series:
    """Per drifted row, what the rows show of why: a compiling neighbour, a row without host-speed
    readings, a host that ran slow through one side (no matched state to compare), or another
    process's eager step at the same host speed (`BETWEEN_PROCESSES`); where the witness of the two
    processes' fast states differs past WITNESS_GAP_PCT in the drift's direction (`gap`), that too."""
    drift = m["baseline_drift_pct"]
    busy = numeric_column(df, "host_busy_windows_pct").fillna(0.0)
    told = gap.abs().ge(WITNESS_GAP_PCT) & (np.sign(gap) == -np.sign(drift))
    named = (FAST_STATE_CAUSE + "; the host-speed witness read " + gap.abs().round(0).astype("Int64").astype(str)
             + np.where(gap > 0, "% slower", "% faster")
             + f" in this trial's eager windows than in the eager trial's ({ANOTHER_SPEED})")
    cause = pd.Series(FAST_STATE_CAUSE, index=df.index, dtype="object").where(~told, named)
    cause = cause.where(~m["drift_state"].eq("slow"), f"{BETWEEN_PROCESSES}: both sides ran at the host's slow speed")
    cause = cause.where(~m["drift_state"].eq("mismatched"),
                        "the host's CPUs ran slow through one side (no common speed state to compare)")
    cause = cause.where(numeric_column(df, "eager_witness_ms").notna(),
                        "unexplained: the row carries no host-speed reading (rows from before the witness)")
    cause = cause.where(busy.le(0), "a neighbour trial compiled during " + busy.round(0).astype(int).astype(str)
                        + "% of the timed windows")
    return cause.where(drift.abs() > m["drift_limit_pct"], None)


def drift_blocks(cause: pd.Series, drift: pd.Series) -> pd.Series:
    """Per row: whether its drift leaves the speedup not established: a drift past the limit whose
    cause biases the in-trial ratio or makes the comparison meaningless (anything but
    `BETWEEN_PROCESSES`). Null where nothing was checked (eager rows, rows with no eager trial)."""
    named = cause.notna()
    blocks = named & ~cause.where(named, "").astype(str).str.startswith(BETWEEN_PROCESSES)
    return blocks.astype("boolean").where(drift.notna(), pd.NA)


def baseline_drift_pct(df: pd.DataFrame, trials: _EagerTrials | None = None) -> pd.Series:
    """Per row: in-trial eager throughput vs the eager trial's, in percent (positive: the in-trial
    baseline ran faster), at the same host speed. Null for eager rows, failed rows and rows with no
    eager trial to match."""
    if df.empty:
        return pd.Series(dtype="float64", index=df.index)
    return _matched_state(df, trials or _EagerTrials(df))["baseline_drift_pct"]


def eager_trial_speedup(df: pd.DataFrame, trials: _EagerTrials | None = None) -> pd.Series:
    """Per compiled row: its throughput over the eager trial's of its context, at the same host
    speed (null without one)."""
    if df.empty:
        return pd.Series(dtype="float64", index=df.index)
    return _matched_state(df, trials or _EagerTrials(df))["eager_trial_speedup"]


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
    floor = run_to_run_floor(df, trials).where(~df["mode"].eq("eager"), 0.0)
    low = np.fmin(low, speedup * (1 - floor)).where(low.notna())
    high = np.fmax(high, speedup * (1 + floor)).where(high.notna())
    other = eager_trial_speedup(df, trials) if other is None else other
    low = low.where(low.isna() | other.isna(), np.fmin(low, other))
    high = high.where(high.isna() | other.isna(), np.fmax(high, other))
    return low.astype("float64"), high.astype("float64")
