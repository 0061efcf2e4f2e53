"""Drift between processes: which of the two speedups of a drifted row repeats, from the committed rows.

    python -m studies.decisive.drift_between [DIR]   (DIR: studies/decisive/results)

A compiled row has two speedups: the in-trial ratio (its eager and compiled windows, alternated in
one process) and the ratio over the other processes' eager step at the same host speed
(`eager_trial_speedup`). Where those two differ past the row's drift limit with both sides at one
host speed, which one do the other repeats of the setting reproduce? Over every repeat arm of the
study (three sweeps of `launch_bound.yaml` each), per setting: the spread of either speedup across
the repeats, and how often a row's reported interval holds the other repeats' headlines, for rows
that drifted between processes and rows that did not. Then, per committed sweep of the study, the
rows past their limit and the rows whose speedup is not established (`drift_blocks`).
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from sweeper.analysis.drift import ANOTHER_SPEED, BETWEEN_PROCESSES, FAST_STATE_CAUSE, WITNESS_GAP_PCT
from sweeper.analysis.frames import prepare
from sweeper.results.store import read_results

REPEAT_ARMS = ("ungated", "gated", "consensus", "precision/repeats", "reference", "placement/hop_gate", "h100/repeats",
               "final", "h100_steady/repeats", "h100_same/repeats", "h100_lend/repeats")
"""Arms with repeats of launch_bound.yaml (r1, r2, r3; the final arm five)."""


@functools.cache
def compiled_rows(sweep: Path) -> pd.DataFrame:
    """A sweep's compiled ok rows, analysed (once per sweep: the tables share them; read only)."""
    df = prepare(read_results([sweep]))
    return df[df["mode"].ne("eager") & df["status"].eq("ok")]


def drift_class(r: pd.Series) -> str:
    cause = r["drift_cause"]
    if not isinstance(cause, str):
        return "within the limit"
    return "between processes" if cause.startswith(BETWEEN_PROCESSES) else "other cause"


def repeats(root: Path) -> pd.DataFrame:
    frames = []
    for arm in REPEAT_ARMS:
        for rep in ("r1", "r2", "r3", "r4", "r5"):
            if (root / arm / rep / "results.parquet").exists():
                frames.append(compiled_rows(root / arm / rep).assign(arm=arm, rep=rep))
    df = pd.concat(frames, ignore_index=True).copy()  # one block per dtype before a column is added
    df["class"] = df.apply(drift_class, axis=1)
    return df


def spread_table(df: pd.DataFrame) -> str:
    """Per arm and setting: max/min - 1 of each speedup across the repeats."""
    lines = ["| arm | model | mode | in-trial speedups | spread | over the other processes' eager | spread |",
             "|---|---|---|---|---|---|---|"]
    totals = {"in-trial": [], "other": []}
    for (arm, model, mode), g in df.groupby(["arm", "model", "mode"], sort=False):
        own, other = g["speedup_vs_eager"], g["eager_trial_speedup"]
        s_own, s_other = 100 * (own.max() / own.min() - 1), 100 * (other.max() / other.min() - 1)
        totals["in-trial"].append(s_own)
        totals["other"].append(s_other)
        lines.append(f"| {arm} | {model} | {mode} | {' '.join(f'{x:.2f}' for x in own)} | {s_own:.0f}% | "
                     f"{' '.join(f'{x:.2f}' for x in other)} | {s_other:.0f}% |")
    own, other = pd.Series(totals["in-trial"]), pd.Series(totals["other"])
    lines.append(f"\nSpread across repeats, median over {len(own)} settings: in-trial {own.median():.1f}%, over the "
                 f"other processes' eager {other.median():.1f}%; the in-trial spread is the smaller in "
                 f"{int((own < other).sum())} of {len(own)}.")
    return "\n".join(lines)


def elasticity(windows: str) -> float:
    """How much a trial's compiled step moves with its eager step, window to window: the Theil-Sen
    slope of log compiled on log eager step time, clipped to 0-1 (0: not at all, 1: in proportion)."""
    w = json.loads(windows)
    x, y = np.log(w["eager_s_per_iter"]), np.log(w["compiled_s_per_iter"])
    slopes = [(y[j] - y[i]) / (x[j] - x[i]) for i in range(len(x)) for j in range(i + 1, len(x)) if x[j] != x[i]]
    return float(np.clip(np.median(slopes), 0.0, 1.0)) if slopes else float("nan")


def corrected_table(df: pd.DataFrame) -> str:
    """The in-trial speedup carried to the other processes' eager speed: the eager step time scaled by
    the drift, the compiled one by the drift to the power of the trial's elasticity."""
    df = df[df["windows_json"].apply(lambda w: isinstance(w, str))].copy()
    df["beta"] = df["windows_json"].map(elasticity)
    ratio = 1 + df["baseline_drift_pct"] / 100  # the others' eager step time over the in-trial one
    df["corrected"] = df["speedup_vs_eager"] * ratio ** (1 - df["beta"])
    spreads = {"in-trial": [], "corrected": []}
    for _, g in df.groupby(["arm", "model", "mode"], sort=False):
        spreads["in-trial"].append(100 * (g["speedup_vs_eager"].max() / g["speedup_vs_eager"].min() - 1))
        spreads["corrected"].append(100 * (g["corrected"].max() / g["corrected"].min() - 1))
    own, corrected = pd.Series(spreads["in-trial"]), pd.Series(spreads["corrected"])
    beta = df.groupby("mode")["beta"].median()
    return ("Elasticity of the compiled step on the eager one (median per mode): "
            + ", ".join(f"{m} {b:.2f}" for m, b in beta.items())
            + f". Corrected to the other processes' eager speed, the spread across repeats (median over {len(own)} "
            f"settings) is {corrected.median():.1f}% against the in-trial {own.median():.1f}%; the corrected spread "
            f"is the larger in {int((corrected > own).sum())} of {len(own)}.")


def repeat_pairs(df: pd.DataFrame) -> pd.DataFrame:
    """One line per row and each other repeat of its setting: the row's own columns (its interval among
    them), whether that interval holds the other repeat's headline, and the interval's half-width."""
    out = []
    for _, g in df.groupby(["arm", "model", "mode"], sort=False):
        for _, r in g.iterrows():
            for _, o in g[g["rep"] != r["rep"]].iterrows():
                out.append({**r.to_dict(),
                            "covers": r["speedup_low"] <= o["speedup_vs_eager"] <= r["speedup_high"],
                            "half_width_pct": 50 * (r["speedup_high"] - r["speedup_low"]) / r["speedup_vs_eager"]})
    return pd.DataFrame(out)


def coverage_table(df: pd.DataFrame) -> str:
    """Per drift class: how often a row's reported interval holds each other repeat's headline."""
    cov = repeat_pairs(df)
    lines = ["| rows | pairs | interval holds the other repeat's headline | median half-width |", "|---|---|---|---|"]
    for name, g in cov.groupby("class"):
        lines.append(f"| {name} | {len(g)} | {int(g['covers'].sum())} ({100 * g['covers'].mean():.0f}%) | "
                     f"+-{g['half_width_pct'].median():.1f}% |")
    return "\n".join(lines)


def sweeps_table(root: Path) -> str:
    lines = ["| sweep | compiled rows checked | past their limit | between processes | not established |",
             "|---|---|---|---|---|"]
    total = [0, 0, 0, 0]
    for path in sorted(root.rglob("results.parquet")):
        c = compiled_rows(path.parent)
        checked = c["baseline_drift_pct"].notna()
        past = c["baseline_drift_pct"].abs() > c["drift_limit_pct"]
        blocks = past & c["drift_blocks"].fillna(True).astype(bool)
        row = [int(checked.sum()), int(past.sum()), int((past & ~blocks).sum()), int(blocks.sum())]
        total = [a + b for a, b in zip(total, row, strict=True)]
        lines.append(f"| {path.parent.relative_to(root)} | " + " | ".join(map(str, row)) + " |")
    lines.append("| **all** | " + " | ".join(f"**{x}**" for x in total) + " |")
    return "\n".join(lines)


def witness_gap_line(root: Path) -> str:
    """Over every committed sweep: the drifts between processes at the fast state, and how many of them
    the self-check explains by a fast state of another speed (`drift.WITNESS_GAP_PCT`)."""
    causes = pd.concat([compiled_rows(p.parent)["drift_cause"] for p in sorted(root.rglob("results.parquet"))])
    fast = causes.dropna().astype(str)
    fast = fast[fast.str.startswith(FAST_STATE_CAUSE)]
    named = int(fast.str.contains(ANOTHER_SPEED, regex=False).sum())
    return (f"Drifts between processes at the fast state: {len(fast)}; where the witness read the host "
            f">= {WITNESS_GAP_PCT:g}% slower (faster) in the drift's direction, named a fast state of another "
            f"speed: {named}.")


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "studies/decisive/results")
    df = repeats(root)
    print("## Which speedup repeats\n\n" + spread_table(df) + "\n\n" + corrected_table(df)
          + "\n\n## Reported intervals across repeats\n\n"
          + coverage_table(df) + "\n\n## Per sweep\n\n" + sweeps_table(root) + "\n\n" + witness_gap_line(root))


if __name__ == "__main__":
    main()
