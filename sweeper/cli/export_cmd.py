"""`sweeper export`: the recommended setting of one context as a deployable directory (the
module applying its torch.compile call, its Mega-Cache artifact, its versions, a README)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import get_args

from sweeper.analysis.recommend import RecommendError
from sweeper.api.results import check_limits
from sweeper.deploy.export import ExportError, describe, export
from sweeper.results.schema import ResultsError
from sweeper.spec.sections import Phase, Precision

USAGE_ERROR = 2


def register(subparsers: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    ex = subparsers.add_parser(
        "export", parents=parents, help="write what a deployment needs for the recommended setting",
        description="Pick the setting `sweeper recommend` picks for one context (same filters and limits) and "
        "write to DIR: a Python module whose compile_model(model) loads the trial's Mega-Cache artifact and "
        "applies its exact torch.compile call, the artifact, the versions it is valid for, and a README.")
    ex.add_argument("paths", nargs="+", metavar="RESULTS", help="results .parquet files or directories "
                    "(with the megacache/ folder the sweep wrote beside them)")
    ex.add_argument("--model", required=True, help="model name as in the results")
    ex.add_argument("-o", "--output", required=True, type=Path, metavar="DIR", help="directory to write")
    ex.add_argument("--phase", choices=get_args(Phase))
    ex.add_argument("--precision", choices=get_args(Precision))
    ex.add_argument("--device", dest="device_name", metavar="NAME")
    ex.add_argument("--accelerator-type", metavar="NAME", help="only this GPU type (axes.accelerator_type)")
    ex.add_argument("--seq-len", type=int)
    ex.add_argument("--workload")
    ex.add_argument("--batch-size", type=int)
    ex.add_argument("--max-memory-gib", type=float)
    ex.add_argument("--max-compile-s", type=float)
    ex.add_argument("--iterations", type=int)
    ex.add_argument("--trial", metavar="TRIAL_ID", help="export this compiled trial of the model instead of the "
                    "recommended setting")
    ex.add_argument("--warm-start", action="store_true", help="rank with each setting's warm start from its "
                    "artifact instead of its cold compile (the deployment ships the artifact)")
    ex.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    try:
        limits = check_limits(args.max_memory_gib, args.max_compile_s, args.iterations, args.batch_size,
                              args.warm_start)
        done = export(args.paths, args.model, args.output, limits, args.trial, phase=args.phase,
                      precision=args.precision,
                      device_name=args.device_name, seq_len=args.seq_len, workload=args.workload,
                      accelerator_type=args.accelerator_type)
    except (ExportError, RecommendError, ResultsError, OSError) as e:
        print(f"sweeper: error: {' '.join(str(e).split())}", file=sys.stderr)
        return USAGE_ERROR
    print(describe(done))
    return 0
