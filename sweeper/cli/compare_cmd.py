"""`sweeper compare`: each setting's change between two result sets (`--base`), or between two GPU
types of one mixed sweep (`--types H100 H200`), printed as a table, worst verdicts first."""

from __future__ import annotations

import argparse

import pandas as pd

from sweeper.analysis.compare import compare_runs, compare_types
from sweeper.results.schema import ResultsError
from sweeper.results.store import read_results

SHOWN = ["verdict", "model", "mode", "dynamic", "batch_size", "seq_len", "phase", "precision",
         "throughput_items_s_base", "throughput_items_s_new", "throughput_items_s_change_pct", "changes"]


def register(subparsers: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    cmp = subparsers.add_parser("compare", parents=parents, help="setting by setting: one result set against "
                                "another (--base), or one GPU type against another (--types)")
    cmp.add_argument("paths", nargs="+", metavar="PATH", help="results .parquet files or directories")
    cmp.add_argument("--base", nargs="+", metavar="PATH", help="the results PATH is set against")
    cmp.add_argument("--types", nargs=2, metavar=("BASE_TYPE", "NEW_TYPE"),
                     help="within PATH: the settings on NEW_TYPE against the same settings on BASE_TYPE "
                     "(axes.accelerator_type)")
    cmp.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    if (args.base is None) == (args.types is None):
        raise ResultsError("sweeper compare: give either --base PATH... or --types BASE_TYPE NEW_TYPE")
    new = read_results(args.paths)
    table = compare_types(new, *args.types) if args.types else compare_runs(read_results(args.base), new)
    base, against = (args.types if args.types else (" ".join(args.base), " ".join(args.paths)))
    print(f"{against} against {base}: {len(table)} settings")
    print(format_table(table))
    return 0


def format_table(table: pd.DataFrame) -> str:
    shown = table[[c for c in SHOWN if c in table.columns]].rename(columns={
        "throughput_items_s_base": "items/s base", "throughput_items_s_new": "items/s new",
        "throughput_items_s_change_pct": "change %"})
    return shown.to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="-")
