"""The report's input-stream block, for a context whose trials ran a workload (a stream of
variable-length batches): recompiles vs real-token throughput, end-to-end stream time and
padding waste per bucketing policy, the settings that fell back to eager (flagged loudly),
and what to run: the context's choice for long-running traffic and for one pass of the stream
measured, both by the one ranking of `sweeper recommend`. Pure pandas + dicts.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from sweeper.analysis import frames
from sweeper.analysis.frames import fmt_num
from sweeper.analysis.ranking import Candidate
from sweeper.analysis.recommend import Limits, recommend_context
from sweeper.report.figures import Figure, _axis, _clean, _layout, accuracy_label, plotly_text
from sweeper.report.tables import html_text, table, td, td_num

STREAM_SYMBOLS = {"eager": "triangle-up", "None": "circle", "True": "square", "False": "diamond"}
_POLICY_COLOURS = ["#2563eb", "#ea580c", "#16a34a", "#9333ea", "#0891b2", "#be185d", "#854d0e", "#4d7c0f"]
_FELL = "#dc2626"


def stream_rows(ctx: pd.DataFrame) -> pd.DataFrame:
    return ctx[ctx["workload"].notna()]


def _speed(df: pd.DataFrame) -> tuple[pd.Series, str]:
    """Real tokens/s where measured (token streams), else items/s."""
    if df["real_tokens_per_s"].notna().any():
        return df["real_tokens_per_s"], "real tokens/s"
    return df["throughput_items_s"], "items/s"


def setting(r: pd.Series) -> str:
    if r["is_eager"]:
        return "eager"
    mark = " + mark_dynamic" if r["mark_dynamic"] else ""
    return f"{r['mode']}, dynamic={r['dynamic_label']}{mark}"


def _symbol(r: pd.Series) -> str:
    sym = STREAM_SYMBOLS["eager" if r["is_eager"] else r["dynamic_label"]]
    return f"{sym}-open-dot" if r["mark_dynamic"] else sym


def _hover(r: pd.Series, unit: str, speed: float, fell: bool) -> str:
    lines = [f"<b>{plotly_text(setting(r))}</b> · bucketing {plotly_text(r['bucketing'])}"
             f" · batch {fmt_num(r['batch_size'])}",
             f"stream {fmt_num(r['stream_s'])} s end-to-end (eager {fmt_num(r['eager_stream_s'])} s)",
             f"steady {fmt_num(speed)} {unit} · padding waste {fmt_num(100 * (r['pad_waste'] or 0))}%",
             f"graphs {fmt_num(r['graphs'])} · recompiles {fmt_num(r['recompiles'])} · "
             f"{fmt_num(r['stream_shapes'])} shapes · compile/shape {fmt_num(r['compile_s_per_shape'])} s"]
    if fell:
        lines.append("<b>FELL BACK TO EAGER</b> (recompile limit hit)")
    return "<br>".join(lines)


def recompiles_scatter(df: pd.DataFrame, title: str) -> Figure | None:
    """Graphs compiled vs steady throughput; colour = bucketing, symbol = dynamic; red ring = fell back."""
    speed, unit = _speed(df)
    shown = df[df["status"].eq("ok") & speed.gt(0) & df["graphs"].notna()]
    if shown.empty:
        return None
    policies = sorted(shown["bucketing"].fillna("none").unique())
    traces = []
    for i, policy in enumerate(policies):
        d = shown[shown["bucketing"].fillna("none").eq(policy)]
        fell = frames.fell_back(d).tolist()
        traces.append({
            "type": "scatter", "mode": "markers", "name": plotly_text(policy),
            "x": _clean(d["graphs"].astype(float)), "y": _clean(speed[d.index].astype(float)),
            "text": [_hover(r, unit, speed[k], f) for (k, r), f in zip(d.iterrows(), fell, strict=True)],
            "hovertemplate": "%{text}<extra></extra>",
            "marker": {"color": _POLICY_COLOURS[i % len(_POLICY_COLOURS)], "size": 11,
                       "symbol": [_symbol(r) for _, r in d.iterrows()],
                       "line": {"width": [3 if f else 0.5 for f in fell],
                                "color": [_FELL if f else "#111827" for f in fell]}}})
    top = float(shown["graphs"].max())
    layout = _layout(title, 400, legend={"title": {"text": "<b>Colour = bucketing</b>"}},
                     xaxis=_axis("Graphs compiled over the stream (0 = eager)", range=[-0.6, top + 0.6]),
                     yaxis=_axis(f"Steady throughput ({unit})"))
    return {"kind": "scatter", "title": title, "expected": len(shown), "data": traces, "layout": layout}


def stream_time_bars(df: pd.DataFrame, title: str) -> Figure | None:
    """End-to-end stream seconds per bucketing policy (labelled with its padding waste), per setting."""
    shown = df[df["status"].eq("ok") & df["stream_s"].gt(0)]
    if shown.empty:
        return None
    waste = shown.groupby(shown["bucketing"].fillna("none"))["pad_waste"].median()
    label = {p: f"{plotly_text(p)} · pad {fmt_num(100 * w) if pd.notna(w) else '—'}%" for p, w in waste.items()}
    shown = shown.assign(_setting=shown.apply(setting, axis=1), _policy=shown["bucketing"].fillna("none"))
    best = shown.groupby(["_setting", "_policy"], sort=False)["stream_s"].idxmin()
    shown = shown.loc[best.to_numpy()]
    traces = []
    for i, (name, d) in enumerate(shown.groupby("_setting", sort=True)):
        fell = frames.fell_back(d).tolist()
        traces.append({
            "type": "bar", "name": plotly_text(name), "x": [label[p] for p in d["_policy"]],
            "y": _clean(d["stream_s"].astype(float)),
            "text": [f"{plotly_text(name)} · {plotly_text(p)}: {fmt_num(s)} s" + (" · FELL BACK TO EAGER" if f else "")
                     for p, s, f in zip(d["_policy"], d["stream_s"], fell, strict=True)],
            "textposition": "none", "hovertemplate": "%{text}<extra></extra>",
            "marker": {"color": "#6b7280" if name == "eager" else _POLICY_COLOURS[::-1][i % len(_POLICY_COLOURS)],
                       "line": {"width": [3 if f else 0 for f in fell], "color": _FELL}}})
    layout = _layout(title, 400, barmode="group", bargap=0.2,
                     xaxis=_axis("Bucketing policy · padding waste", type="category"),
                     yaxis=_axis("Stream seconds, compiles included", rangemode="tozero"))
    return {"kind": "bar", "title": title, "expected": len(shown), "data": traces, "layout": layout}


def stream_table(df: pd.DataFrame) -> str:
    speed, unit = _speed(df)
    headers = ["Setting", "Bucketing", "Batch", "Stream (s)", "Eager stream (s)", "End-to-end ×",
               f"Steady {unit}", "Pad waste %", "Shapes", "Graphs", "Recompiles",
               "Compile / shape (s)", "Break-even batches", "Peak mem (GiB)", "Accuracy", "Fell back"]
    body = []
    fell_back = frames.fell_back(df)
    for k, r in df.sort_values("stream_s", na_position="last").iterrows():
        acc = accuracy_label(r["is_eager"], r["accuracy_ok"], r["status"])
        body.append(
            "<tr>" + td(setting(r), nowrap=True) + td(r["bucketing"]) + td_num(r["batch_size"])
            + td_num(r["stream_s"]) + td_num(r["eager_stream_s"]) + td_num(r["stream_speedup_vs_eager"], decimals=2)
            + td_num(speed[k])
            + td_num(100 * r["pad_waste"] if pd.notna(r["pad_waste"]) else None, decimals=1)
            + td_num(r["stream_shapes"]) + td_num(r["graphs"]) + td_num(r["recompiles"])
            + td_num(r["compile_s_per_shape"]) + td_num(r["stream_break_even_batches"]) + td_num(r["peak_mem_gib"])
            + td(acc) + ('<td class="v-fail">FELL BACK TO EAGER</td>' if fell_back[k] else td("no")) + "</tr>")
    return table(headers, body)


def _recommendation(df: pd.DataFrame) -> str:
    """Two questions, one rule (`sweeper recommend`): a long run, and one pass of the stream measured."""
    long_run = recommend_context(df.reset_index(drop=True))
    batches = int(df["stream_batches"].median()) if df["stream_batches"].notna().any() else None
    if long_run.best is None:
        return ('<p class="warn">No recommendation: no accurate stream trial that kept its compiled '
                "graphs (every one failed, was inaccurate or fell back to eager).</p>")
    text = (f'<p class="rec"><b>Long-running traffic</b> of this length distribution (the context\'s choice, as '
            f"<code>sweeper recommend</code> prints it): {_describe(long_run.best)}.")
    if batches:
        one_pass = recommend_context(df.reset_index(drop=True), Limits(iterations=batches))
        c = one_pass.best
        same = c is not None and c.setting == long_run.best.setting
        text += (f"<br><b>One stream of {batches} batches</b>, every compile paid "
                 f"(<code>--iterations {batches}</code>): "
                 + ("the same setting" if same else _describe(c) if c else "no setting qualifies")
                 + (f", {fmt_num(c.workload_s)} s" if c and c.workload_s is not None else "") + ".")
    return text + "</p>"


def _describe(c: Candidate) -> str:
    return (f"{html_text(c.setting)} ({fmt_num(c.throughput_items_s)} items/s steady, compiles "
            f"{fmt_num(c.compile_s)} s) <code>{html_text(c.compile_call)}</code>")


def _fallback_warning(df: pd.DataFrame) -> str:
    fell = df[frames.fell_back(df)]
    if fell.empty:
        return ""
    items = ", ".join(f"{html_text(setting(r))} + bucketing {html_text(r['bucketing'])}" for _, r in fell.iterrows())
    return (f'<p class="warn"><b>FELL BACK TO EAGER: {len(fell)} setting{"s" if len(fell) != 1 else ""}</b> hit '
            f"torch._dynamo's recompile limit, so later new shapes ran uncompiled: {items}. "
            "They are never recommended; bucketing or dynamic shapes avoid it.</p>")


def stream_block(ctx: pd.DataFrame, plot: Callable[[Figure | None, str], str]) -> str:
    """The stream block of one context; empty when none of its trials ran a workload."""
    df = stream_rows(ctx)
    if df.empty:
        return ""
    name = html_text(df["workload"].iloc[0])
    source = "; ".join(sorted({str(s) for s in df["length_source"].dropna()})) or "unknown source"
    batches = ", ".join(sorted({fmt_num(b) for b in df["stream_batches"].dropna()})) or "—"
    head = (f"<h4>Input stream {name}</h4><p class=\"sub\">{html_text(source)} · {batches} batches per pass · "
            "stream time is the first pass with every compile; throughput is the median of the later passes, "
            "counting real (non-padding) tokens.</p>")
    title = f"{plotly_text(df['workload'].iloc[0])}: graphs compiled vs steady throughput"
    scatter = plot(recompiles_scatter(df, title),
                   "No successful stream trial to plot.")
    bars = plot(stream_time_bars(df, "End-to-end stream time per bucketing policy (red outline: fell back)"),
                "No successful stream trial to plot.")
    key = ('<p class="note">Symbols: ▲ eager, ● dynamic=None, ■ dynamic=True, ◆ dynamic=False; hollow with a dot: '
           "mark_dynamic on the varying dimensions; a thick red ring: fell back to eager.</p>")
    return (head + _recommendation(df) + _fallback_warning(df) + key
            + scatter + bars + stream_table(df))
