"""`sweeper.sweep`: run a sweep from a spec file, a dict or a SweepSpec, and get its Results.

The CLI's `sweeper run` is this call with its flags. Progress lines go to the `sweeper` logger as
the CLI prints them (to stderr, when nothing else configured logging); the closing table, the
baseline check and the failures are printed as the CLI prints them. Every one-line error is a
sweeper.SweeperError with the CLI's message.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeper import SweeperError
from sweeper.api.models import carry_callables
from sweeper.api.results import Results
from sweeper.api.summary import baseline_check, failure_lines, host_build_lines, summary_table
from sweeper.run import rescue, space
from sweeper.run.options import TUNE_LOGS
from sweeper.run.state import SweepError, SweepState
from sweeper.spec.sweep_spec import SpecError, SweepSpec, load_spec, parse_spec
from sweeper.spec.trials import Dropped, Trial, expand

log = logging.getLogger("sweeper")
LOG_FORMAT, LOG_DATE = "%(asctime)s %(message)s", "%H:%M:%S"


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a sweep: what is saved, and where."""

    def __init__(self, saved: int, total: int, results_path: Path):
        super().__init__(f"interrupted; {saved} of {total} trials are saved in {results_path}")
        self.saved, self.total, self.results_path = saved, total, results_path


class SweepUnwritable(SweeperError):
    """A write into the results directory failed (a full disk): the sweep stopped as on Ctrl-C and
    every measured row was kept (written again, or into the fallback directory the message names)."""

    def __init__(self, message: str, results_dir: Path):
        super().__init__(message)
        self.results_dir = results_dir


def unwritable_summary(state: SweepState, total: int, error: OSError) -> str:
    """Write the refused rows again, else into the fallback directory; say what went where."""
    log.debug("the write that failed", exc_info=error)  # the traceback, with -v only
    refused = len(state.unwritten)
    written, fallback = state.save_unwritten()
    where = f" ({error.filename})" if error.filename else ""
    elsewhere = refused - written if fallback is not None else 0
    saved = f"{len(state.rows) - elsewhere - len(state.unwritten)} of {total} trials are saved in {state.results_path}"
    if elsewhere:
        saved += f" and {elsewhere} more in {fallback} (--resume takes them back)"
    if state.unwritten:
        saved += f"; {len(state.unwritten)} measured rows could be written nowhere (see above)"
    return f"cannot write into {state.dir}: {error.strerror or error}{where}; {saved}"


@dataclass(frozen=True)
class RunOptions:
    """How a sweep runs, beside its spec: the CLI's flags of `sweeper run`."""

    address: str | None = None
    results: str | Path | None = None
    resume: bool = False
    retry_failed: bool = False
    storage: str | None = None
    callbacks: tuple[str, ...] = ()
    tune_logs: tuple[str, ...] = TUNE_LOGS
    report: bool = True
    no_wait: bool = False
    """Trials of an accelerator_type the cluster lacks end at once as `unplaced` rows instead of waiting."""


def to_spec(spec: SweepSpec | dict[str, Any] | str | Path) -> tuple[SweepSpec, str]:
    """The spec and how to name it in messages: a YAML file, a dict (models may be callables), a SweepSpec."""
    if isinstance(spec, SweepSpec):
        return spec, spec.name
    if isinstance(spec, dict):
        return parse_spec(carry_callables(spec), source="spec"), "spec"
    if isinstance(spec, (str, Path)):
        return load_spec(spec), str(spec)
    raise SpecError(f"sweeper.sweep: a spec is a YAML path, a dict or a SweepSpec, not {type(spec).__name__}")


def sweep(spec: SweepSpec | dict[str, Any] | str | Path, address: str | None = None,
          results: str | Path | None = None, **options: Any) -> Results:
    """Run the sweep `spec` on Ray (`address` as `sweeper run --address`: default RAY_ADDRESS, else a
    `ray start` cluster here, else a new local Ray) into `results` (default: the spec's results_dir,
    else results/NAME). `options`: resume, retry_failed, storage, callbacks, tune_logs, report (see
    RunOptions). Returns the sweep's Results; `missing` lists trials left without a row."""
    with _progress_to_stderr():
        return run(spec, RunOptions(address=address, results=results, **options))


def run(spec: SweepSpec | dict[str, Any] | str | Path, opts: RunOptions) -> Results:
    """The sweep, as `sweeper run` runs it (SweepInterrupted when stopped: finished rows are saved)."""
    parsed, source = to_spec(spec)
    trials, dropped = expand_trials(parsed, source)
    results_dir = Path(opts.results or parsed.results_dir or f"results/{parsed.name}")
    state = SweepState.open(parsed, results_dir, resume=opts.resume or opts.retry_failed)
    check_writable(results_dir)
    state.claim()  # a directory another live sweep writes is refused here, before Ray starts
    try:
        missing = _run_claimed(opts, state, trials, dropped)
        return _finish(opts, state, trials, missing)
    finally:
        state.close()  # compacts the rows into results.parquet, gives the directory up


def expand_trials(spec: SweepSpec, source: str) -> tuple[list[Trial], list[Dropped]]:
    """The spec's trials; a spec whose every combination is dropped is a mistake, not a sweep."""
    trials, dropped = expand(spec)
    if not trials:
        reasons = list(dict.fromkeys(d.reason for d in dropped))
        more = f" (and {len(reasons) - 3} more reasons)" if len(reasons) > 3 else ""
        raise SpecError(f"{source}: no trials to run: each of the {len(dropped)} combinations was dropped: "
                        f"{'; '.join(reasons[:3])}{more}")
    return trials, dropped


def _run_claimed(opts: RunOptions, state: SweepState, trials: list[Trial], dropped: list[Dropped]) -> list[str]:
    todo = state.pending(trials, retry_failed=opts.retry_failed)
    for d in dropped:
        log.info("dropped %s: %s", d.config, d.reason)
    from sweeper.run import ray_tune as runner  # Ray is imported only when a sweep really runs

    runner.check_options(opts.storage, list(opts.callbacks))
    t0 = time.monotonic()
    try:
        runner.connect(opts.address)
        device = runner.resolve_device(state.spec)
        log.info("sweep %s: %d trials (%d already done) on %s -> %s", state.sweep_id, len(trials),
                 len(trials) - len(todo), device, state.results_path)
        space.warn_if_short(state.dir, todo, opts.tune_logs, opts.storage)
        state.save_manifest()
        missing = runner.run_sweep(state, todo, device, storage=opts.storage, callbacks=list(opts.callbacks),
                                   tune_logs=opts.tune_logs, no_wait=opts.no_wait) if todo else []
        for _ in range(slow_reruns(state.spec, device)):
            again = state.slow_headlines(todo, slow_reruns(state.spec, device))
            if not again:
                break
            log.info("timing %d compiled trials again, after the others: their headline ran at the host's slow "
                     "CPU state (resources.slow_reruns)", len(again))
            missing += runner.run_sweep(state, again, device, storage=opts.storage, callbacks=list(opts.callbacks),
                                        tune_logs=opts.tune_logs, no_wait=opts.no_wait)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (the runner turns it into the same)
        raise SweepInterrupted(len(state.rows), len(trials), state.results_path) from None
    except rescue.ResultsUnwritable as e:  # a row's write failed: stop as Ctrl-C does
        raise SweepUnwritable(unwritable_summary(state, len(trials), e.error), state.dir) from None
    except Exception as e:  # Tune's own records failing on the same file system arrive wrapped
        error = rescue.unwritable(e, state.dir)
        if error is None:
            raise
        raise SweepUnwritable(unwritable_summary(state, len(trials), error), state.dir) from None
    log.info("sweep %s: %d rows in %.0f s -> %s", state.sweep_id, len(state.rows), time.monotonic() - t0,
             state.results_path)
    return missing


def slow_reruns(spec: SweepSpec, device: str) -> int:
    """How many times a trial whose headline ran at the host's slow state is timed again
    (resources.slow_reruns, or its default for `device`); none in a search."""
    if spec.search.algorithm != "grid":
        return 0
    value = spec.resources.slow_reruns
    return value if value is not None else (1 if device == "cuda" else 0)


def _finish(opts: RunOptions, state: SweepState, trials: list[Trial], missing: list[str]) -> Results:
    """Print the table, the self-check and every failure's first line; write the report."""
    print(summary_table(state.rows) if state.rows else "no rows")
    res = Results(_frame(state), [str(state.results_path)], missing)
    if state.rows:
        print(baseline_check(res.df))
    failures = failure_lines(state.rows, {t.trial_id: t.label for t in trials}) + host_build_lines(state.rows)
    if failures:
        print("\n".join(failures))
    if opts.report and state.rows:
        path = res.report(state.dir / "report.html", title=f"sweeper: {state.spec.name}")
        print(f"report: {path}")
    return res


def check_writable(results_dir: Path) -> None:
    """Refuse, before Ray starts, a results directory that cannot be created or written."""
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=results_dir, prefix=".write-check-"):
            pass
    except OSError as e:
        raise SweepError(f"{results_dir}: cannot write results there ({e.strerror or e}); "
                         "choose another --results directory") from None


def _frame(state: SweepState) -> Any:
    from sweeper.results.store import read_results

    return read_results([state.results_path])


@contextlib.contextmanager
def _progress_to_stderr() -> Iterator[None]:
    """The CLI's progress lines on stderr, unless the caller configured logging itself."""
    if logging.getLogger().handlers or log.handlers:
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT, LOG_DATE))
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
