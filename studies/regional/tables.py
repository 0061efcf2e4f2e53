"""The regional-compilation and Mega-Cache tables of a sweep, as Markdown:

    python -m studies.regional.tables RESULTS...
    python -m studies.regional.tables --write     # docs/findings.md's per-model table, from the committed rows

1. per model, over its settings measured in both scopes: the cold-compile ratio (whole / regional)
   and the throughput ratio (regional / whole), median and range, and the fraction of the cold
   compile a Mega-Cache warm start saved, per scope;
2. whole vs regional per model, mode and batch: cold compile and throughput, and their ratios;
3. per compiled trial: cold compile, warm from the inductor cache dir, warm start from the
   Mega-Cache artifact in a fresh process (and its load), the fraction of the cold compile saved.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from studies import doc_section
from sweeper.analysis.frames import fmt_num, prepare
from sweeper.report.scope import pairs, scope_rows
from sweeper.results.store import read_results

RESULTS = Path(__file__).resolve().parent / "results" / "sweep"
PAGE = doc_section.DOCS / "findings.md"


def scope_table(data) -> list[str]:
    lines = ["| model | mode | batch | cold compile whole s | regional s | whole/regional | items/s whole | "
             "regional | regional/whole | regions | graphs (whole / regional) |", "|" + "---|" * 11]
    for model, ctx in data.groupby("model", sort=True):
        both = pairs(scope_rows(ctx))
        for _, p in both.sort_values(["mode_w", "batch_size_w"]).iterrows():
            lines.append(f"| {model} | {p['mode_w']} | {int(p['batch_size_w'])} | {fmt_num(p['compile_s_w'])} | "
                         f"{fmt_num(p['compile_s_r'])} | {fmt_num(p['compile_ratio'])}x | "
                         f"{fmt_num(p['throughput_items_s_w'])} | {fmt_num(p['throughput_items_s_r'])} | "
                         f"{fmt_num(p['throughput_ratio'])}x | {fmt_num(p['compiled_regions_r'])} | "
                         f"{fmt_num(p['graphs_w'])} / {fmt_num(p['graphs_r'])} |")
    return lines


def _spread(values, digits: int = 3, unit: str = "x") -> str:
    """`median unit (min-max)` of the values, or "-" when there are none."""
    v = [float(x) for x in values if x == x]
    if not v:
        return "-"
    mid = statistics.median(v)
    return f"{fmt_num(mid, digits)}{unit} ({fmt_num(min(v), digits)}-{fmt_num(max(v), digits)})"


def _saved_pct(r) -> float:
    """The fraction of a trial's cold compile that the warm start from its artifact saved, in %
    (NaN where either is missing)."""
    if not r["compile_s"] or r["warm_megacache_s"] != r["warm_megacache_s"]:
        return float("nan")
    return 100 * (1 - (r["warm_megacache_s"] + (r["megacache_load_s"] or 0)) / r["compile_s"])


def summary_table(data) -> list[str]:
    lines = ["| model | settings in both scopes | cold compile whole/regional | throughput regional/whole | "
             "Mega-Cache saved (whole) | Mega-Cache saved (regional) |", "|" + "---|" * 6]
    done = data[~data["is_eager"] & data["status"].eq("ok")]
    for model, ctx in done.groupby("model", sort=True):
        both = pairs(scope_rows(ctx))
        saved = {scope: _spread([_saved_pct(r) for _, r in ctx[ctx["scope"].eq(scope)].iterrows()], 3, "%")
                 for scope in ("whole", "regional")}
        lines.append(f"| {model} | {len(both)} | {_spread(both['compile_ratio'])} | "
                     f"{_spread(both['throughput_ratio'])} | {saved['whole']} | {saved['regional']} |")
    return lines


def megacache_table(data) -> list[str]:
    lines = ["| model | scope | mode | batch | cold compile s | warm (cache dir) s | warm (artifact) s | load s | "
             "saved vs cold | artifact MB |", "|" + "---|" * 10]
    done = data[~data["is_eager"] & data["status"].eq("ok")].sort_values(["model", "scope", "mode", "batch_size"])
    for _, r in done.iterrows():
        saved = _saved_pct(r)
        lines.append(f"| {r['model']} | {r['scope']} | {r['mode']} | {int(r['batch_size'])} | "
                     f"{fmt_num(r['compile_s'])} | {fmt_num(r['warm_compile_s'])} | {fmt_num(r['warm_megacache_s'])} | "
                     f"{fmt_num(r['megacache_load_s'])} | {fmt_num(saved) + '%' if saved == saved else '—'} | "
                     f"{fmt_num(r['megacache_bytes'] / 2**20)} |")
    return lines


def tables(data) -> str:
    return "\n".join(["## Per model", "", *summary_table(data), "", "## Whole vs regional", "",
                      *scope_table(data), "", "## Mega-Cache warm start", "", *megacache_table(data)])


def page_body(results: Path = RESULTS) -> str:
    """docs/findings.md's generated part: the per-model summary of the committed H200 sweep."""
    return "\n".join(summary_table(prepare(read_results([results]))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="*", help="results directories or files")
    ap.add_argument("--write", action="store_true", help="replace docs/findings.md's per-model table (committed rows)")
    args = ap.parse_args()
    if args.write:
        doc_section.write("regional", page_body(), PAGE)
    elif not args.results:
        ap.error("name results, or --write")
    else:
        print(tables(prepare(read_results(args.results))))


if __name__ == "__main__":
    main()
