"""`sweeper knobs`: the inductor options people tune, checked against the installed torch; and
`sweeper prices RESULTS`: each option set's price against the default set, and the deployment
paths' first-call costs."""

from __future__ import annotations

import argparse
import json
import sys

from sweeper.analysis import knob_price
from sweeper.analysis.frames import fmt_num
from sweeper.results.schema import ResultsError
from sweeper.results.store import read_results
from sweeper.spec import knobs, options


def register(subparsers: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    k = subparsers.add_parser("knobs", parents=parents, help="list the inductor options an axes.options set can tune")
    k.set_defaults(func=cmd_knobs)
    p = subparsers.add_parser("prices", parents=parents, help="each option set's throughput and compile-time "
                              "change against the default set, and JIT cold / Mega-Cache / AOTI first-call costs")
    p.add_argument("paths", nargs="+", metavar="PATH", help="results .parquet files or directories")
    p.add_argument("--json", action="store_true", help="print both tables as JSON")
    p.set_defaults(func=cmd_prices)


def cmd_knobs(args: argparse.Namespace) -> int:
    known = options.known_keys()
    if known is None:
        print("(torch is not importable here: the names are not checked)")
    for knob in knobs.COMMON:
        missing = known is not None and knob.key not in known
        print(f"{knob.key:30s} e.g. {knob.example!r:14} {knob.what}" + ("  [not in this torch]" if missing else ""))
    print("\nUse them in a spec as named sets:  axes: {options: {default: {}, cdt: {coordinate_descent_tuning: true}}}")
    return 0


def _pct(value: object, low: object, high: object) -> str:
    text = f"{float(value):+.1f}%" if fmt_num(value) != "—" else "—"
    return text + (f" [{float(low):+.1f}, {float(high):+.1f}]" if fmt_num(low) != "—" and fmt_num(high) != "—" else "")


def cmd_prices(args: argparse.Namespace) -> int:
    try:
        df = read_results(args.paths)
    except ResultsError as e:
        print(f"sweeper: error: {e}", file=sys.stderr)
        return 2
    prices, deploy, failed = knob_price.price_table(df), knob_price.deploy_table(df), knob_price.failed_aoti(df)
    if args.json:
        print(json.dumps({"prices": prices.to_dict("records"), "deploy": deploy.to_dict("records"),
                          "aoti_failed": failed.to_dict("records")}, default=str, indent=2))
        return 0
    print("option set vs default: throughput change [interval], cold and warm compile change")
    for _, r in prices.iterrows():
        change = {name: _pct(*(r[f"{name}_change{end}pct"] for end in ("_", "_low_", "_high_")))
                  for name in ("throughput", "cold_compile", "warm_compile")}
        print(f"  {r['model']} {r['mode']} bs{int(r['batch_size'])} {r['path']} {r['option_set']}: "
              f"throughput {change['throughput']}, cold compile {fmt_num(r['cold_compile_s'])} s vs "
              f"{fmt_num(r['cold_compile_default_s'])} s ({change['cold_compile']}), warm {change['warm_compile']}"
              f": {r['verdict']}")
    print("first call of a deployment (s): JIT cold | JIT from Mega-Cache | AOTI load + first call "
          "(build s, package MB)")
    for _, r in deploy.iterrows():
        print(f"  {r['model']} {r['mode']} bs{int(r['batch_size'])} {r['option_set'] or ''}: "
              f"{fmt_num(r['jit_cold_s'])} | {fmt_num(r['jit_megacache_s'])} | {fmt_num(r['aoti_load_first_call_s'])} "
              f"({fmt_num(r['aoti_build_s'])} s, {fmt_num(r['aoti_package_mb'])} MB); speedup jit "
              f"{fmt_num(r['jit_speedup'])}x, aoti {fmt_num(r['aoti_speedup'])}x")
    for _, r in failed.iterrows():
        print(f"  aoti {r['model']} {r['mode']} bs{int(r['batch_size'])} {r['option_set'] or ''}: {r['status']}: "
              f"{r['error']}")  # whole: a load crash's cause (the library, the compiler) comes last
    return 0
