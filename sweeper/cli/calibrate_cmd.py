"""`sweeper calibrate`: measure this host's CPU-speed states and run-to-run floors into a host
profile that `report` and `recommend` take with `--host-profile`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _fail(message: str) -> int:
    print(f"sweeper: error: {message}", file=sys.stderr)
    return 2


def register(subparsers: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    cal = subparsers.add_parser("calibrate", parents=parents,
                                help="measure this host's speed states and run-to-run floors (a host profile)")
    cal.add_argument("-o", "--output", type=Path, default=Path("host_profile.json"), help="profile to write")
    cal.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    cal.add_argument("--seconds", type=float, default=30.0, help="how long to read the witness (default: 30)")
    cal.add_argument("--processes", type=int, default=4, help="fresh processes timing the step (default: 4)")
    cal.add_argument("--windows", type=int, default=20, help="timed windows per process (default: 20)")
    cal.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace) -> int:
    if args.seconds <= 0 or args.processes < 2 or args.windows < 5:
        return _fail("calibrate needs --seconds > 0, --processes >= 2 and --windows >= 5")
    import torch

    from sweeper.measure.host_profile import measure_host, write_profile

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        return _fail("--device cuda: no CUDA device is visible")
    p = measure_host(device, args.seconds, args.processes, args.windows)
    write_profile(p, args.output)
    slow = f"{p['witness_slow_ms']:.2f} ms" if p["witness_slow_ms"] else "never seen"
    print(f"host {p['hostname']} ({p['device']}): witness {p['witness_fast_ms']:.2f} ms fast, slow state {slow} "
          f"({p['slow_readings_pct']:.0f}% of {p['readings']} readings); run-to-run floor "
          f"+-{100 * p['run_to_run_floor']:.0f}%, unstable baseline +-{100 * p['unstable_baseline_floor']:.0f}%")
    print(f"profile: {args.output} (sweeper report/recommend ... --host-profile {args.output})")
    return 0
