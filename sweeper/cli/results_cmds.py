"""The `sweeper report` and `sweeper recommend` subcommands: read Parquet results, write HTML or advice.

Wired into the main CLI by `register(subparsers)`. A mistake in the input (missing path,
a file that is not sweeper Parquet, an unknown model, a filter nothing matches) prints one
line `sweeper: error: ...` to stderr and returns exit code 2, without a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import asdict
from pathlib import Path
from typing import get_args

from sweeper.analysis import floors, generate_workload, recommend_text
from sweeper.analysis.generate_workload import GenerateWorkload, GenerateWorkloadError
from sweeper.analysis.recommend import RecommendError, recommend_all
from sweeper.api.results import check_limits
from sweeper.report.page import DEFAULT_TITLE, write_report
from sweeper.results import traces
from sweeper.results.schema import ResultsError
from sweeper.results.store import find_result_files, read_results
from sweeper.spec.sections import Phase, Precision

log = logging.getLogger(__name__)

USAGE_ERROR = 2
_WORKLOAD_HELP = ("only this input stream; or, for phase generate, a serving workload REQUESTSxPROMPT+NEW (e.g. "
                  "1000x128+256: requests of 128 prompt tokens and 256 new tokens), ranked by the time to serve it, "
                  "time to first token and decode both counted")


def register(subparsers: argparse._SubParsersAction, parents: list[argparse.ArgumentParser] | None = None) -> None:
    """Add `report` and `recommend` to the CLI's subparsers (`parents`: the flags every command takes)."""
    parents = [*(parents or []), _host_profile_flag()]
    rep = subparsers.add_parser("report", help="build the one-file HTML Pareto report from results", parents=parents,
                                description="Build one self-contained HTML report (opens offline) "
                                "from sweeper Parquet results: files or directories, several sweeps at once.")
    rep.add_argument("paths", nargs="+", metavar="PATH", help="results .parquet files or directories")
    rep.add_argument("-o", "--output", default="report.html", type=Path, help="HTML file (default: %(default)s)")
    rep.add_argument("--compare", nargs="+", metavar="PATH", help="base results to compare against (regressions)")
    rep.add_argument("--title", default=DEFAULT_TITLE, help="page title")
    rep.set_defaults(func=cmd_report)
    _register_recommend(subparsers, parents)


def _register_recommend(subparsers: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    rec = subparsers.add_parser(
        "recommend", help="the best torch.compile setting per context, under limits", parents=parents,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Pick the fastest accurate setting for the work you will run, under memory and\n"
        "compile-time limits, and say why the runner-up lost. Settings are ranked by the time a fixed\n"
        "amount of work takes: without --iterations a long run (1 / throughput per item); with it,\n"
        "compile_s + items / throughput, where items = iterations x batch (--batch-size, else the\n"
        "largest batch measured), so a bigger batch gets no credit for doing more work per step.\n"
        "Memory is the whole-run peak, compile and autotuning included. One context (model, phase,\n"
        "precision, device, workload, sequence length) is answered in full; several, one line each\n"
        "(--json: a list). Exit code 1 when some context has no setting within the limits.")
    rec.add_argument("paths", nargs="+", metavar="PATH", help="results .parquet files or directories")
    rec.add_argument("--model", help="model name as in the results (default: every model)")
    rec.add_argument("--phase", choices=get_args(Phase), help="only this phase (default: every phase measured)")
    rec.add_argument("--precision", choices=get_args(Precision),
                     help="only this precision (default: every precision measured)")
    rec.add_argument("--device", dest="device_name", metavar="NAME", help="only this device name")
    rec.add_argument("--accelerator-type", metavar="NAME", help="only this GPU type (axes.accelerator_type)")
    rec.add_argument("--seq-len", type=int, help="only this sequence length")
    rec.add_argument("--workload", help=_WORKLOAD_HELP)
    rec.add_argument("--batch-size", type=int, help="compare at this batch size only (your batch is fixed)")
    rec.add_argument("--max-memory-gib", type=float, help="whole-run peak memory limit, compile transients included")
    rec.add_argument("--max-compile-s", type=float, help="compile time limit in seconds (a stream: every compile)")
    rec.add_argument("--iterations", type=int, help="iterations you will run: compile time must pay back "
                     "within them (default: a long run)")
    rec.add_argument("--warm-start", action="store_true", help="the deployment ships each setting's Mega-Cache "
                     "artifact (sweeper export): its compile costs the measured warm start, not the cold compile")
    rec.add_argument("--json", action="store_true", help="print JSON: one object for one context, else a list")
    rec.set_defaults(func=cmd_recommend)


def _host_profile_flag() -> argparse.ArgumentParser:
    flag = argparse.ArgumentParser(add_help=False)
    flag.add_argument("--host-profile", type=Path, help="the intervals' floors from a `sweeper calibrate` profile")
    return flag


def _with_floors(command):
    """Run `command(args)` with the interval floors of --host-profile (an unreadable one: one line)."""
    def run(args: argparse.Namespace) -> int:
        try:
            profile = floors.read_profile(args.host_profile) if args.host_profile else None
        except ValueError as e:
            return _fail(e)
        with floors.host_floors(profile):
            return command(args)
    return run


def cmd_report(args: argparse.Namespace) -> int:
    return _with_floors(_report)(args)


def _report(args: argparse.Namespace) -> int:
    try:
        df = read_results(args.paths)
        base = read_results(args.compare) if args.compare else None
        links = traces.links(find_result_files(args.paths), args.output)
        path = write_report(df, args.output, title=args.title, compare_df=base, traces=links)
    except (ResultsError, OSError) as e:
        return _fail(e)
    print(f"report: {path} ({len(df)} trials, {path.stat().st_size / 1e6:.1f} MB)")
    return 0


def cmd_recommend(args: argparse.Namespace) -> int:
    return _with_floors(_recommend)(args)


def _recommend(args: argparse.Namespace) -> int:
    try:
        served = GenerateWorkload.parse(args.workload)
        if served is not None:
            return _recommend_generate(args, served)
        limits = check_limits(args.max_memory_gib, args.max_compile_s, args.iterations, args.batch_size,
                              args.warm_start)
        df = read_results(args.paths)
        recs = recommend_all(df, args.model, limits, phase=args.phase, precision=args.precision,
                             device_name=args.device_name, seq_len=args.seq_len, workload=args.workload,
                             accelerator_type=args.accelerator_type)
    except (ResultsError, RecommendError, GenerateWorkloadError) as e:
        return _fail(e)
    if not recs:
        return _fail("no trials in these results")
    if args.json:
        answer = recs[0].to_dict() if len(recs) == 1 else [r.to_dict() for r in recs]
        print(json.dumps(answer, indent=2, allow_nan=False))
    else:
        print(recommend_text.render(recs[0]) if len(recs) == 1 else recommend_text.render_table(recs))
    return 0 if all(r.best is not None for r in recs) else 1


def _recommend_generate(args: argparse.Namespace, served: GenerateWorkload) -> int:
    """`--workload RxP+N`: phase generate's settings ranked by the time to serve that workload."""
    df = read_results(args.paths)
    for column, wanted in (("model", args.model), ("precision", args.precision), ("device_name", args.device_name)):
        df = df[df[column].eq(wanted)] if wanted is not None else df
    ranked = generate_workload.rank(df, served, args.max_memory_gib, args.max_compile_s)
    if args.json:
        print(json.dumps({" · ".join(k): [asdict(s) for s in v] for k, v in ranked.items()}, indent=2))
    else:
        print(generate_workload.render(served, ranked))
    return 0


def _fail(error: object) -> int:
    message = " ".join(str(error).split()) if not isinstance(error, OSError) else str(error)
    print(f"sweeper: error: {message}", file=sys.stderr)
    return USAGE_ERROR
