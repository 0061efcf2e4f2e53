"""Plotly figures of the report, as plain figure dicts (data + layout) ready for plotly.js.

Dicts rather than plotly.graph_objects: a 10,000-trial report builds hundreds of traces and
validating each one costs more than the rest of the report. Every string taken from the
data is HTML-escaped here, because plotly.js reads its text as a subset of HTML. Each
figure carries `expected`, the number of points (bars, heatmap cells) that must render.
"""

from __future__ import annotations

import html
import math
from typing import Any

import pandas as pd

from sweeper.analysis import frames
from sweeper.analysis.frames import fmt_num, is_missing

Figure = dict[str, Any]

MODE_COLOURS = {"eager": "#6b7280", "default": "#2563eb", "reduce-overhead": "#ea580c",
                "max-autotune": "#16a34a", "max-autotune-no-cudagraphs": "#9333ea"}
_EXTRA_COLOURS = ["#0891b2", "#be185d", "#854d0e", "#4d7c0f", "#1e3a8a"]
DYNAMIC_SYMBOLS = {"None": "circle", "True": "square", "False": "diamond"}
DYNAMIC_GLYPHS = {"None": "\u25cf", "True": "\u25a0", "False": "\u25c6"}
_FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, Helvetica, Arial, sans-serif", "size": 13}


def plotly_text(value: Any) -> str:
    """Data text for plotly: HTML-escaped (plotly.js decodes the entities back)."""
    return html.escape(str(value), quote=False)


def mode_colour(mode: str, known: list[str] | None = None) -> str:
    if mode in MODE_COLOURS:
        return MODE_COLOURS[mode]
    others = sorted(set(known or []) - set(MODE_COLOURS)) or [mode]
    return _EXTRA_COLOURS[others.index(mode) % len(_EXTRA_COLOURS)] if mode in others else _EXTRA_COLOURS[0]


def _layout(title: str, height: int, **extra: Any) -> dict[str, Any]:
    return {"title": {"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 15}},
            "height": height, "font": _FONT, "paper_bgcolor": "#ffffff", "plot_bgcolor": "#f7f8fa",
            "margin": {"l": 70, "r": 20, "t": 50, "b": 60}, "hoverlabel": {"align": "left"}, **extra}


RATIO_COLOURS = [[0, "#c2410c"], [0.5, "#f3f4f6"], [1, "#15803d"]]
"""Slower than eager (orange) - as fast (grey-white) - faster (green)."""


def ratio_colour(values: list[float]) -> tuple[list[float], dict[str, Any]]:
    """Speedups as colour values: log2 of each ratio, on a scale symmetric about 1x (2x faster and 2x
    slower equally strong) whose colour bar is labelled in x; returns (values, colour settings)."""
    logs = [math.log2(v) if v > 0 else 0.0 for v in values]
    span = max(1.0, math.ceil(max((abs(v) for v in logs), default=0.0)))
    ticks = list(range(-int(span), int(span) + 1, 1 if span <= 3 else 2))  # 1x always among them
    bar = {"title": {"text": "speedup ×"}, "tickvals": ticks,
           "ticktext": [f"{2.0 ** t:g}×" for t in ticks]}
    return [round(v, 4) for v in logs], {"colorscale": RATIO_COLOURS, "cmin": -span, "cmax": span, "colorbar": bar}


def si_text(value: float) -> str:
    """A tick label: 0.2, 5, 500, 2k, 50k, 1M."""
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{unit}"
    return f"{value:g}"


def log_ticks(low: float, high: float) -> dict[str, Any]:
    """Ticks of a log axis from `low` to `high` (> 0), every label a whole number: 1-2-5 per decade
    up to three decades, powers of ten beyond (plotly's own minor labels read "2", "5" for 2k, 50k).
    report/explore_js.py's logTicks draws the same for an axis chosen in the page."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    steps = (1,) if last - first > 3 else (1, 2, 5)
    values = [float(f"{m * 10.0 ** k:.6g}") for k in range(first, last + 1) for m in steps]
    return {"tickmode": "array", "tickvals": values, "ticktext": [si_text(v) for v in values]}


def _axis(title: str, values: pd.Series | None = None, **extra: Any) -> dict[str, Any]:
    axis = {"title": {"text": title}, "gridcolor": "#e3e6ea", "zeroline": False, **extra}
    if values is not None and len(values) and values.min() > 0 and values.max() / values.min() > 30:
        axis.update(type="log", **log_ticks(float(values.min()), float(values.max())))
    return axis


def _clean(values: Any) -> list[Any]:
    """JSON-ready list: NaN and inf become null."""
    return [None if isinstance(v, float) and not math.isfinite(v) else v
            for v in (v.item() if hasattr(v, "item") else v for v in values)]


def hover_text(df: pd.DataFrame) -> list[str]:
    """Per-point hover lines: batch, measurements with their noise, compile health, front, trial."""
    texts = []
    for r in df.itertuples(index=False):
        acc = accuracy_label(r.is_eager, r.accuracy_ok, "not checked")
        lines = [f"batch {fmt_num(r.batch_size)}" + (f" · seq {fmt_num(r.seq_len)}" if pd.notna(r.seq_len) else "")
                 + (f" · bucketing {plotly_text(r.bucketing)}" if isinstance(r.bucketing, str) else ""),
                 f"throughput {fmt_num(r.throughput_items_s)} items/s · speedup {fmt_num(r.speedup_vs_eager)}×"
                 + ("" if r.is_eager else f" ({fmt_num(r.speedup_low)}-{fmt_num(r.speedup_high)}, {r.standing})"),
                 f"peak memory {fmt_num(r.run_peak_mem_gib)} GiB whole run · {fmt_num(r.peak_mem_gib)} steady"
                 + (f" · needs {fmt_num(r.need_mem_gib)} reserved"
                    if pd.notna(getattr(r, "need_mem_gib", None)) else "")]
        if not r.is_eager:
            warm = f" · warm {fmt_num(r.warm_compile_s)} s" if r.warm_compile_s >= 0 else ""
            lines += [f"compile {fmt_num(r.compile_cost_s)} s cold{warm}",
                      f"graph breaks {fmt_num(r.graph_breaks)} · recompiles {fmt_num(r.recompiles)} · accuracy {acc}"]
        front = "<b>on the Pareto front</b>" if r.on_front else "dominated"
        lines.append(front + f" · trial {plotly_text(r.trial_id)}")
        texts.append("<br>".join(lines))
    return texts


def accuracy_label(is_eager: bool, accuracy_ok: object, unknown: str) -> str:
    """The one accuracy label: eager is the reference; compiled passed, FAILED, or `unknown`."""
    if is_eager:
        return "reference"
    if is_missing(accuracy_ok):
        return unknown
    return "passed" if bool(accuracy_ok) else "FAILED"


def mode_order(mode: str) -> tuple[int, str]:
    order = list(MODE_COLOURS)
    return (order.index(mode) if mode in order else len(order), mode)


def key_traces(modes: list[str]) -> list[dict[str, Any]]:
    """Legend-only traces (no points): one per mode (colour), per dynamic value (symbol), front/dominated."""
    def key(name: str, legend: str, group: str | None, **marker: Any) -> dict[str, Any]:
        return {"type": "scatter", "mode": "markers", "x": [None], "y": [None], "name": name, "legend": legend,
                "legendgroup": group, "showlegend": True, "hoverinfo": "skip",
                "marker": {"size": 10, "color": "#6b7280", "line": {"width": 0}, **marker}}
    out = [key(plotly_text(m), "legend", f"mode:{m}", color=mode_colour(m, modes), symbol="square") for m in modes]
    out += [key(f"dynamic={d}", "legend2", None, symbol=sym) for d, sym in DYNAMIC_SYMBOLS.items()]
    out.append(key("on Pareto front (throughput, run memory, compile)", "legend2", None, size=12,
                   line={"width": 1.6, "color": "#111827"}))
    out.append(key("dominated (faded)", "legend2", None, opacity=0.3))
    out.append(key("size = compile time", "legend2", None, size=16, symbol="circle-open"))
    return out


def speedup_heatmap(ctx: pd.DataFrame, title: str) -> Figure | None:
    """Best accurate speedup per compile mode x batch size."""
    data = ctx[~ctx["is_eager"] & frames.accurate(ctx) & ctx["speedup_vs_eager"].gt(0)]
    if data.empty:
        return None
    best = data.loc[data.groupby(["mode", "batch_size"])["speedup_vs_eager"].idxmax()]
    modes = sorted(best["mode"].unique(), key=mode_order)
    batches = sorted(best["batch_size"].unique())
    z: list[list[float | None]] = [[None] * len(batches) for _ in modes]
    text = [[""] * len(batches) for _ in modes]
    hover = [[""] * len(batches) for _ in modes]
    colour, scale = ratio_colour(best["speedup_vs_eager"].astype(float).tolist())
    for (_, r), c in zip(best.iterrows(), colour, strict=True):
        i, j = modes.index(r["mode"]), batches.index(r["batch_size"])
        z[i][j], text[i][j] = c, f"{r['speedup_vs_eager']:.2f}×"
        hover[i][j] = f"{plotly_text(r['mode'])}, batch {fmt_num(r['batch_size'])}: " \
                      f"{r['speedup_vs_eager']:.2f}× eager" \
                      f"<br>best with dynamic={plotly_text(r['dynamic_label'])}"
    trace = {"type": "heatmap", "x": [fmt_num(b) for b in batches], "y": [plotly_text(m) for m in modes],
             "z": z, "text": text, "texttemplate": "%{text}", "hovertext": hover,
             "hovertemplate": "%{hovertext}<extra></extra>", "zmin": scale["cmin"], "zmax": scale["cmax"],
             "colorscale": scale["colorscale"], "colorbar": scale["colorbar"], "xgap": 2, "ygap": 2}
    layout = _layout(title, 170 + 46 * len(modes), margin={"l": 60, "r": 20, "t": 50, "b": 60},
                     xaxis=_axis("Batch size (items)", type="category"),
                     yaxis=_axis("", automargin=True, type="category"))
    return {"kind": "heatmap", "title": title, "expected": len(best), "data": [trace], "layout": layout}


def compile_bars(ctx: pd.DataFrame, title: str) -> Figure | None:
    """Median cold (and warm, where measured) compile seconds per mode x dynamic."""
    data = ctx[~ctx["is_eager"] & ctx["status"].eq("ok") & ctx["compile_s"].notna()]
    if data.empty:
        return None
    data = data.assign(_label=data["mode"].map(plotly_text) + ", dynamic=" + data["dynamic_label"])
    g = data.groupby("_label", sort=False)
    stats = pd.DataFrame({"cold": g["compile_s"].median(), "warm": g["warm_compile_s"].median(),
                          "lo": g["compile_s"].min(), "hi": g["compile_s"].max(), "n": g.size()})
    stats = stats.sort_values("cold")
    cold_text = [f"{lab}<br>cold compile: median {fmt_num(r.cold)} s (min {fmt_num(r.lo)}, max {fmt_num(r.hi)}; "
                 f"{r.n} trials)" for lab, r in stats.iterrows()]
    traces = [{"type": "bar", "orientation": "h", "name": "cold (fresh cache)", "y": list(stats.index),
               "x": _clean(stats["cold"]), "text": cold_text, "textposition": "none",
               "hovertemplate": "%{text}<extra></extra>", "marker": {"color": "#2563eb"}}]
    warm = stats["warm"].notna()
    if warm.any():
        traces.append({"type": "bar", "orientation": "h", "name": "warm (cache holds artifacts)",
                       "y": list(stats.index[warm]), "x": _clean(stats.loc[warm, "warm"]),
                       "hovertemplate": "%{y}<br>warm compile: median %{x:.3g} s<extra></extra>",
                       "marker": {"color": "#93c5fd"}})
    layout = _layout(title, 170 + 30 * len(stats), barmode="group", bargap=0.25,
                     margin={"l": 60, "r": 20, "t": 50, "b": 100},
                     legend={"orientation": "h", "x": 0, "y": 0, "yref": "container", "yanchor": "bottom"},
                     xaxis=_axis("seconds (median over batch sizes)"), yaxis=_axis("", automargin=True))
    return {"kind": "bar", "title": title, "expected": int(len(stats) + warm.sum()), "data": traces,
            "layout": layout}


def overview_bars(summary: pd.DataFrame) -> Figure | None:
    """Per context, the speedup of its choice (or of its best compiled setting where eager is chosen),
    with its interval; coloured by the verdict: green compile wins, orange eager wins, grey a tie."""
    data = summary[summary["best_speedup"].notna()].sort_values("best_speedup")
    if data.empty:
        return None
    colours = [_VERDICT_COLOURS.get(css, "#9ca3af") for css in data["verdict_css"]]
    labels = [plotly_text(x) for x in data["label"]]
    text = [f"{lab}<br>choice: {plotly_text(s)}<br>{v:.2f}× eager<br>{plotly_text(verdict)}" for lab, s, v, verdict in
            zip(labels, data["best_setting"], data["best_speedup"], data["verdict"], strict=True)]
    speed = data["best_speedup"].astype(float)
    trace = {"type": "bar", "orientation": "h", "y": labels, "x": _clean(speed),
             "text": [f"{v:.2f}×" for v in speed], "textposition": "inside", "insidetextanchor": "start",
             "textfont": {"color": "white"},
             "error_x": {"type": "data", "symmetric": False, "array": _clean((data["best_high"] - speed).fillna(0)),
                         "arrayminus": _clean((speed - data["best_low"]).fillna(0)), "color": "#374151"},
             "customdata": text, "hovertemplate": "%{customdata}<extra></extra>", "marker": {"color": colours}}
    layout = _layout("Each context's choice: speedup vs eager (green: compiling pays, orange: eager wins, grey: a tie)",
                     140 + 30 * len(data), margin={"l": 330, "r": 60, "t": 50, "b": 50}, showlegend=False,
                     xaxis=_axis("Throughput speedup vs eager (×)", rangemode="tozero"),
                     yaxis=_axis("", automargin=True, type="category"),
                     shapes=[{"type": "line", "x0": 1, "x1": 1, "yref": "paper", "y0": 0, "y1": 1,
                              "line": {"color": "#111827", "width": 1.5, "dash": "dot"}}])
    return {"kind": "bar", "title": "overview", "expected": len(data), "data": [trace], "layout": layout}


_VERDICT_COLOURS = {"v-win": "#15803d", "v-lose": "#c2410c", "v-even": "#9ca3af"}


def reading_key(run_floor: float, unstable_floor: float) -> str:
    """The "Reading the plots" box: colours, symbols, front, choice, error bars, memory."""
    swatches = "".join(f'<span class="sw" style="background:{c}"></span>{plotly_text(m)}'
                       for m, c in MODE_COLOURS.items())
    glyphs = " ".join(f"{g} {d}" for d, g in DYNAMIC_GLYPHS.items())
    return ('<div class="key"><b>Reading the plots.</b> Colour = compile mode:' + swatches
            + f". Symbol = <code>dynamic</code>: {glyphs}. Marker size = compile time. Solid, outlined markers "
            "are on the Pareto front of their context (no other accurate trial has higher throughput, lower "
            "whole-run peak memory and less compile time all at once); faded markers are dominated; the dotted "
            "line is the front of the two objectives on the axes (choose them above each scatter). The star is "
            "the context's choice; rings mark settings tied with it inside the measured noise. Error bars: the "
            "speedup's interval where measured (paired windows, widened by the sweep's self-check: at least "
            f"±{run_floor * 100:g}%, the run-to-run range measured for settings whose eager windows hold still, "
            f"±{unstable_floor * 100:g}% over an unstable eager baseline, and reaching the speedup "
            "against the sweep's eager trial), "
            "else the spread of the timed windows. Memory is the "
            "whole-run peak (compile and autotuning included), the figure limits are checked against; the "
            "steady peak is an axis choice and in the hover. Speedup is throughput over the eager baseline of "
            "the same context and batch. Click a table header to sort.</div>")
