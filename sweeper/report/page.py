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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
from plotly.offline import get_plotlyjs

from sweeper.analysis import floors, frames, ranking
from sweeper.analysis.compare import compare_runs
from sweeper.analysis.pareto import pareto_front
from sweeper.analysis.recommend import recommend_context
from sweeper.report import assets, explore, tables
from sweeper.report import figures as figs
from sweeper.report.knobs import deploy_block, price_block
from sweeper.report.scope import scope_block
from sweeper.report.stream_block import stream_block
from sweeper.report.tables import html_text
from sweeper.results.files import atomic_write_bytes

log = logging.getLogger(__name__)

DEFAULT_TITLE = "torch.compile sweep report"
FRONT_OBJECTIVES = [("throughput_items_s", "max"), ("run_peak_mem_gib", "min"), ("compile_cost_s", "min")]
"""The report's Pareto front: per context, on throughput, whole-run peak memory and compile cost."""


def write_report(df: pd.DataFrame, out_path: Path, title: str = DEFAULT_TITLE,
                 compare_df: pd.DataFrame | None = None, traces: dict[str, str] | None = None) -> Path:
    """Write the report for the trial rows `df` (optionally against base rows) to `out_path`;
    `traces`: trial id -> link to its compile trace, relative to the report."""
    out_path = Path(out_path)
    text = build_html(df, title, compare_df, traces)
    atomic_write_bytes(out_path, text.encode("utf-8"))
    log.debug("wrote %s (%.1f MB, %d trials)", out_path, len(text) / 1e6, len(df))
    return out_path


def build_html(df: pd.DataFrame, title: str = DEFAULT_TITLE, compare_df: pd.DataFrame | None = None,
               traces: dict[str, str] | None = None) -> str:
    data = explore.with_view_columns(frames.prepare(df.reset_index(drop=True)))
    data["on_front"] = pareto_front(data, objectives=FRONT_OBJECTIVES, group_by=ranking.CONTEXT)
    summary = context_summary(data)
    page = _Page()
    parts = [_header(data, title), _overview(summary, page)]
    by_context = data.groupby(ranking.CONTEXT, dropna=False, sort=False).indices
    parts += [_model_section(model, data, by_context, summary, page) for model in summary["model"].unique()]
    if compare_df is not None:
        parts.append(_comparison(compare_df, df))
    return page.render(title, [*parts, tables.traces_section(data, traces or {})])


class _Page:
    """Collects figures while sections are built; renders the document around them."""

    def __init__(self) -> None:
        self.figures: list[dict[str, Any]] = []

    def plot(self, fig: figs.Figure | None, empty: str, axes: bool = False) -> str:
        """A plot's place in the page; `axes` adds the x / y objective menus (a Pareto scatter)."""
        if fig is None:
            return f'<p class="empty">{html_text(empty)}</p>'
        fig_id = f"fig{len(self.figures)}"
        self.figures.append({"id": fig_id, **fig})
        menus = ""
        if axes:
            menus = '<div class="axes">' + "".join(
                f'<label>{name} <select data-fig="{fig_id}" data-axis="{name}">'
                + "".join(f'<option value="{a["key"]}"{" selected" if a["key"] == fig["explore"][name] else ""}>'
                          f'{html_text(a["title"])}</option>' for a in fig["explore"]["axes"])
                + "</select></label>" for name in ("x", "y")) + "</div>"
        lazy = (f'<p class="note lazy" data-for="{fig_id}">Choose this context in the selector at the top '
                "to draw its parallel-coordinates view.</p>" if fig.get("lazy") else "")
        return f'{menus}{lazy}<div class="plot" id="{fig_id}"></div>'

    def render(self, title: str, parts: list[str]) -> str:
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{assets.CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html_text(title)}</title><style>{assets.CSS}</style>"
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
    """One row per context (`ranking.CONTEXT`): the setting `sweeper recommend` chooses, and a verdict."""
    out = []
    ordered = data.sort_values(ranking.CONTEXT, na_position="last")
    for i, (key, ctx) in enumerate(ordered.groupby(ranking.CONTEXT, dropna=False, sort=False)):
        out.append({**dict(zip(ranking.CONTEXT, key, strict=True)), **_choice(ctx), "n": len(ctx),
                    "n_ok": int(ctx["status"].eq("ok").sum()), "ctx_id": f"c{i}"})
    summary = pd.DataFrame(out)
    if summary.empty:
        return pd.DataFrame(columns=[*ranking.CONTEXT, *_NO_CHOICE, "verdict", "verdict_css", "n", "n_ok",
                                     "ctx_id", "anchor", "label"])
    summary = summary.astype({"seq_len": "float64"})
    model_ids = {m: f"m{j}" for j, m in enumerate(summary["model"].unique())}
    summary["anchor"] = summary["model"].map(model_ids)
    summary["label"] = [" · ".join(filter(None, [str(s["model"]), ranking.context_label(s.to_dict())]))
                        for _, s in summary.iterrows()]
    return summary


_NO_CHOICE = {"best_setting": None, "best_call": None, "best_trial_id": None, "best_is_eager": None,
              "best_speedup": math.nan, "best_low": math.nan, "best_high": math.nan, "best_compile_s": math.nan,
              "break_even_iters": math.nan, "compiled_speedup": math.nan, "tie_ids": (), "drifted": False}


def _choice(ctx: pd.DataFrame) -> dict[str, Any]:
    """The context's ranked choice (the same as `sweeper recommend`), its speedup and the verdict."""
    compiled = ctx[~ctx["is_eager"]]
    if not ctx["status"].eq("ok").any():
        return {**_NO_CHOICE, "verdict": "all trials failed", "verdict_css": "v-fail"}
    if compiled.empty:
        return {**_NO_CHOICE, "verdict": "eager only: nothing compiled", "verdict_css": "v-even"}
    rec = recommend_context(ctx.reset_index(drop=True))
    if rec.best_compiled is None:  # the choice is eager, as `sweeper recommend` prints it
        verdict = "every compiled trial failed" if compiled["status"].ne("ok").all() else "no accurate compiled run"
        return {**_NO_CHOICE, "verdict": verdict, "verdict_css": "v-fail", **({} if rec.best is None else {
            "best_setting": rec.best.setting, "best_trial_id": rec.best.trial_id, "best_is_eager": True})}
    verdict, css = ranking.verdict(rec.best, rec.best_compiled)
    shown = rec.best if rec.best is not None and not rec.best.is_eager else rec.best_compiled
    low, high = ranking.interval(shown)
    return {"best_setting": rec.best.setting if rec.best else None, "best_call": rec.advice,
            "best_trial_id": rec.best.trial_id if rec.best else None,
            "best_is_eager": bool(rec.best and rec.best.is_eager),
            "best_speedup": shown.speedup_vs_eager, "best_low": low, "best_high": high,
            "best_compile_s": shown.compile_s, "break_even_iters": _break_even(shown),
            "compiled_speedup": rec.best_compiled.speedup_vs_eager, "verdict": verdict, "verdict_css": css,
            "drifted": bool(rec.best and not rec.best.is_eager and ranking.drifted(rec.best)),
            "tie_ids": tuple(c.trial_id for c in rec.ties if c.trial_id)}


def _break_even(c: ranking.Candidate) -> float:
    """Items after which the compile has paid for itself against eager at the same batch."""
    if c.speedup_vs_eager is None or not c.speedup_vs_eager > 1 or not c.batch_size:
        return math.inf
    saved_per_item = 1.0 / (c.throughput_items_s / c.speedup_vs_eager) - c.seconds_per_item
    return c.compile_s / saved_per_item / c.batch_size


def _header(data: pd.DataFrame, title: str) -> str:
    def listing(col: str) -> str:
        vals = sorted(str(v) for v in data[col].dropna().unique())
        return ", ".join(vals[:6]) + (f" (+{len(vals) - 6} more)" if len(vals) > 6 else "") or "unknown"
    n_ok = int(data["status"].eq("ok").sum())
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (f'<header class="top"><h1>{html_text(title)}</h1><p class="sub">{len(data):,} trials '
            f"({n_ok:,} ok, {len(data) - n_ok:,} failed) from {data['sweep_id'].nunique():,} sweep(s) · "
            f"devices: {html_text(listing('device_name'))} · torch {html_text(listing('torch_version'))} · "
            f"{_sharing(data)}generated {when}</p></header>")


def _sharing(data: pd.DataFrame) -> str:
    """Says when trials shared GPUs, and how often a neighbour compiled in a trial's timed windows."""
    shared = pd.to_numeric(data["trials_per_gpu"], errors="coerce").gt(1)
    if not shared.any():
        return ""
    busy = pd.to_numeric(data.loc[shared, "host_busy_windows_pct"], errors="coerce").mean()
    return (f"<b>{int(shared.sum())} trials shared a GPU</b> (a neighbour compiled during "
            f"{0 if pd.isna(busy) else busy:.0f}% of their timed windows) · ")


def _overview(summary: pd.DataFrame, page: _Page) -> str:
    if summary.empty:
        return '<h2>Overview</h2><p class="empty">No trials in these results.</p>'
    nav = "".join(f'<a href="#{a}">{html_text(m)}</a>' for m, a in
                  summary[["model", "anchor"]].drop_duplicates().itertuples(index=False))
    wins = summary[summary["verdict_css"].eq("v-win")]
    loses = summary[summary["verdict_css"].eq("v-lose")]
    even = summary[summary["verdict_css"].eq("v-even") & summary["best_speedup"].notna()]
    drifted = even[even["drifted"].astype(bool)]
    even = even.drop(index=drifted.index)
    lines = [f"<b>Compiling pays</b> in a long run in {len(wins)} of {_count(len(summary), 'context')}"
             + (f", most in {html_text(wins.loc[wins['best_speedup'].idxmax(), 'label'])} at "
                f"{wins['best_speedup'].max():.2f}×" if not wins.empty else "")]
    if not loses.empty:
        lines.append(f"<b>eager wins</b> in {len(loses)}: " + ", ".join(html_text(x) for x in loses["label"]))
    if not even.empty:
        lines.append(f"no clear difference (inside the measured noise, at least ±{ranking.TIE_BAND_PCT:g}%) "
                     f"in {len(even)}: " + ", ".join(html_text(x) for x in even["label"]))
    if not drifted.empty:
        lines.append(f"<b>speedup not established</b> (the trial's eager baseline drifted from the sweep's eager "
                     f"trial) in {len(drifted)}: " + ", ".join(html_text(x) for x in drifted["label"]))
    return ("<h2>Overview</h2>" f'<nav class="models">{nav}</nav>' + _selector(summary)
            + f'<p>{"; ".join(lines)}. Each context\'s choice is the setting <code>sweeper recommend</code> '
            "prints for it: the fewest seconds per item in a long run (compile paid back), accurate trials "
            "only.</p>" + figs.reading_key(floors.RUN_TO_RUN_FLOOR, floors.UNSTABLE_BASELINE_FLOOR)
            + page.plot(figs.overview_bars(summary), "No accurate compiled trial: no speedup to show.")
            + tables.summary_table(summary))


def _selector(summary: pd.DataFrame) -> str:
    """The context selector: every view below shows the chosen context only (or all of them)."""
    options = "".join(f'<option value="{s.ctx_id}">{html_text(s.label)}</option>' for s in summary.itertuples())
    return ('<div class="selector"><label><b>Context</b> <select id="ctx-select"><option value="">all '
            f"contexts ({len(summary)})</option>{options}</select></label> "
            '<span class="note" id="ctx-count"></span></div>')


def _model_section(model: str, data: pd.DataFrame, by_context: dict[tuple, Any], summary: pd.DataFrame,
                   page: _Page) -> str:
    mine = summary[summary["model"].eq(model)]
    parts = [f'<section id="{mine["anchor"].iloc[0]}" class="model"><h2>{html_text(model)}</h2>']
    for _, s in mine.iterrows():
        key = tuple(s[k] for k in ranking.CONTEXT)
        positions = next(v for k, v in by_context.items() if _same_key(k, key))
        parts.append(_context_block(s, data.iloc[positions], page))
    return "".join(parts) + "</section>"


def _same_key(a: tuple, b: tuple) -> bool:
    return all((pd.isna(x) and pd.isna(y)) if pd.isna(x) or pd.isna(y) else x == y for x, y in zip(a, b, strict=True))


def _context_block(s: pd.Series, ctx: pd.DataFrame, page: _Page) -> str:
    label = html_text(s["label"])
    failed = ctx[ctx["status"].ne("ok") | ctx["accuracy_ok"].eq(False).fillna(False).astype(bool)]
    front = ctx[ctx["on_front"]]
    best = s["best_setting"] if isinstance(s["best_setting"], str) else None
    head = (f"<h3>{label}</h3><p class=\"sub\">{_count(len(ctx), 'trial')}, {s['n_ok']} ok · verdict: "
            f'<span class="{s["verdict_css"]}">{html_text(s["verdict"])}</span>'
            + (f" · choice (as <code>sweeper recommend</code>, long run): {html_text(best)}" if best else "") + "</p>")
    ties = frozenset(str(t) for t in s["tie_ids"]) if isinstance(s["tie_ids"], (list, tuple)) else frozenset()
    choice = s["best_trial_id"] if isinstance(s["best_trial_id"], str) else None
    scatter = page.plot(explore.pareto_scatter(ctx, ctx["on_front"], f"{figs.plotly_text(s['label'])}: Pareto front",
                                               choice, ties),
                        "No successful trial with memory and throughput: nothing to plot.", axes=True)
    coords = page.plot(explore.parcoords(ctx, f"{figs.plotly_text(s['label'])}: every setting (drag along an axis to "
                                         "filter)"), "No successful trial to draw.")
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
    return (f'<div class="ctx" data-ctx="{s["ctx_id"]}">' + head + scatter + coords
            + f'<div class="grid2"><div>{heat}</div><div>{bars}</div></div>' + front_html + failed_html
            + stream_block(ctx, page.plot) + scope_block(ctx, page.plot) + price_block(ctx)
            + deploy_block(ctx) + "</div>")


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _comparison(base_df: pd.DataFrame, new_df: pd.DataFrame) -> str:
    cmp = compare_runs(base_df, new_df, ranking.CHANGE_PCT, ranking.COMPILE_FLOOR_S)
    counts = cmp["verdict"].value_counts()
    chips = " · ".join(f"{html_text(v)}: {int(counts[v])}" for v in counts.index)
    changed = cmp[cmp["verdict"].ne("unchanged")]
    return ('<section id="comparison"><h2>Comparison with the base results</h2>'
            f'<p class="sub">Settings matched by model, mode, dynamic, batch size, sequence length, phase, '
            f"precision and backend; changes beyond ±{ranking.CHANGE_PCT:g}% (compile time also beyond "
            f"{ranking.COMPILE_FLOOR_S:g} s) are flagged. "
            f"{chips or 'nothing to compare'}.</p>"
            + (tables.comparison_table(changed) if not changed.empty else '<p class="empty">No changes.</p>')
            + "</section>")
