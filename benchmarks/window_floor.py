"""Did a sweep's timed windows meet the spec's floors? From finished results directories.

    python -m benchmarks.window_floor RESULTS_DIR...

Each row records the steps per window of its timed arm (`iters_per_window`, the compiled arm of
a compiled trial) and the median step (`latency_p50_ms`); their product is the window's length.
The spec asks for at least `measure.min_window_s` seconds and `measure.min_window_iters` steps.
A row is short when its window is under 80% of the time floor while more steps than the
iteration floor would have been needed to meet it: the calibration, not the floor, chose it.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pandas as pd

from sweeper.results.store import read_results

REPO = Path(__file__).resolve().parent.parent

SHORT = 0.8
"""A window under this share of the time floor is short."""


def windows(results_dir: Path) -> tuple[dict, pd.DataFrame]:
    """The spec's floors and, per ok row, its window length and the steps the floors need."""
    measure = json.loads((results_dir / "sweep.json").read_text())["spec"]["measure"]
    df = read_results([results_dir])
    df = df[(df["status"] == "ok") & df["latency_p50_ms"].notna()].copy()
    step_s = df["latency_p50_ms"] / 1e3
    df["window_s"] = df["iters_per_window"] * step_s
    df["iters_needed"] = [max(measure["min_window_iters"], math.ceil(measure["min_window_s"] / s)) for s in step_s]
    df["short"] = (df["window_s"] < SHORT * measure["min_window_s"]) & (df["iters_needed"] > df["iters_per_window"])
    return measure, df


def summary(results_dir: Path) -> str:
    measure, df = windows(results_dir)
    if df.empty:
        return f"| {results_dir} | - | 0 | - | - | - |"
    floor = f"{measure['min_window_s']} s / {measure['min_window_iters']} steps"
    share = (df["iters_per_window"] / df["iters_needed"]).min()
    return (f"| {results_dir} | {floor} | {len(df)} | {df['window_s'].min():.3f} / {df['window_s'].median():.3f} | "
            f"{int(df['short'].sum())} | {share:.2f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", type=Path)
    args = ap.parse_args()
    print("| results | floor | ok rows | window s (min / median) | short windows | fewest steps / needed |")
    print("|---|---|---|---|---|---|")
    for d in args.results:
        print(summary(d))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
