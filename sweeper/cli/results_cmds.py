"""The `sweeper report` and `sweeper recommend` subcommands: read Parquet results, write HTML or advice.

Wired into the main CLI by `register(subparsers)`. A mistake in the input (missing path,
a file that is not sweeper Parquet, an unknown model, an ambiguous question) prints one
line `sweeper: error: ...` to stderr and returns exit code 2, without a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from sweeper.analysis import recommend_text
from sweeper.analysis.recommend import RecommendError, recommend
from sweeper.report.page import DEFAULT_TITLE, write_report
from sweeper.results.schema import ResultsError
from sweeper.results.store import read_results

log = logging.getLogger(__name__)

USAGE_ERROR = 2


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `report` and `recommend` to the CLI's subparsers."""
    rep = subparsers.add_parser("report", help="build the one-file HTML Pareto report from results",
                                description="Build one self-contained HTML report (opens offline) "
                                "from sweeper Parquet results: files or directories, several sweeps at once.")
    rep.add_argument("paths", nargs="+", metavar="PATH", help="results .parquet files or directories")
    rep.add_argument("-o", "--output", default="report.html", type=Path, help="HTML file to write (default: %(default)s)")
    rep.add_argument("--compare", nargs="+", metavar="PATH", help="base results to compare against (regressions)")
    rep.add_argument("--title", default=DEFAULT_TITLE, help="page title")
    rep.set_defaults(func=cmd_report)

    rec = subparsers.add_parser(
        "recommend", help="the best torch.compile setting for one model, under limits",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Pick the fastest accurate setting of MODEL for the work you will run, under memory and\n"
        "compile-time limits, and say why the runner-up lost. Settings are ranked by the time a fixed\n"
        "amount of work takes: without --iterations a long run (1 / throughput per item); with it,\n"
        "compile_s + items / throughput, where items = iterations x batch (--batch-size, else the\n"
        "largest batch measured), so a bigger batch gets no credit for doing more work per step.\n"
        "Exit code 1 when no setting meets the limits.")
    rec.add_argument("paths", nargs="+", metavar="PATH", help="results .parquet files or directories")
    rec.add_argument("--model", required=True, help="model name as in the results")
    rec.add_argument("--phase", help="infer or train (needed when the results hold both)")
    rec.add_argument("--precision", help="fp32 or bf16 (needed when the results hold both)")
    rec.add_argument("--device", dest="device_name", metavar="NAME", help="device name (needed when the results hold several)")
    rec.add_argument("--seq-len", type=int, help="sequence length (needed when the results hold several)")
    rec.add_argument("--workload", help="input stream name (needed when the results hold several)")
    rec.add_argument("--batch-size", type=int, help="compare at this batch size only (your batch is fixed)")
    rec.add_argument("--max-memory-gib", type=float, help="peak memory limit, compile transients included")
    rec.add_argument("--max-compile-s", type=float, help="cold compile time limit in seconds")
    rec.add_argument("--iterations", type=int, help="iterations you will run: compile time must pay back "
                     "within them (default: a long run)")
    rec.add_argument("--json", action="store_true", help="print the recommendation as JSON")
    rec.set_defaults(func=cmd_recommend)


def cmd_report(args: argparse.Namespace) -> int:
    try:
        df = read_results(args.paths)
        base = read_results(args.compare) if args.compare else None
        path = write_report(df, args.output, title=args.title, compare_df=base)
    except (ResultsError, OSError) as e:
        return _fail(e)
    print(f"report: {path} ({len(df)} trials, {path.stat().st_size / 1e6:.1f} MB)")
    return 0


def cmd_recommend(args: argparse.Namespace) -> int:
    for flag in ("max_memory_gib", "max_compile_s", "iterations", "batch_size"):
        value = getattr(args, flag)
        if value is not None and value <= 0:
            return _fail(f"--{flag.replace('_', '-')} must be positive, not {value}")
    try:
        df = read_results(args.paths)
        rec = recommend(df, args.model, phase=args.phase, precision=args.precision,
                        max_memory_gib=args.max_memory_gib, max_compile_s=args.max_compile_s,
                        iterations=args.iterations, batch_size=args.batch_size,
                        device_name=args.device_name, seq_len=args.seq_len, workload=args.workload)
    except (ResultsError, RecommendError) as e:
        return _fail(e)
    print(json.dumps(rec.to_dict(), indent=2) if args.json else recommend_text.render(rec))
    return 0 if rec.best is not None else 1


def _fail(error: object) -> int:
    message = " ".join(str(error).split()) if not isinstance(error, OSError) else str(error)
    print(f"sweeper: error: {message}", file=sys.stderr)
    return USAGE_ERROR
