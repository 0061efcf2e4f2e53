"""A real search against its grid: how much of the grid's Pareto front the search found, and at
what share of the grid's trials.

    python -m studies.search.front SEARCH_SPEC SEARCH_DIR GRID_DIR [--seeds 20] > front.md

SEARCH_DIR is a finished `sweeper run` of SEARCH_SPEC, a spec with a `search` section; GRID_DIR the same
spec's grid (studies/search/run_h200.sh finishes it from a copy of the search's rows, so a
setting both measured is one row). Objectives are the search spec's. Hypervolume is taken as in
studies/search/replay.py: objectives scaled to [0, 1] over the grid's ok rows (maximized ones
flipped), reference point 1.1, an eager row's compile_s counted as 0. The grid's rows are then
replayed as the objective of the same searcher over `--seeds` seeds at the same budget: what the
replay oracle predicts for this table, beside what the real search got.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import pandas as pd

from studies.search.replay import Scaled, front, hypervolume, replay
from sweeper.results.store import read_results
from sweeper.spec.sweep_spec import load_spec

HERE = Path(__file__).resolve().parent


def _search_section(spec_path: Path) -> dict:
    search = load_spec(spec_path).search.model_dump()
    if search["algorithm"] == "grid":
        raise SystemExit(f"{spec_path}: has no search section (algorithm grid)")
    return search


def _label(row: pd.Series) -> str:
    dyn = "" if row["mode"] == "eager" else f" dynamic={bool(row['dynamic'])}"
    return f"{row['phase']} {row['precision']} bs{int(row['batch_size'])} {row['mode']}{dyn}"


def compare(spec_path: Path, search_dir: Path, grid_dir: Path, seeds: int) -> list[str]:
    search = _search_section(spec_path)
    objectives = search["objectives"]
    found, grid = read_results([search_dir]), read_results([grid_dir])
    scaled = Scaled(grid, objectives)
    got = [scaled.points[t] for t in found.trial_id if t in scaled.points]
    share_hv = hypervolume(front(got), scaled.ref) / scaled.best
    spent = len(found)
    budget = int((found["mode"] != "eager").sum())
    curves = [scaled.curve(replay(grid, "optuna", s, budget))[-1] for s in range(seeds)]
    lines = [f"objectives: {', '.join(f'{k} {d}' for k, d in objectives.items())}",
             f"grid: {len(grid)} settings ({int((grid['mode'] == 'eager').sum())} eager), "
             f"{len(scaled.points)} ok, {len(front(list(scaled.points.values())))} on the front",
             f"search ({search['algorithm']}, seed {search['seed']}): {spent} trials "
             f"({spent / len(grid):.0%} of the grid; {budget} compiled), "
             f"**{share_hv:.1%}** of the grid front's hypervolume",
             f"replayed on the grid's rows, same budget, {seeds} seeds: median {statistics.median(curves):.1%} "
             f"(min {min(curves):.1%}, max {max(curves):.1%})", "",
             "| grid front setting | throughput items/s | compile s | peak GiB | measured by the search |",
             "|---|---|---|---|---|"]
    on_front = set(front(list(scaled.points.values())))
    rows = grid.set_index("trial_id")
    for tid, point in sorted(scaled.points.items(), key=lambda kv: kv[1]):
        if point in on_front:
            r = rows.loc[tid]
            compile_s = "-" if r["mode"] == "eager" else f"{r['compile_s']:.1f}"
            lines.append(f"| {_label(r)} | {r['throughput_items_s']:,.0f} | {compile_s} | {r['peak_mem_gib']:.2f} | "
                         f"{'yes' if tid in set(found.trial_id) else 'no'} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("search_spec", type=Path)
    ap.add_argument("search_dir", type=Path)
    ap.add_argument("grid_dir", type=Path)
    ap.add_argument("--seeds", type=int, default=20)
    args = ap.parse_args()
    print("\n".join(compare(args.search_spec, args.search_dir, args.grid_dir, args.seeds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
