"""Recommendation under memory, compile-time and run-length limits, on a hand-made table."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from sweeper.analysis.recommend import RecommendError, recommend
from sweeper.analysis.recommend_text import render


def row(mode: str, tp: float | None, mem: float | None, compile_s: float | None, *, dynamic=None,
        batch: int = 64, status: str = "ok", accuracy_ok=True, **extra) -> dict:
    eager = mode == "eager"
    return {"sweep_id": "s1", "trial_id": f"{mode}-{dynamic}-{batch}-{status}-{tp}", "model": "net",
            "mode": mode, "dynamic": dynamic, "backend": None if eager else "inductor", "batch_size": batch,
            "phase": "infer", "precision": "fp32", "device_name": "H200", "status": status,
            "error": None if status == "ok" else "torch.OutOfMemoryError: CUDA out of memory",
            "throughput_items_s": tp, "peak_mem_gib": mem, "compile_s": compile_s,
            "accuracy_ok": None if eager else accuracy_ok, **extra}


@pytest.fixture
def table() -> pd.DataFrame:
    return pd.DataFrame([
        row("eager", 1000.0, 4.0, None),
        row("default", 1500.0, 4.2, 30.0, peak_mem_compile_gib=4.8),
        row("max-autotune", 1800.0, 5.0, 300.0, dynamic=False),
        row("reduce-overhead", 3000.0, 3.0, 10.0, accuracy_ok=False, rel_err=0.3, accuracy_tol=0.01),
        row("reduce-overhead", 2900.0, 3.0, 10.0, dynamic=True, accuracy_ok=None),
        row("max-autotune", None, None, None, dynamic=True, status="oom"),
    ])


def test_long_run_picks_highest_throughput_accurate_setting(table: pd.DataFrame) -> None:
    rec = recommend(table, "net")
    assert rec.advice == 'torch.compile(model, mode="max-autotune", dynamic=False)'
    assert rec.runner_up is not None and rec.runner_up.mode == "default"
    assert "lower throughput" in rec.runner_up_reason
    assert rec.eager is not None and rec.eager.throughput_items_s == 1000.0
    reasons = {e.kind for e in rec.excluded}
    assert reasons == {"inaccurate", "accuracy unchecked", "failed"}


def test_short_run_compile_time_is_not_paid_back_so_eager_wins(table: pd.DataFrame) -> None:
    # 1,000 iterations x 64 = 64,000 items: eager 64 s, default 30 + 42.7 s, max-autotune 300 + 35.6 s
    rec = recommend(table, "net", iterations=1000)
    assert rec.advice == "do not compile: eager wins"
    assert rec.workload_items == 64_000
    assert rec.best.workload_s == pytest.approx(64.0)
    assert rec.runner_up.mode == "default"
    assert "not paid back" in rec.runner_up_reason


def test_medium_run_cheap_compile_wins(table: pd.DataFrame) -> None:
    # 10,000 iterations: eager 640 s, default 30 + 426.7 s, max-autotune 300 + 355.6 s
    rec = recommend(table, "net", iterations=10_000)
    assert rec.best.mode == "default"
    assert rec.best.workload_s == pytest.approx(30 + 640_000 / 1500)
    assert rec.runner_up.mode == "eager"


def test_memory_limit_counts_compile_transients(table: pd.DataFrame) -> None:
    rec = recommend(table, "net", max_memory_gib=4.5)
    assert rec.best.mode == "eager"  # default peaks at 4.8 GiB while compiling, max-autotune at 5
    mem = [e for e in rec.excluded if e.kind == "over memory limit"]
    assert {e.setting.split(",")[0] for e in mem} == {"default", "max-autotune"}
    assert any("4.8 GiB > limit 4.5 GiB" in e.reason for e in mem)


def test_compile_time_limit(table: pd.DataFrame) -> None:
    rec = recommend(table, "net", max_compile_s=100)
    assert rec.best.compile_call == 'torch.compile(model, mode="default", dynamic=None)'
    assert any(e.kind == "over compile limit" and "300 s > limit 100 s" in e.reason for e in rec.excluded)


def test_nothing_fits(table: pd.DataFrame) -> None:
    rec = recommend(table, "net", max_memory_gib=0.5)
    assert rec.best is None and rec.runner_up is None
    assert rec.advice == "no setting meets the constraints"
    assert "No setting meets" in render(rec)


def test_batch_sizes_compare_by_time_per_item() -> None:
    df = pd.DataFrame([
        row("eager", 1000.0, 4.0, None, batch=64),
        row("eager", 800.0, 2.0, None, batch=32),
        row("default", 1200.0, 2.1, 20.0, batch=32),
        row("default", 1100.0, 4.1, 20.0, batch=64),
    ])
    assert recommend(df, "net").best.batch_size == 32  # 1200 items/s beats 1100 at batch 64
    fixed = recommend(df, "net", batch_size=64)
    assert fixed.best.batch_size == 64 and fixed.best.mode == "default"
    # iterations count at the largest batch measured: 100 x 64 = 6,400 items for every candidate
    short = recommend(df, "net", iterations=100)
    assert short.workload_items == 6400
    assert short.best.mode == "eager" and short.best.batch_size == 64
    assert short.runner_up.workload_s == pytest.approx(20 + 6400 / 1200)


def test_eager_baseline_from_compiled_trials_when_no_eager_row() -> None:
    df = pd.DataFrame([
        row("default", 900.0, 3.0, 30.0, eager_throughput_items_s=1000.0, eager_peak_mem_gib=2.5),
        row("max-autotune", 950.0, 3.1, 200.0, eager_throughput_items_s=1010.0, eager_peak_mem_gib=2.5),
    ])
    rec = recommend(df, "net")
    assert rec.advice == "do not compile: eager wins"
    assert rec.best.throughput_items_s == pytest.approx(1005.0)
    assert rec.best.trial_id is None


def test_recompile_limit_hit_is_not_recommended() -> None:
    df = pd.DataFrame([row("eager", 1000.0, 4.0, None),
                       row("default", 1900.0, 4.0, 10.0, dynamic=True, recompile_limit_hit=True)])
    rec = recommend(df, "net")
    assert rec.best.mode == "eager"
    assert rec.excluded[0].kind == "recompile limit"


def test_backend_other_than_inductor_is_in_the_call() -> None:
    df = pd.DataFrame([row("default", 1900.0, 4.0, 10.0, dynamic=False, backend="aot_eager")])
    assert recommend(df, "net").advice == 'torch.compile(model, backend="aot_eager", mode="default", dynamic=False)'


def test_unknown_model_lists_the_valid_ones(table: pd.DataFrame) -> None:
    with pytest.raises(RecommendError, match=r"unknown model 'resnet'.*: net"):
        recommend(table, "resnet")


def test_ambiguous_context_asks_for_the_missing_choice(table: pd.DataFrame) -> None:
    both = pd.concat([table, table.assign(phase="train", trial_id=lambda d: d["trial_id"] + "t")])
    with pytest.raises(RecommendError, match=r"--phase \(infer \| train\)"):
        recommend(both, "net")
    assert recommend(both, "net", phase="train").context["phase"] == "train"
    with pytest.raises(RecommendError, match="phase=eval; measured: infer, train"):
        recommend(both, "net", phase="eval")


def test_json_dict_is_strict_json(table: pd.DataFrame) -> None:
    table.loc[1, "break_even_iters"] = math.inf
    rec = recommend(table, "net", iterations=10)
    text = json.dumps(rec.to_dict(), allow_nan=False)
    back = json.loads(text)
    assert back["advice"] == rec.advice
    assert back["best"]["compile_call"] == rec.best.compile_call
    assert {"setting", "trial_id", "kind", "reason"} <= set(back["excluded"][0])


def test_text_names_best_runner_up_and_exclusions(table: pd.DataFrame) -> None:
    text = render(recommend(table, "net", iterations=10_000))
    assert "Recommendation: torch.compile(model, mode=\"default\", dynamic=None)" in text
    assert "Runner-up: eager" in text
    assert "Excluded (3" in text and "status oom" in text


def _stream(mode: str, tp: float, bucketing: str, compile_s: float | None, stream_compile_s: float | None,
            dynamic=None) -> dict:
    return row(mode, tp, 1.0, compile_s, dynamic=dynamic, batch=8, workload="traffic", bucketing=bucketing,
               stream_compile_s=stream_compile_s, mark_dynamic=False)


def test_stream_settings_pay_every_compile_of_the_stream_and_name_their_bucketing() -> None:
    # both compile their first shape in 10 s; multiple:64 then compiles 5 more graphs (60 s in all)
    df = pd.DataFrame([_stream("eager", 1000.0, "none", None, None),
                       _stream("default", 2000.0, "pow2", 10.0, 20.0, dynamic=False),
                       _stream("default", 2100.0, "multiple:64", 10.0, 60.0, dynamic=False)])
    long_run = recommend(df, "net")
    assert long_run.best.throughput_items_s == 2100.0 and long_run.best.compile_s == 60.0
    assert long_run.advice == ('pad each batch by bucketing multiple:64; '
                               'torch.compile(model, mode="default", dynamic=False)')
    # 100,000 iterations x 8 = 800,000 items: pow2 20 + 400 s, multiple:64 60 + 381 s, eager 800 s
    short = recommend(df, "net", iterations=100_000)
    assert short.advice.startswith("pad each batch by bucketing pow2;")
    assert short.runner_up.compile_s == 60.0 and "not paid back" in short.runner_up_reason
    assert "compiles over the stream 20 s" in render(short)
    limited = recommend(df, "net", max_compile_s=30.0)
    assert limited.best.throughput_items_s == 2000.0
    (over,) = [e for e in limited.excluded if e.kind == "over compile limit"]
    assert "compiles over the stream 60 s > limit 30 s" in over.reason


def test_a_gap_inside_the_window_spread_is_called_a_tie() -> None:
    noisy = pd.DataFrame([row("eager", 1000.0, 1.0, None, throughput_spread_pct=2.0),
                          row("default", 1500.0, 1.0, 5.0, throughput_spread_pct=12.0),
                          row("max-autotune", 1620.0, 1.0, 9.0, throughput_spread_pct=3.0)])
    rec = recommend(noisy, "net")  # 8% apart, inside the 12% spread (beyond the 4% tie band): a tie
    assert rec.best.mode == "default" and rec.runner_up.mode == "max-autotune"  # the cheaper compile
    assert rec.runner_up_reason.startswith("8% faster, inside the measured noise (±12%), so a tie; its cold "
                                           "compile takes 9 s against 5 s")
    quiet = recommend(noisy.assign(throughput_spread_pct=1.0), "net")
    assert quiet.best.mode == "max-autotune" and "noise" not in quiet.runner_up_reason


def test_among_ties_an_option_set_is_recommended_only_for_a_shorter_compile() -> None:
    """A knob that doubles the compile for a gain inside the noise is not recommended; with compiles
    alike, the mode alone beats an option set it ties with; beyond the noise the faster one wins."""
    opts = '{"coordinate_descent_tuning": true}'
    df = pd.DataFrame([row("eager", 1000.0, 1.0, None),
                       row("default", 2000.0, 1.0, 10.0, throughput_spread_pct=8.0),
                       row("default", 2010.0, 1.0, 24.0, throughput_spread_pct=8.0, option_set="cdt",
                           inductor_options_json=opts, trial_id="cdt")])
    rec = recommend(df, "net")
    assert rec.best.compile_s == 10.0 and rec.runner_up.trial_id == "cdt"
    assert "its cold compile takes 24 s against 10 s" in rec.runner_up_reason
    alike = recommend(df.assign(compile_s=[None, 10.0, 10.5]), "net")
    assert alike.best.compile_s == 10.0 and "an inductor option set of its own" in alike.runner_up_reason
    apart = recommend(df.assign(throughput_spread_pct=1.0, throughput_items_s=[1000.0, 2000.0, 2400.0]), "net")
    assert apart.best.trial_id == "cdt"


def test_a_drifted_baseline_or_an_interval_across_one_leaves_the_speedup_unestablished() -> None:
    df = pd.DataFrame([row("eager", 1000.0, 1.0, None),
                       row("default", 1500.0, 1.0, 5.0, speedup_vs_eager=1.5, speedup_ci_low=1.4,
                           speedup_ci_high=1.6, baseline_drift_pct=12.0)])
    rec = recommend(df, "net")
    assert rec.best.mode == "default" and not rec.best.speedup_established
    assert "differs by 12% from the context's other eager measurements" in rec.best.speedup_note
    assert "speedup not established" in render(rec) and "baseline drifted" in rec.verdict
    steady = recommend(df.assign(baseline_drift_pct=1.0), "net")
    assert steady.best.speedup_established and steady.verdict == "compile: 1.50× faster"
    wide = recommend(df.assign(baseline_drift_pct=1.0, speedup_ci_low=0.9), "net")
    assert not wide.best.speedup_established and "inside the noise" in wide.verdict
    assert json.loads(json.dumps(wide.to_dict()))["best"]["speedup_ci_low"] == 0.9
