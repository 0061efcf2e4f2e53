"""HTML tables of the report: per-context summary, Pareto front, failed trials, comparison.

Every value taken from the data is HTML-escaped here. Numeric cells carry their raw value
in `data-v` so the page's header-click sort orders them as numbers (missing values last).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

import pandas as pd

from sweeper.analysis import frames, ranking
from sweeper.analysis.frames import fmt_num, is_missing
from sweeper.report.figures import accuracy_label

MAX_ERROR_CHARS = 600
MAX_TABLE_ROWS = 2000


def html_text(value: object) -> str:
    if is_missing(value):
        return ""
    return html.escape(str(value), quote=True)


def td(value: object, nowrap: bool = False) -> str:
    return f'<td class="nw">{html_text(value)}</td>' if nowrap else f"<td>{html_text(value)}</td>"


def td_num(value: object, digits: int = 3, suffix: str = "", signed: bool = False,
           decimals: int | None = None) -> str:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        x = float("nan")
    raw = "" if pd.isna(x) else repr(x)
    if pd.notna(x) and (signed or decimals is not None):
        shown = f"{x:+.{decimals or 1}f}" if signed else f"{x:.{decimals}f}"
    else:
        shown = fmt_num(x, digits)
    shown += suffix if not pd.isna(x) else ""
    return f'<td class="num" data-v="{raw}">{shown}</td>'


def td_code(value: object) -> str:
    return f"<td><code>{html_text(value)}</code></td>"


def table(headers: Sequence[str], body_rows: Iterable[str], sortable: bool = True, caption: str = "") -> str:
    """A table from header texts (escaped here) and ready <tr> rows; long tables scroll."""
    body = list(body_rows)
    cls = ' class="sortable"' if sortable else ""
    head = "".join(f'<th title="click to sort">{html_text(h)}</th>' if sortable else f"<th>{html_text(h)}</th>"
                   for h in headers)
    more = ""
    if len(body) > MAX_TABLE_ROWS:
        more = (f'<p class="note">Showing the first {MAX_TABLE_ROWS:,} of {len(body):,} rows; '
                'the Parquet files hold all.</p>')
        body = body[:MAX_TABLE_ROWS]
    cap = f'<p class="note">{caption}</p>' if caption else ""
    wrap = ' class="tablewrap scroll"' if len(body) > 14 else ' class="tablewrap"'
    return (f'{cap}<div{wrap}><table{cls}><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>{more}')


def verdict_cell(verdict: str, css: str) -> str:
    return f'<td class="{css}">{html_text(verdict)}</td>'


def summary_table(summary: pd.DataFrame) -> str:
    headers = ["Model", "Context", "Verdict", "Choice (as sweeper recommend, long run)", "Speedup vs eager",
               "Compile (s)", "Break-even iterations", "Trials ok / all"]
    body = []
    for _, s in summary.iterrows():
        body.append(
            f'<tr><td><a href="#{s["anchor"]}">{html_text(s["model"])}</a></td>'
            + td(ranking.context_label(s.to_dict()))
            + verdict_cell(s["verdict"], s["verdict_css"]) + td(s["best_setting"])
            + td_num(s["best_speedup"], suffix="×", decimals=2) + td_num(s["best_compile_s"])
            + td_num(s["break_even_iters"]) + f'<td class="num" data-v="{s["n_ok"]}">{s["n_ok"]} / {s["n"]}</td>'
            + "</tr>")
    return table(headers, body, caption="Speedup and compile: of the choice, or of the best compiled "
                 "setting where eager is the choice.")


def front_table(front: pd.DataFrame) -> str:
    stream = front["workload"].notna().any()
    headers = ["Mode", "dynamic", *(["Bucketing"] if stream else []), "Batch", "Seq len", "Throughput (items/s)",
               "Speedup (×)", "Peak mem, run (GiB)", "Peak mem, steady (GiB)", "Compile (s)", "Warm compile (s)",
               "Graph breaks", "Recompiles", "Accuracy", "What to run"]
    body = []
    for _, r in front.sort_values("throughput_items_s", ascending=False).iterrows():
        acc = accuracy_label(r["is_eager"], r["accuracy_ok"], "not checked")
        call = "eager: no torch.compile" if r["is_eager"] else frames.advice(r)
        body.append(
            "<tr>" + td(r["mode"], nowrap=True) + td("—" if r["is_eager"] else r["dynamic_label"])
            + (td(r["bucketing"]) if stream else "") + td_num(r["batch_size"])
            + td_num(r["seq_len"]) + td_num(r["throughput_items_s"]) + td_num(r["speedup_vs_eager"], decimals=2)
            + td_num(r["run_peak_mem_gib"]) + td_num(r["peak_mem_gib"]) + td_num(r["compile_cost_s"])
            + td_num(r["warm_compile_s"]) + td_num(r["graph_breaks"]) + td_num(r["recompiles"]) + td(acc)
            + td_code(call) + "</tr>")
    return table(headers, body)


def failed_table(failed: pd.DataFrame) -> str:
    headers = ["Status", "Setting", "Error", "Attempts", "Trial"]
    body = []
    for _, r in failed.iterrows():
        status = r["status"] if r["status"] != "ok" else "inaccurate"
        error = r["error"] or (f"rel_err {fmt_num(r['rel_err'])} > tolerance {fmt_num(r['accuracy_tol'])}"
                               if status == "inaccurate" else "")
        error = str(error)
        if len(error) > MAX_ERROR_CHARS:
            error = error[:MAX_ERROR_CHARS] + " …"
        body.append("<tr>" + f'<td class="v-fail">{html_text(status)}</td>' + td(frames.setting_label(r))
                    + f'<td class="err">{html_text(error)}</td>' + td_num(r["attempts"]) + td(r["trial_id"]) + "</tr>")
    return table(headers, body)


def comparison_table(cmp: pd.DataFrame) -> str:
    headers = ["Verdict", "Model", "Setting", "Phase · precision", "Throughput base → new (items/s)",
               "Δ throughput %", "Compile base → new (s)", "Δ compile %", "Peak mem base → new (GiB)",
               "Δ memory %", "What changed"]
    css = {"now fails": "v-fail", "regression": "v-lose", "still fails": "v-fail", "improvement": "v-win",
           "fixed": "v-win"}
    body = []
    for _, r in cmp.iterrows():
        pairs = "".join(
            f"<td class=\"num\">{fmt_num(r[f'{m}_base'])} → {fmt_num(r[f'{m}_new'])}</td>"
            + td_num(r[f"{m}_change_pct"], signed=True)
            for m in ("throughput_items_s", "compile_s", "peak_mem_gib"))
        body.append("<tr>" + verdict_cell(r["verdict"], css.get(r["verdict"], "v-even")) + td(r["model"])
                    + td(frames.setting_label(r.rename({"dynamic": "dynamic_label"})))
                    + td(" · ".join(str(r[k]) for k in ("phase", "precision") if r[k])) + pairs
                    + f'<td class="wrap">{html_text(r["changes"])}</td>' + "</tr>")
    return table(headers, body)


def traces_section(data: pd.DataFrame, links: dict[str, str]) -> str:
    """Every traced row with a link to its compile trace; empty when no row was traced."""
    traced = data[data["trace_bytes"].notna()] if "trace_bytes" in data else data.iloc[:0]
    if traced.empty:
        return ""
    headers = ["Model", "Context", "Setting", "Graphs", "Graph breaks", "Compile (s)", "Trace (KiB)", "Trace"]
    body = []
    for _, r in traced.sort_values(["model", "phase", "precision"]).iterrows():
        href = links.get(r["trial_id"])
        link = f'<a href="{html_text(href)}" download>{html_text(r["trial_id"])}.log.gz</a>' if href else None
        cell = f"<td>{link}</td>" if link else td(r["trial_id"])
        body.append("<tr>" + td(r["model"]) + td(ranking.context_label(r.to_dict())) + td(frames.setting_label(r))
                    + td_num(r["graphs"]) + td_num(r["graph_breaks"]) + td_num(r["compile_s"])
                    + td_num(float(r["trace_bytes"]) / 1024, decimals=1) + cell + "</tr>")
    return ('<h2 id="traces">Compile traces</h2><p class="sub">The TORCH_TRACE log of each traced trial\'s cold '
            "compile. <code>sweeper trace RESULTS TRIAL_ID -o DIR</code> turns one into tlparse's HTML "
            "(graphs, guards, breaks and recompiles with their reasons).</p>" + table(headers, body))
