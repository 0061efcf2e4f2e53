"""Base vs new results matched by config; regressions flagged beyond the threshold."""

from __future__ import annotations

import pandas as pd

from sweeper.analysis.compare import compare_runs


def row(mode: str, batch: int, tp: float | None = 1000.0, compile_s: float | None = 30.0,
        mem: float | None = 4.0, status: str = "ok", dynamic=None, seq_len=None, **extra) -> dict:
    return {"sweep_id": "s", "trial_id": f"{mode}{batch}{dynamic}", "model": "net", "mode": mode,
            "dynamic": dynamic, "backend": "inductor", "batch_size": batch, "seq_len": seq_len,
            "phase": "infer", "precision": "fp32", "status": status, "throughput_items_s": tp,
            "compile_s": compile_s, "peak_mem_gib": mem, "accuracy_ok": True,
            "error": None if status == "ok" else "RuntimeError: boom", **extra}


def verdicts(base: list[dict], new: list[dict], **kw) -> dict[tuple[str, int], tuple[str, str]]:
    out = compare_runs(pd.DataFrame(base), pd.DataFrame(new), **kw)
    return {(r["mode"], r["batch_size"]): (r["verdict"], r["changes"]) for _, r in out.iterrows()}


def test_throughput_drop_beyond_threshold_is_a_regression() -> None:
    v = verdicts([row("default", 8), row("default", 16)],
                 [row("default", 8, tp=880.0), row("default", 16, tp=970.0)])
    assert v[("default", 8)] == ("regression", "throughput -12.0%")
    assert v[("default", 16)] == ("unchanged", "")


def test_threshold_is_configurable() -> None:
    v = verdicts([row("default", 8)], [row("default", 8, tp=970.0)], threshold_pct=2)
    assert v[("default", 8)][0] == "regression"


def test_compile_time_and_memory_regressions_and_the_compile_floor() -> None:
    v = verdicts([row("default", 8), row("default", 16, compile_s=0.2), row("default", 32)],
                 [row("default", 8, compile_s=45.0), row("default", 16, compile_s=0.4),
                  row("default", 32, mem=5.0, tp=1200.0)])
    assert v[("default", 8)] == ("regression", "compile time +50.0%")
    assert v[("default", 16)][0] == "unchanged"  # +100% but only 0.2 s
    assert v[("default", 32)] == ("regression", "peak memory +25.0%; throughput +20.0%")


def test_improvement_failures_fixes_and_unmatched() -> None:
    base = [row("default", 8), row("default", 16), row("default", 32, status="oom", tp=None),
            row("default", 64), row("max-autotune", 8, status="timeout", tp=None)]
    new = [row("default", 8, tp=1300.0), row("default", 16, status="compile_error", tp=None),
           row("default", 32), row("reduce-overhead", 8), row("max-autotune", 8, status="timeout", tp=None)]
    v = verdicts(base, new)
    assert v[("default", 8)] == ("improvement", "throughput +30.0%")
    assert v[("default", 16)] == ("now fails", "status compile_error: RuntimeError: boom")
    assert v[("default", 32)][0] == "fixed"
    assert v[("default", 64)][0] == "only in base"
    assert v[("reduce-overhead", 8)][0] == "only in new"
    assert v[("max-autotune", 8)][0] == "still fails"
    order = list(compare_runs(pd.DataFrame(base), pd.DataFrame(new))["verdict"])
    assert order[0] == "now fails"


def test_matching_uses_dynamic_and_seq_len_including_nulls() -> None:
    base = [row("default", 8, dynamic=None), row("default", 8, dynamic=False, trial_id="x"),
            row("default", 8, seq_len=128, trial_id="y")]
    new = [row("default", 8, dynamic=None, tp=500.0), row("default", 8, dynamic=False, trial_id="x"),
           row("default", 8, seq_len=128, trial_id="y", tp=2000.0)]
    out = compare_runs(pd.DataFrame(base), pd.DataFrame(new))
    assert len(out) == 3
    got = {(r["dynamic"], None if pd.isna(r["seq_len"]) else int(r["seq_len"])): r["verdict"]
           for _, r in out.iterrows()}
    assert got == {("None", None): "regression", ("False", None): "unchanged", ("None", 128): "improvement"}


def test_several_rows_of_a_setting_use_the_median_and_accuracy_loss_is_a_regression() -> None:
    base = [row("default", 8, tp=t, trial_id=f"b{t}") for t in (900.0, 1000.0, 1100.0)]
    new = [row("default", 8, tp=1000.0, accuracy_ok=False)]
    out = compare_runs(pd.DataFrame(base), pd.DataFrame(new))
    assert out.loc[0, "throughput_items_s_base"] == 1000.0
    assert out.loc[0, "verdict"] == "regression" and out.loc[0, "changes"] == "now inaccurate"


def test_empty_inputs() -> None:
    empty = pd.DataFrame(columns=["sweep_id", "trial_id", "status"])
    assert compare_runs(empty, empty).empty
    out = compare_runs(empty, pd.DataFrame([row("default", 8)]))
    assert list(out["verdict"]) == ["only in new"]
