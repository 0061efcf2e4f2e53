"""The compile-scope block of a context that measured whole and regional compilation: cold
compile against throughput by scope (each setting's two scopes joined by a line), and a table
of the ratios, with how much of the cold compile a warm start from the trial's Mega-Cache
artifact saves."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from sweeper.analysis import frames
from sweeper.analysis.frames import fmt_num
from sweeper.report.figures import Figure, _axis, _clean, _layout, plotly_text
from sweeper.report.tables import table, td, td_num

SCOPE_COLOURS = {"whole": "#2563eb", "regional": "#ea580c"}
_PAIR = ["mode", "dynamic_label", "batch_size", "seq_len", "backend", "workload", "bucketing"]
"""A setting apart from its scope: its whole and regional trials form one pair."""


def scope_rows(ctx: pd.DataFrame) -> pd.DataFrame:
    """The context's successful compiled rows with a cold compile, when both scopes are among them."""
    d = ctx[~ctx["is_eager"] & ctx["status"].eq("ok") & ctx["compile_s"].gt(0) & ctx["throughput_items_s"].gt(0)]
    return d if d["scope"].nunique() > 1 else d.iloc[0:0]


def pairs(d: pd.DataFrame) -> pd.DataFrame:
    """One row per setting measured in both scopes: its whole and regional figures side by side."""
    keyed = d.assign(_key=[("|".join(map(str, r))) for r in d[_PAIR].itertuples(index=False)])
    whole = keyed[keyed["scope"].eq("whole")].drop_duplicates("_key", keep="last").set_index("_key")
    regional = keyed[keyed["scope"].eq("regional")].drop_duplicates("_key", keep="last").set_index("_key")
    both = whole.merge(regional, how="inner", left_index=True, right_index=True, suffixes=("_w", "_r")).copy()
    return both.assign(compile_ratio=both["compile_s_w"] / both["compile_s_r"],
                       throughput_ratio=both["throughput_items_s_r"] / both["throughput_items_s_w"])


def compile_vs_throughput(d: pd.DataFrame, title: str) -> Figure:
    traces = []
    for _, p in pairs(d).iterrows():
        traces.append({"type": "scatter", "mode": "lines", "x": _clean([p["compile_s_w"], p["compile_s_r"]]),
                       "y": _clean([p["throughput_items_s_w"], p["throughput_items_s_r"]]), "showlegend": False,
                       "hoverinfo": "skip", "line": {"color": "#9ca3af", "width": 1}})
    for scope, g in d.groupby("scope", sort=True):
        text = [f"<b>{plotly_text(frames.setting_label(r))}</b><br>cold compile {fmt_num(r['compile_s'])} s · "
                f"{fmt_num(r['throughput_items_s'])} items/s<br>regions compiled {fmt_num(r['compiled_regions'])} · "
                f"warm start from artifact {fmt_num(r['warm_megacache_s'])} s" for _, r in g.iterrows()]
        traces.append({"type": "scatter", "mode": "markers", "name": plotly_text(scope), "x": _clean(g["compile_s"]),
                       "y": _clean(g["throughput_items_s"]), "text": text, "hovertemplate": "%{text}<extra></extra>",
                       "marker": {"size": 11, "color": SCOPE_COLOURS.get(str(scope), "#6b7280")}})
    layout = _layout(title, 380, xaxis=_axis("cold compile (s)", d["compile_s"]),
                     yaxis=_axis("throughput (items/s)", d["throughput_items_s"]))
    return {"kind": "scatter", "title": title, "expected": len(d), "data": traces, "layout": layout}


def _saved_pct(row: pd.Series, suffix: str) -> float:
    warm, cold = row.get(f"warm_megacache_s{suffix}"), row.get(f"compile_s{suffix}")
    return 100.0 * (1.0 - warm / cold) if pd.notna(warm) and cold and cold > 0 else float("nan")


def ratio_table(d: pd.DataFrame) -> str:
    headers = ["setting", "cold compile whole s", "regional s", "whole / regional", "items/s whole", "regional",
               "regional / whole", "artifact warm start saves (whole)", "(regional)"]
    body = []
    for _, p in pairs(d).iterrows():
        label = frames.setting_label({"mode": p["mode_w"], "dynamic_label": p["dynamic_label_w"],
                                    "batch_size": p["batch_size_w"], "seq_len": p["seq_len_w"]})
        body.append("<tr>" + td(label) + td_num(p["compile_s_w"]) + td_num(p["compile_s_r"])
                    + td_num(p["compile_ratio"], suffix="×") + td_num(p["throughput_items_s_w"])
                    + td_num(p["throughput_items_s_r"]) + td_num(p["throughput_ratio"], suffix="×")
                    + td_num(_saved_pct(p, "_w"), suffix="%") + td_num(_saved_pct(p, "_r"), suffix="%") + "</tr>")
    return table(headers, body)


def scope_block(ctx: pd.DataFrame, plot: Callable[[Figure | None, str], str]) -> str:
    """The scope block of one context; empty unless it measured both scopes."""
    d = scope_rows(ctx)
    if d.empty:
        return ""
    head = ("<h4>Compile scope: whole model vs regional (each repeated block compiled once, in place)</h4>"
            '<p class="sub">Each line joins one setting\'s two scopes. Warm start: the first call in a fresh '
            "process after loading the trial's Mega-Cache artifact into an empty cache.</p>")
    figure = plot(compile_vs_throughput(d, "Cold compile vs throughput by scope"), "No trial to plot.")
    return head + figure + ratio_table(d)
