"""The knob blocks of a context: each option set's price against the default set (throughput and
cold and warm compile time, with intervals), and, where the aoti path was measured, the first call
of a deployment that compiles cold, starts from the Mega-Cache artifact or loads the package."""

from __future__ import annotations

import pandas as pd

from sweeper.analysis import frames, knob_price
from sweeper.analysis.frames import fmt_num
from sweeper.report.tables import html_text, table, td, td_code, td_num


def _interval(value: object, low: object, high: object) -> str:
    if frames.is_missing(value):
        return td("—")
    span = f" [{float(low):+.1f}, {float(high):+.1f}]" if not (frames.is_missing(low) or frames.is_missing(high)) \
        else ""
    return f'<td class="num" data-v="{float(value)}">{float(value):+.1f}%{span}</td>'


def price_block(ctx: pd.DataFrame) -> str:
    prices = knob_price.price_table(ctx)
    if prices.empty:
        return ""
    headers = ["setting", "option set", "options applied", "throughput change [95%]", "cold compile s",
               "default s", "cold change", "warm change", "verdict"]
    body = []
    for _, r in prices.iterrows():
        label = frames.setting_label({"mode": r["mode"], "dynamic_label": r["dynamic_label"],
                                      "batch_size": r["batch_size"], "path": r["path"]})
        body.append("<tr>" + td(label) + td(r["option_set"]) + td_code(r["options"] or "{}")
                    + _interval(r["throughput_change_pct"], r["throughput_change_low_pct"],
                                r["throughput_change_high_pct"])
                    + td_num(r["cold_compile_s"]) + td_num(r["cold_compile_default_s"])
                    + _interval(r["cold_compile_change_pct"], r["cold_compile_change_low_pct"],
                                r["cold_compile_change_high_pct"])
                    + _interval(r["warm_compile_change_pct"], r["warm_compile_change_low_pct"],
                                r["warm_compile_change_high_pct"]) + td(r["verdict"]) + "</tr>")
    return ("<h4>The price of each option set (against the default set of the same setting)</h4>"
            '<p class="sub">Throughput change: the ratio of the two speedups over their own in-process eager '
            "windows, its interval from both speedups' intervals (a tie when it holds 0). Compile intervals "
            "need repeated trials.</p>" + table(headers, body))


def deploy_block(ctx: pd.DataFrame) -> str:
    deploy, failed = knob_price.deploy_table(ctx), knob_price.failed_aoti(ctx)
    if deploy.empty and failed.empty:
        return ""
    headers = ["setting", "JIT cold s", "JIT from Mega-Cache s", "AOTI load + first call s", "AOTI build s",
               "package MB", "speedup JIT", "speedup AOTI"]
    body = ["<tr>" + td(frames.setting_label({"mode": r["mode"], "dynamic_label": r["dynamic_label"],
                                              "batch_size": r["batch_size"], "option_set": r["option_set"] or None}))
            + td_num(r["jit_cold_s"]) + td_num(r["jit_megacache_s"]) + td_num(r["aoti_load_first_call_s"])
            + td_num(r["aoti_build_s"]) + td_num(r["aoti_package_mb"]) + td_num(r["jit_speedup"], suffix="×")
            + td_num(r["aoti_speedup"], suffix="×") + "</tr>" for _, r in deploy.iterrows()]
    notes = "".join(f"<li>aoti {html_text(r['mode'])} batch {fmt_num(r['batch_size'])}: {html_text(r['status'])}: "
                    f"{html_text(str(r['error'])[:300])}</li>" for _, r in failed.iterrows())
    return ("<h4>Deployment paths: what the first call costs</h4>" + (table(headers, body) if body else "")
            + (f"<ul>{notes}</ul>" if notes else "") + f'<p class="note">{fmt_num(len(deploy))} settings.</p>')
