"""`sweeper trace RESULTS TRIAL_ID -o DIR`: one traced trial's compile trace as tlparse's HTML."""

from __future__ import annotations

import argparse
import gzip
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from sweeper.results import traces
from sweeper.results.schema import ResultsError

TLPARSE_TIMEOUT_S = 600


def register(subparsers: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    trace = subparsers.add_parser("trace", parents=parents,
                                  help="a traced trial's compile trace as HTML (needs tlparse: pip install tlparse)")
    trace.add_argument("results", type=Path, help="the sweep's results directory (holds traces/)")
    trace.add_argument("trial_id", help="the trial's id (or a unique start of it)")
    trace.add_argument("-o", "--output", type=Path, default=Path("trace"), help="directory for the HTML "
                       "(default: %(default)s; replaced if it exists)")
    trace.set_defaults(func=cmd_trace)


def find_trace(results: Path, trial_id: str) -> Path:
    """The trace file of the trial whose id is or starts with `trial_id`; ResultsError otherwise."""
    kept = traces.beside([results / "results.parquet"])
    matches = [tid for tid in kept if tid.startswith(trial_id)] if trial_id else []
    if len(matches) == 1:
        return kept[matches[0]]
    if not kept:
        raise ResultsError(f"{results}: no compile traces here (a spec keeps them with measure.trace: true)")
    if not matches:
        raise ResultsError(f"{results}: no trace of trial {trial_id!r} ({len(kept)} traced trials: "
                           f"{', '.join(sorted(kept)[:5])}{', ...' if len(kept) > 5 else ''})")
    raise ResultsError(f"{trial_id!r} matches {len(matches)} traced trials; give more of the id")


def cmd_trace(args: argparse.Namespace) -> int:
    trace = find_trace(args.results, args.trial_id)
    # on PATH, or beside this Python (a virtual environment's scripts, run without activating it)
    tlparse = shutil.which("tlparse") or shutil.which("tlparse", path=str(Path(sys.executable).parent))
    if tlparse is None:
        raise ResultsError("sweeper trace needs tlparse (on PATH or beside this Python): pip install tlparse "
                           "(or sweeper's trace extra)")
    with tempfile.TemporaryDirectory(prefix="sweeper-trace-") as tmp:
        log = Path(tmp) / trace.name.removesuffix(".gz")
        log.write_bytes(gzip.decompress(trace.read_bytes()))
        done = subprocess.run([tlparse, str(log), "-o", str(args.output), "--overwrite", "--no-browser"],
                              capture_output=True, text=True, timeout=TLPARSE_TIMEOUT_S)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise ResultsError(f"tlparse failed on {trace} (exit {done.returncode}): {last}")
    print(f"trace: {args.output / 'index.html'}")
    return 0
