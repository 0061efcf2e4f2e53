"""The price of each option set and the deployment paths' first-call costs, on hand-made rows."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from sweeper.analysis import deploy_calls, frames, knob_price

_BASE = {"model": "m", "phase": "infer", "precision": "fp32", "device_name": "gpu", "task": "vision",
         "mode": "default", "dynamic": False, "batch_size": 8, "status": "ok", "accuracy_ok": True,
         "backend": "inductor", "path": "jit", "eager_throughput_items_s": 100.0}


def _row(option_set, speedup, low, high, compile_s, warm_s=1.0, **more):
    return {**_BASE, "option_set": option_set, "speedup_vs_eager": speedup, "speedup_ci_low": low,
            "speedup_ci_high": high, "compile_s": compile_s, "warm_compile_s": warm_s,
            "throughput_items_s": 100.0 * speedup, **more}


def test_each_set_is_priced_against_the_default_set():
    df = pd.DataFrame([_row("default", 2.0, 1.9, 2.1, 10.0),
                       _row("cdt", 2.02, 1.95, 2.08, 30.0, inductor_options_json=json.dumps(
                           {"coordinate_descent_tuning": True})),
                       _row("freeze", 2.6, 2.5, 2.7, 12.0, inductor_options_json=json.dumps({"freezing": True}))])
    table = knob_price.price_table(df).set_index("option_set")
    assert set(table.index) == {"cdt", "freeze"}
    cdt, freeze = table.loc["cdt"], table.loc["freeze"]
    assert round(cdt["throughput_change_pct"], 1) == 1.0 and cdt["verdict"] == "a tie; cold compile +200%"
    assert cdt["throughput_change_low_pct"] < 0 < cdt["throughput_change_high_pct"]
    assert freeze["verdict"].startswith("faster") and round(freeze["cold_compile_change_pct"]) == 20
    assert json.loads(cdt["options"]) == {"coordinate_descent_tuning": True}


def test_deploy_table_puts_jit_cold_megacache_and_aoti_load_side_by_side():
    df = pd.DataFrame([_row("default", 2.0, 1.9, 2.1, 13.0, warm_megacache_s=2.0, megacache_load_s=0.5),
                       _row("default", 2.1, 2.0, 2.2, 80.0, path="aoti", aoti_load_s=1.5, first_call_s=0.06,
                            aoti_package_bytes=106e6)])
    (row,) = knob_price.deploy_table(df).to_dict("records")
    assert (row["jit_cold_s"], row["jit_megacache_s"], row["aoti_build_s"]) == (13.0, 2.5, 80.0)
    step_s = 8 / 210.0
    assert abs(row["aoti_load_first_call_s"] - (1.5 + 0.06 - step_s)) < 1e-9
    assert frames.compile_cost_s(frames.prepare(df).iloc[1], warm_start=True) == row["aoti_load_first_call_s"]


def test_an_aoti_start_counts_the_cpu_check_its_load_runs_where_measured():
    """A deployment with an empty inductor cache pays the load, inductor's CPU check and the first call
    beyond a step; rows from before the check was timed apart carry it inside aoti_load_s."""
    row = _row("default", 2.1, 2.0, 2.2, 80.0, path="aoti", aoti_load_s=0.01, aoti_isa_check_s=7.5,
               first_call_s=0.06)
    step_s = 8 / 210.0
    assert deploy_calls.aoti_start_s(row) == pytest.approx(0.01 + 7.5 + 0.06 - step_s)
    assert deploy_calls.aoti_start_s({**row, "aoti_isa_check_s": None}) == pytest.approx(0.01 + 0.06 - step_s)


def test_a_crashed_load_is_listed_with_its_reason():
    df = pd.DataFrame([_row("default", 2.0, 1.9, 2.1, 13.0),
                       {**_BASE, "path": "aoti", "option_set": "default", "status": "crashed",
                        "error": "aoti load (fresh process): process killed by SIGSEGV"}])
    failed = knob_price.failed_aoti(df)
    assert failed["status"].tolist() == ["crashed"] and "SIGSEGV" in failed["error"].iloc[0]


def test_the_report_shows_the_price_and_deployment_blocks():
    from sweeper.report import knobs

    df = pd.DataFrame([_row("default", 2.0, 1.9, 2.1, 13.0, warm_megacache_s=2.0, megacache_load_s=0.5),
                       _row("cdt", 2.02, 1.95, 2.08, 30.0, inductor_options_json='{"coordinate_descent_tuning": true}'),
                       _row("default", 2.1, 2.0, 2.2, 80.0, path="aoti", aoti_load_s=1.5, first_call_s=0.06,
                            aoti_package_bytes=106e6),
                       {**_BASE, "path": "aoti", "option_set": "cdt", "status": "crashed",
                        "error": "aoti load (fresh process): process killed by SIGSEGV <x>"}])
    ctx = frames.prepare(df)
    price, deploy = knobs.price_block(ctx), knobs.deploy_block(ctx)
    assert "coordinate_descent_tuning" in price and "a tie; cold compile +131%" in price
    assert "AOTI load + first call s" in deploy and "SIGSEGV &lt;x&gt;" in deploy
