"""Build the HTML report over many synthetic trials; print build seconds and file size.

Target: 10,000 trials in under 10 s and under 15 MB. Usage:
    python -m benchmarks.report_scale [--trials 10000] [--out /tmp/report_scale.html]
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

from sweeper.report.page import write_report
from sweeper.results import synthetic

log = logging.getLogger("report_scale")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10_000)
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "report_scale.html")
    ap.add_argument("--compare", action="store_true", help="also build the comparison section")
    args = ap.parse_args(argv)
    df = synthetic.make_frame(args.trials, seed=0)
    base = synthetic.make_frame(args.trials, seed=1) if args.compare else None
    t0 = time.perf_counter()
    path = write_report(df, args.out, title=f"scale test: {args.trials:,} synthetic trials", compare_df=base)
    build_s = time.perf_counter() - t0
    size_mb = path.stat().st_size / 1e6
    print(f"trials: {args.trials}  build: {build_s:.2f} s  size: {size_mb:.2f} MB  -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
