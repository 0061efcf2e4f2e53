"""One ranking: the report's per-context choice is what `sweeper recommend` prints, on every
committed result set and a synthetic one; fronts are per context; noise makes ties."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from sweeper.analysis import frames as rows
from sweeper.analysis import ranking
from sweeper.analysis.recommend import recommend_all
from sweeper.report import explore
from sweeper.report import page as report
from sweeper.results import synthetic
from sweeper.results.store import read_results

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = sorted(p.parent for p in (ROOT / "studies").rglob("results.parquet"))


def _study(path: Path) -> str:
    return path.relative_to(ROOT / "studies").parts[0]


FAST_TIER = {next(p for p in COMMITTED if _study(p) == name) for name in {_study(p) for p in COMMITTED}}
"""One result set per study in the fast tier; the full suite checks every one."""


def report_choices(df: pd.DataFrame) -> dict[str, str | None]:
    data = explore.with_view_columns(rows.prepare(df))
    summary = report.context_summary(data)
    return {s["label"]: s["best_setting"] for _, s in summary.iterrows() if pd.notna(s["best_setting"])}


def recommend_choices(df: pd.DataFrame) -> dict[str, str | None]:
    out = {}
    for rec in recommend_all(df):
        label = " · ".join(filter(None, [rec.context["model"], ranking.context_label(rec.context)]))
        out[label] = rec.best.setting if rec.best else None
    return out


@pytest.mark.parametrize("path", [pytest.param(p, id=str(p.relative_to(ROOT)),
                                                 marks=() if p in FAST_TIER else pytest.mark.slow) for p in COMMITTED])
def test_report_choice_is_what_recommend_prints_on_committed_results(path: Path) -> None:
    df = read_results([path])
    from_report = report_choices(df)
    assert from_report, "no context with a choice"
    assert from_report.items() <= recommend_choices(df).items()


def test_report_choice_is_what_recommend_prints_on_synthetic_results() -> None:
    df = synthetic.make_frame(600, seed=3)
    from_report, from_recommend = report_choices(df), recommend_choices(df)
    assert len(from_report) >= 8
    assert from_report.items() <= from_recommend.items()


def test_committed_results_were_found() -> None:
    assert len(COMMITTED) >= 3


def test_fronts_do_not_move_when_another_sweeps_rows_are_added() -> None:
    streams = read_results([ROOT / "studies/streams/results"])
    both = read_results([ROOT / "studies/streams/results", ROOT / "studies/gpu_smoke/results"])

    def fronts(df: pd.DataFrame) -> dict[str, bool]:
        data = explore.with_view_columns(rows.prepare(df))
        on = report.pareto_front(data, objectives=report.FRONT_OBJECTIVES, group_by=ranking.CONTEXT)
        return dict(zip(data["trial_id"], on, strict=True))

    alone, together = fronts(streams), fronts(both)
    assert any(alone.values())
    assert {t: together[t] for t in alone} == alone


def test_noise_decides_ties_and_drift_unsettles_a_speedup() -> None:
    base = {"mode": "default", "speedup_vs_eager": 1.10, "throughput_spread_pct": 3.0}
    assert ranking.standing(base).kind == "faster"
    assert ranking.standing({**base, "throughput_spread_pct": 25.0}).kind == "tie"
    with_ci = {**base, "throughput_spread_pct": 25.0, "speedup_ci_low": 1.05, "speedup_ci_high": 1.14}
    assert ranking.standing(with_ci).kind == "faster"  # the interval, when present, replaces the spread
    assert ranking.standing({**with_ci, "speedup_ci_low": 0.97}).kind == "tie"
    drifted = ranking.standing({**with_ci, "baseline_drift_pct": 12.0})
    assert drifted.kind == "drifted" and "12% from the context's other eager measurements" in drifted.note()
    assert ranking.standing({**with_ci, "baseline_drift_pct": 12.0, "drift_blocks": True}).kind == "drifted"
    between = ranking.standing({**with_ci, "baseline_drift_pct": 12.0, "drift_blocks": False,
                                "speedup_low": 1.02, "speedup_high": 1.2})
    assert between.kind == "faster" and "(12% apart)" in between.source  # its interval spans both speedups
    assert ranking.standing({**base, "speedup_vs_eager": 0.9}).kind == "slower"
    assert ranking.tied(1.0, 1.015, 0.0) and not ranking.tied(1.0, 1.05, 2.0)


def test_one_memory_the_whole_run_peak() -> None:
    row = {"peak_mem_gib": 0.132, "peak_mem_compile_gib": 0.383}
    assert ranking.run_peak_gib(row) == 0.383
    assert ranking.run_peak_gib({"peak_mem_gib": 1.0, "peak_mem_compile_gib": None}) == 1.0


def test_memory_need_prefers_the_compiled_setting_alone():
    from sweeper.analysis.ranking import need_column

    df = pd.DataFrame({"mem_need_reserved_gib": [10.97, 0.99, None], "compiled_need_reserved_gib": [3.6, None, None]})
    need = need_column(df)
    assert need[0] == pytest.approx(3.6) and need[1] == pytest.approx(0.99) and pd.isna(need[2])
    assert need_column(df.drop(columns="compiled_need_reserved_gib"))[0] == pytest.approx(10.97)  # older rows
