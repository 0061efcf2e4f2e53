"""The report's exploring views of one context: the objectives the Pareto scatter can put on
its axes (with their error bars), and the parallel-coordinates view of every setting.

The page's script switches the scatter's axes from the columns given here and draws the
Pareto front of the two objectives shown as a line; plotly's parcoords does the brushing.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from sweeper.analysis import frames, ranking
from sweeper.report.figures import (
    DYNAMIC_SYMBOLS,
    Figure,
    _axis,
    _layout,
    hover_text,
    key_traces,
    mode_colour,
    mode_order,
    plotly_text,
    ratio_colour,
)

AXES: list[tuple[str, str, str, str]] = [
    # key, axis title, column, better direction ("" = no front on this axis)
    ("throughput", "Throughput (items/s)", "throughput_items_s", "max"),
    ("speedup", "Speedup vs eager (×)", "speedup_vs_eager", "max"),
    ("run_mem", "Peak memory, whole run incl. compile (GiB)", "run_peak_mem_gib", "min"),
    ("steady_mem", "Peak memory, steady state (GiB)", "peak_mem_gib", "min"),
    ("need_mem", "Device memory needed, reserved (GiB; GPU rows)", "need_mem_gib", "min"),
    ("compile", "Compile time (s; a stream: every compile)", "compile_cost_s", "min"),
    ("latency", "Latency p50 (ms)", "latency_p50_ms", "min"),
    ("decode", "Decode tokens/s (phase generate)", "decode_tokens_per_s", "max"),
    ("ttft", "Time to first token (ms; phase generate)", "ttft_ms", "min"),
    ("batch", "Batch size (items)", "batch_size", ""),
]
DEFAULT_X, DEFAULT_Y = "run_mem", "throughput"
_INTERVAL_AXES = ("throughput", "speedup")


def with_view_columns(data: pd.DataFrame) -> pd.DataFrame:
    """Adds what the views read: whole-run peak, memory need, compile cost and the speedup interval per row."""
    out = data.assign(run_peak_mem_gib=ranking.run_peak_column(data), need_mem_gib=ranking.need_column(data),
                      compile_cost_s=ranking.compile_cost_column(data))
    records = out[_STANDING_COLUMNS + [c for c in _OPTIONAL if c in out.columns]].to_dict("records")
    standings = [ranking.standing(r) for r in records]
    out["speedup_low"] = [s.low for s in standings]
    out["speedup_high"] = [s.high for s in standings]
    out["standing"] = [s.kind for s in standings]
    return out


_STANDING_COLUMNS = ["mode", "speedup_vs_eager", "throughput_spread_pct"]
_OPTIONAL = ["speedup_ci_low", "speedup_ci_high", "speedup_low", "speedup_high", "baseline_drift_pct"]
"""Columns newer rows carry (in-trial and reported interval, baseline drift); older files lack them."""


def rounded(values: pd.Series) -> list[float | None]:
    """Four significant digits; NaN and inf as null."""
    return [float(f"{v:.4g}") if math.isfinite(v) else None for v in values.astype(float)]


def axis_columns(d: pd.DataFrame) -> dict[str, Any]:
    """Per objective: the values of the rows `d`, and for throughput and speedup the error bars."""
    cols: dict[str, Any] = {key: rounded(d[col] if col in d else pd.Series(math.nan, index=d.index))
                            for key, _, col, _ in AXES}  # frames without the generate columns: none
    rel_low = (d["speedup_low"] / d["speedup_vs_eager"]).astype(float)
    rel_high = (d["speedup_high"] / d["speedup_vs_eager"]).astype(float)
    for key, col in (("throughput", "throughput_items_s"), ("speedup", "speedup_vs_eager")):
        v = d[col].astype(float)
        cols[f"{key}_plus"] = rounded((v * (rel_high - 1)).fillna(0))
        cols[f"{key}_minus"] = rounded((v * (1 - rel_low)).fillna(0))
    return cols


def axis_menu() -> list[dict[str, str]]:
    return [{"key": k, "title": t, "better": b} for k, t, _, b in AXES]


def marker_sizes(compile_s: pd.Series, top_s: float) -> list[float]:
    """Marker area grows with compile time: 7 px for none up to 22 px for the context's longest."""
    scale = np.sqrt(compile_s.fillna(0).clip(lower=0) / top_s) if top_s > 0 else compile_s * 0
    return [round(7 + 15 * float(x), 1) for x in scale]


def parcoords(ctx: pd.DataFrame, title: str) -> Figure | None:
    """One line per measured setting; axes: mode, dynamic, batch, bucketing and scope where present,
    then throughput, speedup, compile s, whole-run peak memory. Colour = speedup."""
    d = ctx[ctx["status"].eq("ok") & ctx["throughput_items_s"].gt(0)]
    if d.empty:
        return None
    dims = [_category("mode", d["mode"], sorted(d["mode"].unique(), key=mode_order)),
            _category("dynamic", d["dynamic_label"], ["None", "True", "False"]),
            _numeric("batch", d["batch_size"], log=True)]
    for col in ("bucketing", "scope"):
        if col in d.columns and d[col].notna().any():
            vals = d[col].fillna("none").astype(str)
            dims.append(_category(col, vals, sorted(vals.unique())))
    for col in ("option_set", "path"):  # where the context measured more than one
        vals = d[col].fillna("-").astype(str) if col in d.columns else pd.Series(dtype=str)
        if vals.nunique() > 1:
            dims.append(_category(col.replace("_", " "), vals, sorted(vals.unique())))
    dims += [_numeric("items/s", d["throughput_items_s"]), _numeric("speedup ×", d["speedup_vs_eager"]),
             _numeric("compile s", d["compile_cost_s"]), _numeric("peak GiB (run)", d["run_peak_mem_gib"])]
    colour, scale = ratio_colour(d["speedup_vs_eager"].fillna(1.0).astype(float).tolist())
    trace = {"type": "parcoords", "dimensions": dims, "line": {"color": colour, "showscale": True, **scale},
             "labelangle": 0, "labelfont": {"size": 12}}
    # the first axis's category labels are drawn left of it: room for "reduce-overhead"
    layout = _layout(title, 420, margin={"l": 110, "r": 70, "t": 80, "b": 30})
    return {"kind": "parcoords", "lazy": True, "title": title, "expected": len(d), "data": [trace],
            "layout": layout}


def _category(label: str, values: pd.Series, order: list[str]) -> dict[str, Any]:
    index = {v: i for i, v in enumerate(order)}
    return {"label": plotly_text(label), "values": [index.get(v, 0) for v in values.astype(str)],
            "tickvals": list(range(len(order))), "ticktext": [plotly_text(v) for v in order],
            "range": [-0.3, max(0.3, len(order) - 0.7)]}


def _numeric(label: str, values: pd.Series, log: bool = False) -> dict[str, Any]:
    v = values.astype(float)
    if log and v.gt(0).all() and v.max() / v.min() > 4:
        ticks = sorted(v.unique())
        return {"label": plotly_text(label) + " (log)", "values": rounded(np.log2(v)),
                "tickvals": rounded(np.log2(pd.Series(ticks))), "ticktext": [f"{t:g}" for t in ticks]}
    return {"label": plotly_text(label), "values": [x if x is not None else 0.0 for x in rounded(v)]}


_SCATTER_COLUMNS = {"mode", "dynamic_label", "backend", "trial_id", "batch_size", "seq_len", "bucketing", "is_eager",
                    "accuracy_ok", "throughput_items_s", "speedup_vs_eager", "speedup_low", "speedup_high",
                    "standing", "run_peak_mem_gib", "peak_mem_gib", "need_mem_gib", "compile_cost_s", "warm_compile_s",
                    "graph_breaks", "recompiles", "latency_p50_ms"}


def pareto_scatter(ctx: pd.DataFrame, front: pd.Series, title: str, choice: str | None = None,
                   ties: frozenset[str] = frozenset()) -> Figure | None:
    """Choosable objectives (whole-run memory vs throughput first); colour = mode, symbol = dynamic,
    size = compile time; front solid and outlined, dominated faded; the choice starred, its ties ringed."""
    shown = ctx["status"].eq("ok") & ctx["peak_mem_gib"].gt(0) & ctx["throughput_items_s"].gt(0)
    if not shown.any():
        return None
    data = ctx.loc[shown, [c for c in ctx.columns if c in _SCATTER_COLUMNS]]  # narrow: cheaper to split
    data = data.assign(on_front=front[shown], _backend=data["backend"].fillna(""))
    data["_text"] = hover_text(data)
    top_s = float(data["compile_cost_s"].max())
    modes = sorted(data["mode"].unique(), key=mode_order)
    groups = data.groupby(["mode", "dynamic_label", "_backend"], sort=False)
    order = sorted(groups.groups, key=lambda k: (mode_order(k[0]), k[1], k[2]))
    parts = [groups.get_group(k) for k in order]
    traces = [_scatter_trace(d, *k, modes, top_s) for d, k in zip(parts, order, strict=True)]
    picked = data[data["trial_id"].eq(choice)] if choice else data.iloc[0:0]
    tied = data[data["trial_id"].isin(ties)]
    parts += [picked, tied]
    traces += [_overlay(picked, "chosen (sweeper recommend)", "star", 20, "#111827"),
               _overlay(tied, "tie with the choice (inside the noise)", "circle-open", 24, "#111827"),
               {"type": "scatter", "mode": "lines", "name": "Pareto front of the two axes shown", "x": [], "y": [],
                "hoverinfo": "skip", "line": {"color": "#111827", "width": 1.5, "dash": "dot"}, "showlegend": True,
                "legend": "legend2"}]
    columns = [axis_columns(d) for d in parts]
    for t, c in zip(traces, columns, strict=False):
        t.update(x=c[DEFAULT_X], y=c[DEFAULT_Y])
        t["error_y"] = {"type": "data", "symmetric": False, "array": c["throughput_plus"],
                        "arrayminus": c["throughput_minus"], "thickness": 1, "width": 0, "color": "#9ca3af"}
    traces += key_traces(modes)
    layout = _layout(title, 520, margin={"l": 70, "r": 270, "t": 50, "b": 60},
                     legend={"title": {"text": "<b>Colour = mode</b>"}, "x": 1.02, "y": 1, "yanchor": "top",
                             "groupclick": "togglegroup"},
                     legend2={"title": {"text": "<b>Symbol = dynamic</b>"}, "x": 1.02, "y": 0.52,
                              "yanchor": "top", "itemclick": False, "itemdoubleclick": False},
                     xaxis=_axis({k: t for k, t, _, _ in AXES}[DEFAULT_X], data["run_peak_mem_gib"]),
                     yaxis=_axis("Throughput (items/s)", data["throughput_items_s"]))
    return {"kind": "scatter", "title": title, "expected": len(data), "data": traces, "layout": layout,
            "explore": {"axes": axis_menu(), "x": DEFAULT_X, "y": DEFAULT_Y,
                        "columns": columns, "n_data": len(order)}}


def _scatter_trace(d: pd.DataFrame, mode: str, dyn: str, backend: str, modes: list[str],
                   top_s: float) -> dict[str, Any]:
    call = frames.compile_call(mode, dyn, backend or None) if mode != frames.EAGER else "eager: no torch.compile"
    head = f"<b>{plotly_text(mode)}</b>"
    if mode != frames.EAGER:
        head += f" · dynamic={dyn} · {plotly_text(backend)}"
    # a "%" in data would start a plotly placeholder: write it as an entity, which plotly decodes
    template = f"{head}<br>%{{text}}<br>{plotly_text(call)}".replace("%", "&#37;").replace(
        "&#37;{text}", "%{text}") + "<extra></extra>"
    front = d["on_front"].to_numpy(dtype=bool)
    return {
        "type": "scatter", "mode": "markers", "name": plotly_text(mode), "legendgroup": f"mode:{mode}",
        "showlegend": False,
        "text": list(d["_text"]), "hovertemplate": template,
        "marker": {"color": mode_colour(mode, modes), "symbol": DYNAMIC_SYMBOLS.get(dyn, "circle"),
                   "size": marker_sizes(d["compile_cost_s"], top_s),
                   "opacity": [1.0 if f else 0.3 for f in front],
                   "line": {"width": [1.6 if f else 0 for f in front], "color": "#111827"}},
    }


def _overlay(d: pd.DataFrame, name: str, symbol: str, size: int, colour: str) -> dict[str, Any]:
    return {"type": "scatter", "mode": "markers", "name": name, "legend": "legend2", "showlegend": not d.empty,
            "text": list(d["_text"]), "hovertemplate": f"<b>{name}</b><br>%{{text}}<extra></extra>",
            "marker": {"symbol": symbol, "size": size, "color": colour, "line": {"width": 2, "color": colour}}}
