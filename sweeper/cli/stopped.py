"""How `sweeper run` ends early: the one line after Ctrl-C or SIGTERM, or after a write into the
results directory failed (a full disk), each with the command that finishes the sweep."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from sweeper.run.options import TUNE_LOGS

EXIT_INTERRUPTED = 130
EXIT_UNWRITABLE = 3
"""The results directory took no more rows (full, read-only, gone); every measured row was kept."""
EXIT_UNPLACED = 4
"""`--no-wait`: some trials asked for an accelerator_type the cluster lacks and were recorded `unplaced`."""


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
