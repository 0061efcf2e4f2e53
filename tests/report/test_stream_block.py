"""The report's input-stream block: what it recommends, settings that fell back never recommended,
and the block rendered in a browser."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from sweeper.report import page as report


def stream_rows() -> list[dict]:
    base = {"sweep_id": "s1", "sweep_name": "s", "model": "bert-base", "task": "nlp", "backend": "inductor",
            "batch_size": 8, "phase": "infer", "precision": "bf16", "device_name": "H200", "status": "ok",
            "workload": "lognormal180", "length_source": "lognormal(mu=5.193, sigma=0.6)", "stream_batches": 64,
            "accuracy_ok": True, "peak_mem_gib": 1.0, "eager_peak_mem_gib": 1.0}
    waste = {"none": 0.49, "pow2": 0.58, "multiple:64": 0.52}
    out = []
    for policy, w in waste.items():
        out.append({**base, "mode": "eager", "bucketing": policy, "pad_waste": w, "stream_s": 2.0 + w,
                    "eager_stream_s": 2.0 + w, "real_tokens_per_s": 5e4, "throughput_items_s": 500.0, "graphs": 0})
        for dyn, s, graphs in ((None, 9.0, 2), (True, 7.0, 1), (False, 30.0 if policy == "none" else 6.0, 8)):
            out.append({**base, "mode": "default", "dynamic": dyn, "bucketing": policy, "pad_waste": w,
                        "stream_s": s + w, "eager_stream_s": 2.0 + w, "real_tokens_per_s": 9e4 - graphs,
                        "throughput_items_s": 900.0, "graphs": graphs, "recompiles": graphs - 1,
                        "stream_compile_s": s + w - 0.6,
                        "compile_s_per_shape": 1.0, "stream_break_even_batches": 12.0,
                        "fell_back_to_eager": dyn is False and policy == "none"})
    out.append({**base, "mode": "default", "dynamic": True, "bucketing": "pow2", "mark_dynamic": False,
                "status": "inaccurate", "stream_s": 1.0, "accuracy_ok": False, "eager_stream_s": 2.5})
    for i, r in enumerate(out):
        r["trial_id"] = f"t{i}"
    return out


def test_report_stream_block_recommends_and_flags_fallback() -> None:
    from sweeper.analysis import frames as rows
    from sweeper.analysis.recommend import Limits, recommend_context

    df = pd.DataFrame(stream_rows())
    one_pass = recommend_context(rows.prepare(df), Limits(iterations=64)).best
    assert (one_pass.mode, one_pass.setting) == ("eager", "eager, batch 8")  # one pass: compiles never pay back
    html = report.build_html(df)
    assert "Input stream lognormal180" in html and "<b>One stream of 64 batches</b>, every compile paid" in html
    assert "eager, batch 8" in html.split("One stream of 64 batches")[1].split("</p>")[0]
    assert "FELL BACK TO EAGER: 1 setting</b>" in html
    assert "pow2 \\u00b7 pad 58%" in html  # a bar label, in the figure JSON


def test_stream_settings_that_fell_back_are_never_recommended() -> None:
    from sweeper.analysis import frames as rows
    from sweeper.analysis.recommend import recommend_context

    data = [{**r, "throughput_items_s": 5000.0} if r.get("fell_back_to_eager") else r for r in stream_rows()]
    rec = recommend_context(rows.prepare(pd.DataFrame(data)))
    assert rec.best.throughput_items_s == 900.0  # the faster row fell back to eager
    assert any(e.kind == "recompile limit" for e in rec.excluded)


@pytest.mark.slow
def test_stream_block_renders_in_a_browser(tmp_path: Path, run_chromium) -> None:
    import html
    import json
    import re

    path = report.write_report(pd.DataFrame(stream_rows()), tmp_path / "report.html")
    out = run_chromium("--dump-dom", path.as_uri())
    check = json.loads(html.unescape(re.search(r'<pre id="sweeper-selfcheck">(.*?)</pre>', out.stdout, re.S).group(1)))
    assert check["ok"] is True and check["errors"] == [], check
    stream_plots = [p for p in check["plots"] if "stream" in p["title"] or "graphs compiled" in p["title"]]
    assert len(stream_plots) == 2 and all(p["rendered"] == p["expected"] == 12 for p in stream_plots)
