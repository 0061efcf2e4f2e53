"""How `sweeper run` ends early: the one line after Ctrl-C or SIGTERM, or after a write into the
results directory failed (a full disk), each with the command that finishes the sweep."""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from pathlib import Path

from sweeper.run.options import TUNE_LOGS
from sweeper.run.state import SweepState

log = logging.getLogger("sweeper")
EXIT_INTERRUPTED = 130
EXIT_UNWRITABLE = 3
"""The results directory took no more rows (full, read-only, gone); every measured row was kept."""


def resume_command(args: argparse.Namespace, results_dir: Path) -> str:
    """The command that finishes this sweep: the same spec, results and options, with --resume."""
    prog = ["python", "-m", "sweeper"] if Path(sys.argv[0]).name == "__main__.py" else ["sweeper"]
    words = [*prog, "run", args.spec, "--results", str(results_dir), "--resume"]
    for flag, value in (("--address", args.address), ("--storage", args.storage)):
        words += [flag, value] if value else []
    for name in args.callback:
        words += ["--callback", name]
    if args.tune_logs != TUNE_LOGS:
        words += ["--tune-logs", ",".join(args.tune_logs) or "none"]
    words += ["--no-report"] if args.no_report else []
    return shlex.join(words)


def interrupted(args: argparse.Namespace, state: SweepState, total: int) -> int:
    print(f"sweeper: interrupted; {len(state.rows)} of {total} trials are saved in {state.results_path}; "
          f"to finish the sweep: {resume_command(args, state.dir)}", file=sys.stderr)
    return EXIT_INTERRUPTED


def unwritable(args: argparse.Namespace, state: SweepState, total: int, error: OSError) -> int:
    """Write the refused rows again, else into the fallback directory, and say so in one line."""
    log.debug("the write that failed", exc_info=error)  # the traceback, with -v only
    refused = len(state.unwritten)
    written, fallback = state.save_unwritten()
    what = error.strerror or str(error)
    where = f" ({error.filename})" if error.filename else ""
    elsewhere = refused - written if fallback is not None else 0
    saved = f"{len(state.rows) - elsewhere - len(state.unwritten)} of {total} trials are saved in {state.results_path}"
    if elsewhere:
        saved += f" and {elsewhere} more in {fallback} (--resume takes them back)"
    if state.unwritten:
        saved += f"; {len(state.unwritten)} measured rows could be written nowhere (see above)"
    print(f"sweeper: stopped: cannot write into {state.dir}: {what}{where}; {saved}; free space there, then finish "
          f"the sweep: {resume_command(args, state.dir)}", file=sys.stderr)
    return EXIT_UNWRITABLE

