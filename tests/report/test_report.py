"""The HTML report from synthetic rows: one file, offline, escaped, valid figures, odd inputs."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pytest

from sweeper.report import page as report
from sweeper.results import synthetic
from sweeper.results.schema import COLUMN_NAMES
from sweeper.results.store import read_results, write_rows

XSS = "<script>alert(1)</script>"
ROOT = Path(__file__).resolve().parents[2]


def figures(html_text: str) -> list[dict]:
    m = re.search(r'<script type="application/json" id="sweeper-figs">(.*?)</script>', html_text, re.S)
    assert m, "figure data missing"
    return json.loads(m.group(1))


def without_plotly_bundle(html_text: str) -> str:
    start = html_text.index("/**\n* plotly.js")
    end = html_text.index("</script>", start)
    return html_text[:start] + html_text[end:]


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    out = synthetic.make_rows(300, seed=1, models=["resnet50", "vit_b_16"])
    out[0] = {**out[0], "model": XSS}
    out[1] = {**out[1], "status": "compile_error", "error": f"RuntimeError: {XSS} </script><b>x</b>"}
    return out


def test_report_is_one_offline_file_with_plotly_inlined_once(tmp_path: Path, rows: list[dict]) -> None:
    write_rows(tmp_path / "r.parquet", rows)
    out = report.write_report(read_results([tmp_path]), tmp_path / "report.html", title="t")
    text = out.read_text()
    assert text.count("* plotly.js v") == 1
    page = without_plotly_bundle(text)
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", page)
    assert "http://" not in page and "https://" not in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert 'id="sweeper-selfcheck"' in page


def test_every_text_from_the_data_is_escaped(rows: list[dict]) -> None:
    text = report.build_html(pd.DataFrame(rows), title=f"title {XSS}")
    page = without_plotly_bundle(text)
    assert XSS not in page
    assert "<b>x</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # in headings, tables and the error cell
    figs_json = re.search(r'id="sweeper-figs">(.*?)</script>', page, re.S).group(1)
    assert "<" not in figs_json and ">" not in figs_json  # nothing in the JSON can close the script
    shown = json.dumps(figures(text))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in shown and XSS not in shown


def test_figures_are_valid_plotly_and_count_their_points(rows: list[dict]) -> None:
    df = pd.DataFrame(rows)
    figs = figures(report.build_html(df))
    assert {f["kind"] for f in figs} == {"scatter", "heatmap", "bar", "parcoords"}
    for f in figs:
        go.Figure(data=f["data"], layout=f["layout"])  # raises on any property plotly does not know
        assert f["expected"] > 0
    scatter_points = sum(f["expected"] for f in figs if f["kind"] == "scatter")
    plotted = df[df["status"].eq("ok") & df["peak_mem_gib"].gt(0) & df["throughput_items_s"].gt(0)]
    assert scatter_points == len(plotted)


def test_sections_for_awkward_inputs() -> None:
    rows = synthetic.make_rows(40, models=["resnet50"])
    failed_only = [{**r, "model": "broken", "status": "oom", "error": "CUDA out of memory",
                    "throughput_items_s": None, "peak_mem_gib": None} for r in rows[:5]]
    eager_only = [{**r, "model": "plain"} for r in rows if r["mode"] == "eager"][:3]
    unchecked = [{**r, "model": "unchecked", "accuracy_ok": None} for r in rows if r["mode"] != "eager"][:3]
    text = report.build_html(pd.DataFrame(rows + failed_only + eager_only + unchecked))
    assert "all trials failed" in text
    assert "eager only: nothing compiled" in text
    assert "no accurate compiled run" in text
    assert "CUDA out of memory" in text


def test_empty_results_and_missing_columns() -> None:
    empty = report.build_html(pd.DataFrame(columns=COLUMN_NAMES))
    assert "No trials in these results" in empty
    thin = pd.DataFrame(synthetic.make_rows(30))[["sweep_id", "trial_id", "status", "model", "mode",
                                                   "throughput_items_s"]]
    text = report.build_html(thin)  # no memory, no phase, no device: still a page
    assert "nothing to plot" in text
    nan_rows = pd.DataFrame(synthetic.make_rows(30)).assign(speedup_vs_eager=float("nan"),
                                                             eager_throughput_items_s=None, model=None)
    assert "(unnamed model)" in report.build_html(nan_rows)


def test_comparison_section(rows: list[dict]) -> None:
    base = pd.DataFrame(synthetic.make_rows(300, seed=2, models=["resnet50", "vit_b_16"]))
    text = report.build_html(pd.DataFrame(rows), compare_df=base)
    assert "Comparison with the base results" in text
    assert "regression" in text
    assert "Comparison" not in report.build_html(pd.DataFrame(rows))


def test_scale_benchmark_runs_small(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "benchmarks.report_scale", "--trials", "200",
                          "--out", str(tmp_path / "scale.html")], capture_output=True, text=True, timeout=120,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert "trials: 200" in out.stdout and "MB" in out.stdout
    assert (tmp_path / "scale.html").stat().st_size > 1_000_000


def test_header_says_when_trials_shared_a_gpu(rows: list[dict]) -> None:
    assert "shared a GPU" not in report.build_html(pd.DataFrame(rows[:40]))
    shared = [{**r, "trials_per_gpu": 2, "host_busy_windows_pct": 30.0 if i % 2 else 10.0}
              for i, r in enumerate(rows[:40])]
    text = report.build_html(pd.DataFrame(shared))
    assert "<b>40 trials shared a GPU</b> (a neighbour compiled during 20% of their timed windows)" in text


def test_speedup_colours_are_anchored_at_one_and_symmetric_in_ratio(rows: list[dict]) -> None:
    """2x faster is as green as 2x slower is orange, and 1x is the scale's middle, whatever range
    the speedups span (a linear scale from 1.9x to 8.5x once coloured every 2x cell orange)."""
    figs = figures(report.build_html(pd.DataFrame(rows)))
    heat = [f for f in figs if f["kind"] == "heatmap"]
    lines = [f["data"][0] for f in figs if f["kind"] == "parcoords"]
    assert heat and lines
    for fig in heat:
        (trace,) = fig["data"]
        assert trace["zmin"] == -trace["zmax"] and trace["zmax"] >= 1
        for z_row, text_row in zip(trace["z"], trace["text"], strict=True):
            for z, text in zip(z_row, text_row, strict=True):
                if z is not None:  # the colour value is log2 of the speedup the cell shows
                    assert z == pytest.approx(math.log2(float(text.rstrip("×"))), abs=0.01)
        bar = trace["colorbar"]
        assert "1×" in bar["ticktext"] and bar["tickvals"][bar["ticktext"].index("1×")] == 0
    for trace in lines:  # each line's colour is log2 of its speedup axis value
        line, (speedups,) = trace["line"], [d["values"] for d in trace["dimensions"] if d["label"] == "speedup ×"]
        assert line["cmin"] == -line["cmax"] and len(line["color"]) == len(speedups)
        assert line["color"] == pytest.approx([math.log2(v) if v > 0 else 0.0 for v in speedups], abs=0.01)
