"""Command line: sweeper run / validate / models / report / recommend."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from sweeper import SweeperError, __version__, zoo
from sweeper.api import run as api_run
from sweeper.api.run import RunOptions, SweepInterrupted, SweepUnwritable, expand_trials
from sweeper.cli import stopped
from sweeper.results.schema import UNPLACED
from sweeper.run.options import TUNE_LOGS, tune_logs
from sweeper.run.state import SweepError
from sweeper.spec.options import options_check_note
from sweeper.spec.sweep_spec import load_spec

log = logging.getLogger("sweeper")

USER_ERRORS = (SweeperError,)
"""Every one-line error (spec, results directory, results files, recommend, export): exit code 2."""


def _cmd_validate(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    trials, dropped = expand_trials(spec, args.spec)
    print(f"{args.spec}: valid; {len(trials)} trials over {len(spec.models)} models")
    note = options_check_note(spec.axes.options is not None)
    if note:
        print(f"  note: {note}")
    for d in dropped:
        print(f"  dropped {d.config}: {d.reason}")
    if args.address:
        from sweeper.run import ray_tune as runner  # Ray only when asked about a cluster

        print("\n".join(runner.placement_lines(args.address, trials)))
    return 0


MODEL_NAMING = """
Any other model, by name (random weights, nothing downloaded):
  timm:NAME           a timm architecture, e.g. timm:convnext_tiny (needs timm; kwargs: timm.create_model's)
  hf:MODEL_TYPE       a transformers architecture with a task: {tasks}
                      e.g. name: hf:llama, task: causal-lm, kwargs: {{num_hidden_layers: 2, hidden_size: 64}}
  factory: pkg.mod:fn your own function or nn.Module class (with an `input` section for a plain module)
  sweeper.sweep(...)  in Python, a model's factory may be the function or class itself (docs/models.md)"""


def _cmd_models(args: argparse.Namespace) -> int:
    for name in zoo.names():
        e = zoo.REGISTRY[name]
        print(f"{name:20s} {e.task:7s} {e.description}")
    print(MODEL_NAMING.format(tasks=", ".join(zoo.HF_TASKS)))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    """`sweeper run`: the API's sweep with the command's flags; exit 1 when a trial was left
    without a row or no trial of the sweep succeeded, 4 when trials were left unplaced (--no-wait),
    130 when interrupted."""
    opts = RunOptions(address=args.address, results=args.results, resume=args.resume, retry_failed=args.retry_failed,
                      storage=args.storage, callbacks=tuple(args.callback), tune_logs=args.tune_logs,
                      report=not args.no_report, no_wait=args.no_wait)
    try:
        res = api_run.run(args.spec, opts)
    except SweepInterrupted as stop:
        print(f"sweeper: {stop}; to finish the sweep: {stopped.resume_command(args, stop.results_path.parent)}",
              file=sys.stderr)
        return stopped.EXIT_INTERRUPTED
    except SweepUnwritable as stop:
        print(f"sweeper: stopped: {stop}; free space there, then finish the sweep: "
              f"{stopped.resume_command(args, stop.results_dir)}", file=sys.stderr)
        return stopped.EXIT_UNWRITABLE
    unplaced = int(res.df["status"].eq(UNPLACED).sum()) if len(res) else 0
    if unplaced:
        finish = stopped.resume_command(args, Path(res.paths[0]).parent)
        print(f"sweeper: {unplaced} trials unplaced: the cluster has no node of their accelerator_type; "
              f"add one, then finish the sweep: {finish}", file=sys.stderr)
        return stopped.EXIT_UNPLACED
    if len(res) and not res.df["status"].eq("ok").any():
        print(f"sweeper: every trial failed ({len(res)}); the errors are above", file=sys.stderr)
        return 1
    return 1 if res.missing else 0


def _tune_logs(value: str) -> tuple[str, ...]:
    try:
        return tune_logs(value)
    except SweepError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--tune-logs ")) from None


def _add_run(sub: argparse._SubParsersAction, common: list[argparse.ArgumentParser]) -> None:
    run = sub.add_parser("run", help="run a sweep (local Ray, or a cluster with --address)", parents=common)
    run.add_argument("spec", help="sweep spec (YAML)")
    run.add_argument("--results", help="results directory (default: the spec's results_dir or results/NAME)")
    run.add_argument("--address", help="Ray to use: HOST:PORT, ray://HOST:10001, auto, or local (a new private "
                     "Ray); default: RAY_ADDRESS, else a `ray start` cluster on this machine, else a new local Ray")
    run.add_argument("--storage", help="where Tune keeps its logs and state: a directory or a URI such as "
                     "s3://bucket/path (default: RESULTS/tune); the rows stay in RESULTS/results.parquet")
    run.add_argument("--callback", action="append", choices=["wandb", "mlflow"], default=[],
                     help="also log every trial to W&B or MLflow (needs that package); repeatable")
    run.add_argument("--tune-logs", type=_tune_logs, default=TUNE_LOGS, metavar="LIST",
                     help="Tune's own per-trial records under RESULTS/tune (or --storage): all (default: "
                     "json,csv,tensorboard), none, or a comma-separated list; each costs the driver per trial "
                     "(a sweep of thousands of short trials runs faster with none; the rows hold everything)")
    run.add_argument("--resume", action="store_true", help="finish the sweep in --results: run missing trials only")
    run.add_argument("--retry-failed", action="store_true", help="like --resume, and rerun crashed/timeout trials")
    run.add_argument("--no-report", action="store_true", help="do not write report.html at the end")
    run.add_argument("--no-wait", action="store_true", help="trials of an accelerator_type the cluster lacks end "
                     "at once as `unplaced` rows (exit 4) instead of waiting for a node of it")
    run.set_defaults(func=_cmd_run)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="sweeper", description="Should I torch.compile this model, and how?",
                                 parents=[_global_flags(argparse.SUPPRESS)])
    ap.add_argument("--version", action="version", version=f"sweeper {__version__}")
    ap.set_defaults(verbose=False)
    common = [_global_flags(argparse.SUPPRESS)]  # also after the subcommand: `sweeper validate SPEC -v`
    sub = ap.add_subparsers(dest="command", required=True)

    _add_run(sub, common)

    val = sub.add_parser("validate", help="check a spec and count its trials; starts nothing", parents=common)
    val.add_argument("spec")
    val.add_argument("--address", help="also ask this running Ray cluster (as `sweeper run --address`) which "
                     "accelerator types it has and how many trials each gets")
    val.set_defaults(func=_cmd_validate)

    models = sub.add_parser("models", help="list the model zoo", parents=common)
    models.set_defaults(func=_cmd_models)

    from sweeper.cli import results_cmds as report_cmds

    report_cmds.register(sub, common)
    from sweeper.cli import export_cmd

    export_cmd.register(sub, common)

    from sweeper.cli import trace_cmd

    trace_cmd.register(sub, common)
    from sweeper.cli import calibrate_cmd, compare_cmd

    compare_cmd.register(sub, common)

    calibrate_cmd.register(sub, common)
    from sweeper.cli import knobs_cmd

    knobs_cmd.register(sub, common)
    return ap


def _global_flags(default: object) -> argparse.ArgumentParser:
    """Flags every command takes, before or after the subcommand name."""
    flags = argparse.ArgumentParser(add_help=False)
    flags.add_argument("-v", "--verbose", action="store_true", default=default, help="debug logging")
    return flags


def _import_from_working_directory() -> None:
    """A spec's `module:factory` imports from the working directory whichever way sweeper was
    started: `python -m sweeper` puts it first on the import path, the installed `sweeper`
    script puts its own bin directory there instead."""
    cwd = os.getcwd()
    if not any(Path(p or ".").resolve() == Path(cwd).resolve() for p in sys.path):
        sys.path.insert(0, cwd)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _import_from_working_directory()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(message)s",
                        datefmt="%H:%M:%S")
    log.setLevel(logging.DEBUG if args.verbose else logging.INFO)
    try:
        return args.func(args)
    except USER_ERRORS as e:
        print(f"sweeper: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("sweeper: interrupted; finished trials are saved (use --resume to finish)", file=sys.stderr)
        return stopped.EXIT_INTERRUPTED
