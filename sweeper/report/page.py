"""Build the one-file HTML report: overview, per-model Pareto plots and tables, comparison.

The file opens from file:// with no network: plotly.js is inlined once, the figures are
JSON in the page and a Content-Security-Policy forbids any fetch. No torch, no Ray: the
report is rebuilt from Parquet files alone. Figures live in report_figures, tables in
report_tables, static CSS/JS in report_assets.
"""

from __future__ import annotations

import json
import logging
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
from plotly.offline import get_plotlyjs

from sweeper.report import assets
from sweeper.report import figures as figs
from sweeper.report import streams as report_streams
from sweeper.report import tables
from sweeper.analysis import frames as rows
from sweeper.analysis.compare import compare
from sweeper.analysis.pareto import pareto_front
from sweeper.results.files import atomic_write_bytes
from sweeper.report.tables import esc

log = logging.getLogger(__name__)

DEFAULT_TITLE = "torch.compile sweep report"
GAIN, LOSS = 1.02, 0.98  # speedups inside this band are "no clear difference"


def write_report(df: pd.DataFrame, out_path: Path, title: str = DEFAULT_TITLE,
                 compare_df: pd.DataFrame | None = None) -> Path:
    """Write the report for the trial rows `df` (optionally against base rows) to `out_path`."""
    out_path = Path(out_path)
    text = build_html(df, title, compare_df)
    atomic_write_bytes(out_path, text.encode("utf-8"))
    log.debug("wrote %s (%.1f MB, %d trials)", out_path, len(text) / 1e6, len(df))
    return out_path


def build_html(df: pd.DataFrame, title: str = DEFAULT_TITLE, compare_df: pd.DataFrame | None = None) -> str:
    data = rows.prepare(df.reset_index(drop=True))
    data["on_front"] = pareto_front(data)
    summary = context_summary(data)
    page = _Page()
    parts = [_header(data, title), _overview(summary, page)]
    parts += [_model_section(model, data[data["model"].eq(model)], summary, page)
              for model in summary["model"].unique()]
    if compare_df is not None:
        parts.append(_comparison(compare_df, df))
    return page.render(title, parts)


class _Page:
    """Collects figures while sections are built; renders the document around them."""

    def __init__(self) -> None:
        self.figures: list[dict[str, Any]] = []

    def plot(self, fig: figs.Figure | None, empty: str) -> str:
        if fig is None:
            return f'<p class="empty">{esc(empty)}</p>'
        fig_id = f"fig{len(self.figures)}"
        self.figures.append({"id": fig_id, **fig})
        return f'<div class="plot" id="{fig_id}"></div>'

    def render(self, title: str, parts: list[str]) -> str:
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{assets.CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{assets.CSS}</style>"
            f"<script>{assets.HEAD_JS}</script>"
            f'<script type="text/javascript">{get_plotlyjs()}</script></head>'
            f'<body><main>{"".join(parts)}<footer>Made by sweeper from Parquet results; '
            "plots by plotly.js, embedded: this file needs no network.</footer>"
            '<pre id="sweeper-selfcheck">pending</pre></main>'
            f'<script type="application/json" id="sweeper-figs">{_script_json(self.figures)}</script>'
            f"<script>{assets.TAIL_JS}</script></body></html>\n"
        )


def _script_json(obj: Any) -> str:
    """JSON that is safe inside <script>: no '<', '>' or '&' can end the element early."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False, default=_json_default)
    for ch, sub in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, sub)
    return text


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
        return None if isinstance(value, float) and not math.isfinite(value) else value
    if value is pd.NA:
        return None
    return str(value)


def context_summary(data: pd.DataFrame) -> pd.DataFrame:
    """One row per model x phase x precision x device: best accurate compiled speedup and verdict."""
    out = []
    ordered = data.sort_values(rows.CONTEXT_KEYS, na_position="last")
    for i, (key, ctx) in enumerate(ordered.groupby(rows.CONTEXT_KEYS, dropna=False, sort=False)):
        out.append({**dict(zip(rows.CONTEXT_KEYS, key)), **_verdict(ctx), "n": len(ctx),
                    "n_ok": int(ctx["status"].eq("ok").sum()), "ctx_id": f"c{i}"})
    summary = pd.DataFrame(out)
    if summary.empty:
        return pd.DataFrame(columns=[*rows.CONTEXT_KEYS, "verdict", "verdict_css", "best_setting",
                                     "best_speedup", "best_compile_s", "break_even_iters", "n", "n_ok",
                                     "ctx_id", "anchor", "label"])
    model_ids = {m: f"m{j}" for j, m in enumerate(summary["model"].unique())}
    summary["anchor"] = summary["model"].map(model_ids)
    summary["label"] = summary.apply(lambda s: " · ".join(str(s[k]) for k in rows.CONTEXT_KEYS
                                                            if s[k] is not None and not pd.isna(s[k])), axis=1)
    return summary


def _verdict(ctx: pd.DataFrame) -> dict[str, Any]:
    compiled = ctx[~ctx["is_eager"]]
    good = compiled[rows.accurate(compiled) & compiled["speedup_vs_eager"].gt(0)
                    & ~rows.fell_back(compiled)]
    none = {"best_setting": None, "best_speedup": math.nan, "best_compile_s": math.nan, "break_even_iters": math.nan}
    if not ctx["status"].eq("ok").any():
        return {**none, "verdict": "all trials failed", "verdict_css": "v-fail"}
    if compiled.empty:
        return {**none, "verdict": "eager only: nothing compiled", "verdict_css": "v-even"}
    if good.empty:
        return {**none, "verdict": "no accurate compiled run", "verdict_css": "v-fail"}
    best = good.loc[good["speedup_vs_eager"].idxmax()]
    s = float(best["speedup_vs_eager"])
    verdict, css = ((f"compile: {s:.2f}× faster", "v-win") if s >= GAIN else
                    (f"eager wins (best compiled {s:.2f}×)", "v-lose") if s <= LOSS else
                    (f"no clear difference ({s:.2f}×)", "v-even"))
    return {"verdict": verdict, "verdict_css": css, "best_setting": rows.setting_label(best), "best_speedup": s,
            "best_compile_s": best["compile_s"], "break_even_iters": _break_even(best)}


def _break_even(r: pd.Series) -> float:
    if pd.notna(r["break_even_iters"]):
        return float(r["break_even_iters"])
    tp, eager_tp = r["throughput_items_s"], r["throughput_items_s"] / r["speedup_vs_eager"]
    saved = r["batch_size"] / eager_tp - r["batch_size"] / tp
    return float(r["compile_s"] / saved) if saved > 0 else math.inf


def _header(data: pd.DataFrame, title: str) -> str:
    def listing(col: str) -> str:
        vals = sorted(str(v) for v in data[col].dropna().unique())
        return ", ".join(vals[:6]) + (f" (+{len(vals) - 6} more)" if len(vals) > 6 else "") or "unknown"
    n_ok = int(data["status"].eq("ok").sum())
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f'<header class="top"><h1>{esc(title)}</h1><p class="sub">{len(data):,} trials '
            f"({n_ok:,} ok, {len(data) - n_ok:,} failed) from {data['sweep_id'].nunique():,} sweep(s) · "
            f"devices: {esc(listing('device_name'))} · torch {esc(listing('torch_version'))} · "
            f"generated {when}</p></header>")


def _overview(summary: pd.DataFrame, page: _Page) -> str:
    if summary.empty:
        return '<h2>Overview</h2><p class="empty">No trials in these results.</p>'
    nav = "".join(f'<a href="#{a}">{esc(m)}</a>' for m, a in
                  summary[["model", "anchor"]].drop_duplicates().itertuples(index=False))
    wins = summary[summary["verdict_css"].eq("v-win")]
    loses = summary[summary["verdict_css"].eq("v-lose")]
    even = summary[summary["verdict_css"].eq("v-even") & summary["best_speedup"].notna()]
    lines = [f"<b>Compiling pays</b> in {len(wins)} of {len(summary)} model contexts"
             + (f", best {esc(wins.loc[wins['best_speedup'].idxmax(), 'label'])} at "
                f"{wins['best_speedup'].max():.2f}×" if not wins.empty else ""),
             f"<b>Eager wins</b> in {len(loses)}" + (": " + ", ".join(esc(x) for x in loses["label"])
                                                     if not loses.empty else ""),
             f"no clear difference (within ±2%) in {len(even)}"]
    return ("<h2>Overview</h2>" f'<nav class="models">{nav}</nav>'
            f'<p>{"; ".join(lines)}.</p>' + _key()
            + page.plot(figs.overview_bars(summary), "No accurate compiled trial: no speedup to show.")
            + tables.summary_table(summary))


def _key() -> str:
    swatches = "".join(f'<span class="sw" style="background:{c}"></span>{esc(m)}'
                       for m, c in figs.MODE_COLOURS.items())
    glyphs = " ".join(f"{g} {d}" for d, g in figs.DYNAMIC_GLYPHS.items())
    return ('<div class="key"><b>Reading the plots.</b> Colour = compile mode:' + swatches
            + f". Symbol = <code>dynamic</code>: {glyphs}. Solid, outlined markers are on the Pareto front "
            "(no other accurate trial has higher throughput, lower peak memory and lower cold compile time "
            "all at once); faded markers are dominated. Speedup is throughput over the eager baseline of the "
            "same model, phase, precision and batch. Hover a point for its full config and the exact "
            "<code>torch.compile</code> call; click a table header to sort.</div>")


def _model_section(model: str, data: pd.DataFrame, summary: pd.DataFrame, page: _Page) -> str:
    mine = summary[summary["model"].eq(model)]
    parts = [f'<section id="{mine["anchor"].iloc[0]}"><h2>{esc(model)}</h2>']
    for _, s in mine.iterrows():
        sel = pd.Series(True, index=data.index)
        for k in rows.CONTEXT_KEYS[1:]:
            sel &= data[k].isna() if s[k] is None or pd.isna(s[k]) else data[k].eq(s[k])
        parts.append(_context_block(s, data[sel], page))
    return "".join(parts) + "</section>"


def _context_block(s: pd.Series, ctx: pd.DataFrame, page: _Page) -> str:
    label = esc(s["label"])
    failed = ctx[ctx["status"].ne("ok") | ctx["accuracy_ok"].eq(False).fillna(False).astype(bool)]
    front = ctx[ctx["on_front"]]
    best = s["best_setting"] if isinstance(s["best_setting"], str) else None
    head = (f"<h3>{label}</h3><p class=\"sub\">{_count(len(ctx), 'trial')}, {s['n_ok']} ok · verdict: "
            f'<span class="{s["verdict_css"]}">{esc(s["verdict"])}</span>'
            + (f" · best accurate compiled: {esc(best)}" if best else "") + "</p>")
    scatter = page.plot(figs.pareto_scatter(ctx, ctx["on_front"], f"{figs.esc(s['label'])}: throughput vs peak memory"),
                        "No successful trial with memory and throughput: nothing to plot.")
    heat = page.plot(figs.speedup_heatmap(ctx, "Speedup vs eager (×), best accurate trial"),
                     "No accurate compiled trial: no speedup to show.")
    bars = page.plot(figs.compile_bars(ctx, "Compile latency (s)"),
                     "No successful compiled trial: no compile time to show.")
    front_html = (f"<h4>Pareto front ({_count(len(front), 'setting')})</h4>" + tables.front_table(front)
                  if not front.empty else '<p class="empty">No trial on the Pareto front.</p>')
    failed_html = ""
    if not failed.empty:
        open_ = " open" if len(failed) <= 10 else ""
        failed_html = (f"<details{open_}><summary>Failed or inaccurate trials ({len(failed)})</summary>"
                       + tables.failed_table(failed) + "</details>")
    return (head + scatter + f'<div class="grid2"><div>{heat}</div><div>{bars}</div></div>' + front_html + failed_html
            + report_streams.stream_block(ctx, page.plot))


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _comparison(base_df: pd.DataFrame, new_df: pd.DataFrame) -> str:
    cmp = compare(base_df, new_df)
    counts = cmp["verdict"].value_counts()
    chips = " · ".join(f"{esc(v)}: {int(counts[v])}" for v in counts.index)
    changed = cmp[cmp["verdict"].ne("unchanged")]
    return ('<section id="comparison"><h2>Comparison with the base results</h2>'
            f'<p class="sub">Settings matched by model, mode, dynamic, batch size, sequence length, phase, '
            f"precision and backend; changes beyond ±5% (compile time also beyond 0.5 s) are flagged. "
            f"{chips or 'nothing to compare'}.</p>"
            + (tables.comparison_table(changed) if not changed.empty else '<p class="empty">No changes.</p>')
            + "</section>")
