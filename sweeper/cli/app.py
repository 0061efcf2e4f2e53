"""Command line: sweeper run / validate / models / report / recommend."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

from sweeper import __version__, zoo
from sweeper.results.schema import ResultsError
from sweeper.spec.schema import SpecError, SweepSpec, load_spec
from sweeper.cli import stopped
from sweeper.run import rescue, space
from sweeper.run.options import TUNE_LOGS, tune_logs
from sweeper.run.state import SweepError, SweepState
from sweeper.spec.trials import Dropped, Trial, expand

log = logging.getLogger("sweeper")
USER_ERRORS = (SpecError, SweepError, ResultsError)

SUMMARY_COLUMNS = {
    "model": "model", "mode": "mode", "dynamic": "dynamic", "batch_size": "bs", "seq_len": "seq",
    "phase": "phase", "precision": "prec", "status": "status", "compile_s": "compile_s",
    "throughput_items_s": "items/s", "speedup_vs_eager": "speedup", "peak_mem_gib": "peak_GiB",
}
STREAM_COLUMNS = {"workload": "workload", "bucketing": "bucketing", "mark_dynamic": "mark_dyn",
                  "stream_s": "stream_s", "real_tokens_per_s": "real_tok/s", "fell_back_to_eager": "fell_back"}


def _expand(spec: SweepSpec, source: str) -> tuple[list[Trial], list[Dropped]]:
    """The spec's trials; a spec whose every combination is dropped is a mistake, not a sweep."""
    trials, dropped = expand(spec)
    if not trials:
        reasons = list(dict.fromkeys(d.reason for d in dropped))
        more = f" (and {len(reasons) - 3} more reasons)" if len(reasons) > 3 else ""
        raise SpecError(f"{source}: no trials to run: each of the {len(dropped)} combinations was dropped: "
                        f"{'; '.join(reasons[:3])}{more}")
    return trials, dropped


def _cmd_validate(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    trials, dropped = _expand(spec, args.spec)
    print(f"{args.spec}: valid; {len(trials)} trials over {len(spec.models)} models")
    for d in dropped:
        print(f"  dropped {d.config}: {d.reason}")
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    for name in zoo.names():
        e = zoo.REGISTRY[name]
        print(f"{name:20s} {e.task:7s} {e.description}")
    return 0


def summary_table(rows: list[dict]) -> str:
    import pandas as pd

    columns = dict(SUMMARY_COLUMNS)
    if any(r.get("workload") for r in rows):  # stream trials differ by workload and bucketing
        columns = {**{k: v for k, v in columns.items() if k != "seq_len"}, **STREAM_COLUMNS}
    df = pd.DataFrame(rows).reindex(columns=list(columns)).rename(columns=columns)
    df = df.sort_values(["model", "phase", "prec", "bs", "mode"], kind="stable")
    return df.to_string(index=False, float_format=lambda x: f"{x:.3g}", na_rep="-")


def _cmd_run(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    trials, dropped = _expand(spec, args.spec)
    results_dir = Path(args.results or spec.results_dir or f"results/{spec.name}")
    state = SweepState.open(spec, results_dir, resume=args.resume or args.retry_failed)
    _check_writable(results_dir)
    state.claim()  # a directory another live sweep writes is refused here, before Ray starts
    try:
        return _run_claimed(args, spec, state, trials, dropped)
    finally:
        state.close()  # compacts the rows into results.parquet, gives the directory up


def _run_claimed(args: argparse.Namespace, spec: SweepSpec, state: SweepState, trials: list[Trial],
                 dropped: list[Dropped]) -> int:
    results_dir = state.dir
    todo = state.pending(trials, retry_failed=args.retry_failed)
    for d in dropped:
        log.info("dropped %s: %s", d.config, d.reason)
    from sweeper.run import ray_tune as runner  # Ray is imported only when a sweep really runs

    runner.check_options(args.storage, args.callback)
    t0 = time.monotonic()
    try:
        runner.connect(args.address)
        device = runner.resolve_device(spec)
        log.info("sweep %s: %d trials (%d already done) on %s -> %s", state.sweep_id, len(trials),
                 len(trials) - len(todo), device, state.results_path)
        space.warn_if_short(state.dir, todo, args.tune_logs, args.storage)
        state.save_manifest()
        missing = runner.run_sweep(state, todo, device, storage=args.storage, callbacks=args.callback,
                                   tune_logs=args.tune_logs) if todo else []
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (the runner turns it into the same)
        return stopped.interrupted(args, state, len(trials))
    except rescue.ResultsUnwritable as e:  # a row's write failed: stop as Ctrl-C does
        return stopped.unwritable(args, state, len(trials), e.error)
    except Exception as e:  # Tune's own records failing on the same file system arrive wrapped
        error = rescue.unwritable(e, results_dir)
        if error is None:
            raise
        return stopped.unwritable(args, state, len(trials), error)
    return _finish(args, state, trials, missing, time.monotonic() - t0)


def _finish(args: argparse.Namespace, state: SweepState, trials: list[Trial], missing: list[str],
            took_s: float) -> int:
    """The table, the self-check, every failure's first line and the report; exit 1 when a trial
    was left without a row or no trial of the sweep succeeded."""
    print(summary_table(state.rows) if state.rows else "no rows")
    if state.rows:
        print(baseline_check(_frame(state)))
    failures = failure_lines(state.rows, {t.trial_id: t.label for t in trials})
    if failures:
        print("\n".join(failures))
    log.info("sweep %s: %d rows in %.0f s -> %s", state.sweep_id, len(state.rows), took_s, state.results_path)
    if not args.no_report and state.rows:
        from sweeper.report.page import write_report

        from sweeper.results import traces

        out = state.dir / "report.html"
        path = write_report(_frame(state), out, title=f"sweeper: {state.spec.name}",
                            traces=traces.links([state.results_path], out))
        print(f"report: {path}")
    if state.rows and all(r["status"] != "ok" for r in state.rows):
        print(f"sweeper: every trial failed ({len(state.rows)}); the errors are above", file=sys.stderr)
        return 1
    return 1 if missing else 0


def failure_lines(rows: list[dict], labels: dict[str, str]) -> list[str]:
    """One line per failed trial: its setting, status and the first line of its error."""
    failed = [r for r in rows if r["status"] != "ok"]
    lines = [f"failed trials: {len(failed)} of {len(rows)}"] if failed else []
    for r in failed:
        first = next((line.strip() for line in str(r.get("error") or "").splitlines() if line.strip()), "")
        label = labels.get(r["trial_id"], r["trial_id"])
        lines.append(f"  {label}: {r['status'].upper()}{': ' + first[:300] if first else ''}")
    return lines


def baseline_check(df) -> str:
    """The sweep's self-check, one line (and one per drifted row): every compiled row's in-trial
    eager baseline against the sweep's eager trial of the same context."""
    from sweeper.analysis.frames import prepare, setting_label
    from sweeper.analysis.ranking import DRIFT_LIMIT_PCT

    data = prepare(df)
    drift = data["baseline_drift_pct"]
    checked, off = drift.notna(), drift.abs() > DRIFT_LIMIT_PCT
    lines = [f"baseline check: {int(checked.sum())} compiled rows matched to an eager trial, {int(off.sum())} "
             f"drift more than {DRIFT_LIMIT_PCT:g}% (their speedup is not established)"]
    for _, r in data[off].iterrows():
        lines.append(f"  {r['model']} {setting_label(r)} {r['precision']}: in-trial eager "
                     f"{r['baseline_drift_pct']:+.1f}% vs the eager trial")
    return "\n".join(lines)


def _check_writable(results_dir: Path) -> None:
    """Refuse, before Ray starts, a results directory that cannot be created or written."""
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=results_dir, prefix=".write-check-"):
            pass
    except OSError as e:
        raise SweepError(f"{results_dir}: cannot write results there ({e.strerror or e}); "
                         "choose another --results directory") from None


def _frame(state: SweepState):
    from sweeper.results.store import read_results

    return read_results([state.results_path])


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
    val.set_defaults(func=_cmd_validate)

    models = sub.add_parser("models", help="list the model zoo", parents=common)
    models.set_defaults(func=_cmd_models)

    from sweeper.cli import results_cmds as report_cmds

    report_cmds.register(sub, common)
    from sweeper.cli import export_cmd

    export_cmd.register(sub, common)

    from sweeper.cli import trace_cmd

    trace_cmd.register(sub, common)
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
