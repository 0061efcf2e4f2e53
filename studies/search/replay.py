"""Replay finished exhaustive sweeps as the objective of sweeper's searchers (no GPU, no cluster):
how much of the exhaustive Pareto front's hypervolume each finds against trials spent.

The searchers are the ones `sweeper run` gives Tune (sweeper.run.search.make_search), driven the
way Tune drives them: suggest a trial, "run" it by looking its row up, report its metrics. Grid
order is the spec's expansion order (one curve); random and optuna run once per seed. Trials spent
count every trial, eager baselines included. Hypervolume is taken on the objectives scaled to
[0, 1] over the table's ok rows (maximized ones flipped), from the reference point 1.1 in each;
an eager row's compile_s counts as 0. Target: >= 95% of the front's hypervolume with <= 35% of
the trials (median over 20 seeds) on the 520-setting table.

    python -m studies.search.replay [--seeds 20] [--png studies/search/results/replay.png] [--json ...]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from studies.search.replay_table import generated_table
from sweeper.results.schema import MODES
from sweeper.run.search import make_search, metrics_of, params_of
from sweeper.spec.search_spec import SearchSpec

log = logging.getLogger("search_replay")
HERE = Path(__file__).resolve().parent
STUDIES = HERE.parent
OBJECTIVES = {"throughput_items_s": "max", "compile_s": "min", "peak_mem_gib": "min"}
ALGORITHMS = ("grid", "random", "optuna")
TARGET_HV, TARGET_SPENT = 0.95, 0.35
_GRID_KEY = ["model", "workload", "phase", "precision", "batch_size", "seq_len", "mode", "dynamic", "bucketing",
             "mark_dynamic"]


def grid_order(df: pd.DataFrame) -> pd.DataFrame:
    """A finished sweep's rows in its spec's expansion order (rows are stored as trials finish):
    names in the order they first appear, numbers ascending, modes and dynamic as the spec lists them."""
    df = df.copy()
    for col in ("workload", "bucketing", "seq_len", "mark_dynamic"):
        if col not in df:
            df[col] = None
    key = df.assign(mode=df["mode"].map(MODES.index),
                    dynamic=df["dynamic"].map(lambda d: 0 if d is None or pd.isna(d) else 1 + bool(d)))
    for col in ("model", "workload", "phase", "precision", "bucketing"):
        key[col] = key[col].map({v: i for i, v in enumerate(pd.unique(key[col].fillna("")))}.get)
    order = key[_GRID_KEY].astype(float).fillna(-1).sort_values(_GRID_KEY, kind="stable").index
    return df.loc[order].reset_index(drop=True)


def hypervolume(points: list[tuple[float, ...]], ref: tuple[float, ...]) -> float:
    """Exact hypervolume dominated by `points` (all minimized) up to `ref`, by slicing."""
    pts = [p for p in points if all(x < r for x, r in zip(p, ref, strict=False))]
    if not pts:
        return 0.0
    if len(ref) == 1:
        return ref[0] - min(p[0] for p in pts)
    pts.sort(key=lambda p: p[-1])
    total = 0.0
    for i, p in enumerate(pts):
        upper = pts[i + 1][-1] if i + 1 < len(pts) else ref[-1]
        if upper > p[-1]:
            total += (upper - p[-1]) * hypervolume([q[:-1] for q in pts[:i + 1]], ref[:-1])
    return total


def front(points: list[tuple[float, ...]]) -> list[tuple[float, ...]]:
    """The non-dominated points (all objectives minimized)."""
    return [p for p in points if not any(q != p and all(a <= b for a, b in zip(q, p, strict=False)) for q in points)]


class Scaled:
    """Each ok row's objectives as a point to minimize in [0, 1]^k, by trial id."""

    def __init__(self, df: pd.DataFrame, objectives: dict[str, str]):
        ok = df[df.status == "ok"].copy()
        ok["compile_s"] = ok["compile_s"].where(ok["mode"] != "eager", 0.0)
        ok = ok.dropna(subset=list(objectives))
        cols = []
        for k, d in objectives.items():
            lo, hi = ok[k].min(), ok[k].max()
            x = (ok[k] - lo) / (hi - lo) if hi > lo else ok[k] * 0.0
            cols.append(1 - x if d == "max" else x)
        self.points = dict(zip(ok.trial_id, zip(*cols, strict=False), strict=False))
        self.ref = (1.1,) * len(objectives)
        self.best = hypervolume(front(list(self.points.values())), self.ref)

    def curve(self, order: list[str]) -> np.ndarray:
        """Fraction of the exhaustive front's hypervolume found after each trial of `order`."""
        found: list[tuple[float, ...]] = []
        out = []
        for tid in order:
            if tid in self.points:
                found = front([*found, self.points[tid]])
            out.append(hypervolume(found, self.ref) / self.best)
        return np.array(out)


def replay(df: pd.DataFrame, algorithm: str, seed: int, budget: int) -> list[str]:
    """The trial ids a searcher runs, in order, with the finished rows as its objective."""
    rows = {r["trial_id"]: _clean(r) for r in df.to_dict("records")}
    spec = SearchSpec() if algorithm == "grid" else SearchSpec(algorithm=algorithm, max_trials=budget, seed=seed,
                                                               objectives=OBJECTIVES)
    searcher = make_search(spec, {tid: params_of(r) for tid, r in rows.items()}, {})
    order: list[str] = []
    while (config := searcher.suggest(f"t{len(order)}")) != "FINISHED":
        order.append(config["trial_id"])
        searcher.on_trial_complete(f"t{len(order) - 1}", metrics_of(rows[config["trial_id"]]))
    return order


def _clean(row: dict) -> dict:
    """pandas' NaN back to None, as sweeper reads rows back for a resumed search."""
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}


def study(name: str, df: pd.DataFrame, seeds: int, search_share: float) -> dict:
    """Curves of every algorithm on one table, and the numbers the README reports."""
    df = grid_order(df)
    scaled, n = Scaled(df, OBJECTIVES), len(df)
    compiled = int((df["mode"] != "eager").sum())
    budget = max(1, math.ceil(search_share * n) - (n - compiled))  # searches stop at search_share of the table
    curves: dict[str, list[np.ndarray]] = {}
    for algorithm in ALGORITHMS:
        for seed in range(1 if algorithm == "grid" else seeds):
            t0 = time.perf_counter()
            curves.setdefault(algorithm, []).append(scaled.curve(replay(df, algorithm, seed, budget)))
            log.info("%s %s seed %d: %.1f s", name, algorithm, seed, time.perf_counter() - t0)
    points = list(scaled.points.values())
    return {"name": name, "settings": n, "eager": n - compiled, "front_points": len(front(points)),
            "curves": curves, "summary": {a: _summary(c, n) for a, c in curves.items()}}


def _summary(curves: list[np.ndarray], n: int) -> dict:
    at = math.floor(TARGET_SPENT * n)
    reach = [int(np.argmax(c >= TARGET_HV)) + 1 if (c >= TARGET_HV).any() else None for c in curves]
    spent = [r / n if r is not None else math.inf for r in reach]
    return {"hv_at_35pct_median": float(np.median([c[min(at, len(c)) - 1] for c in curves])),
            "trials_to_95pct_median": float(np.median(spent)) * n if np.isfinite(np.median(spent)) else None,
            "share_to_95pct_median": float(np.median(spent)),
            "seeds_reaching_95pct_within_35pct": sum(s <= TARGET_SPENT for s in spent), "seeds": len(curves)}


def plot(studies: list[dict], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(studies), figsize=(5.2 * len(studies), 4.2), squeeze=False)
    colors = {"grid": "tab:gray", "random": "tab:blue", "optuna": "tab:red"}
    for ax, s in zip(axes[0], studies, strict=False):
        for algorithm, curves in s["curves"].items():
            width = min(len(c) for c in curves)
            stack = np.array([c[:width] for c in curves])
            x = 100 * np.arange(1, width + 1) / s["settings"]
            ax.plot(x, np.median(stack, axis=0), color=colors[algorithm],
                    label=f"{algorithm}" + (f" (median of {len(curves)} seeds)" if len(curves) > 1 else ""))
            if len(curves) > 1:
                ax.fill_between(x, *np.percentile(stack, [25, 75], axis=0), color=colors[algorithm], alpha=0.2)
        ax.axhline(100 * TARGET_HV / 100, color="k", lw=0.6, ls=":")
        ax.axvline(100 * TARGET_SPENT, color="k", lw=0.6, ls=":")
        ax.set(title=f"{s['name']} ({s['settings']} settings, {s['eager']} eager)", xlabel="trials spent (% of table)",
               ylabel="hypervolume found / exhaustive front's", ylim=(0, 1.02), xlim=(0, 100))
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def tables() -> dict[str, pd.DataFrame]:
    real = {f"H200 {p}": pd.read_parquet(STUDIES / p / "results" / "results.parquet") for p in ("gpu_smoke", "streams")}
    return {"generated (H200-shaped)": generated_table(), **real}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--search-share", type=float, default=0.5, help="searches stop at this share of each table")
    ap.add_argument("--png", type=Path, default=HERE / "results" / "replay.png")
    ap.add_argument("--json", type=Path, default=HERE / "results" / "replay.json")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    studies = [study(name, df, args.seeds, args.search_share) for name, df in tables().items()]
    plot(studies, args.png)
    summary = [{k: v for k, v in s.items() if k != "curves"} for s in studies]
    args.json.write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
