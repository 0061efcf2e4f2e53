"""The regional-compilation and Mega-Cache tables of a sweep, as Markdown:

    python benchmarks/regional_tables.py RESULTS...

1. whole vs regional per model, mode and batch: cold compile and throughput, and their ratios;
2. per compiled trial: cold compile, warm from the inductor cache dir, warm start from the
   Mega-Cache artifact in a fresh process (and its load), the fraction of the cold compile saved.
"""

from __future__ import annotations

import sys

from sweeper.analysis.frames import fmt_num, prepare
from sweeper.report.scope import pairs, scope_rows
from sweeper.results.store import read_results


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


def megacache_table(data) -> list[str]:
    lines = ["| model | scope | mode | batch | cold compile s | warm (cache dir) s | warm (artifact) s | load s | "
             "saved vs cold | artifact MB |", "|" + "---|" * 10]
    done = data[~data["is_eager"] & data["status"].eq("ok")].sort_values(["model", "scope", "mode", "batch_size"])
    for _, r in done.iterrows():
        saved = 1 - (r["warm_megacache_s"] + (r["megacache_load_s"] or 0)) / r["compile_s"]
        lines.append(f"| {r['model']} | {r['scope']} | {r['mode']} | {int(r['batch_size'])} | "
                     f"{fmt_num(r['compile_s'])} | {fmt_num(r['warm_compile_s'])} | {fmt_num(r['warm_megacache_s'])} | "
                     f"{fmt_num(r['megacache_load_s'])} | {fmt_num(100 * saved)}% | "
                     f"{fmt_num(r['megacache_bytes'] / 2**20)} |")
    return lines


def main(paths: list[str]) -> None:
    data = prepare(read_results(paths))
    print("\n".join(["## Whole vs regional", "", *scope_table(data), "", "## Mega-Cache warm start", "",
                     *megacache_table(data)]))


if __name__ == "__main__":
    main(sys.argv[1:])
