"""Replay a sweep's recorded host-speed readings through today's witness rules, trial by trial.

Each row keeps every timed window's witness reading (`windows_json`) and the reference its windows
were judged by (`witness_ref_ms`). In start order, each trial's readings give its own fast state
(sweeper.measure.witness.own_fast_ms); that state is recorded in a private host file at the trial's
start time, and the host's fast state is read back from it (witness.host_fast_ms: the median of the
latest processes within witness.HOST_MEMORY_S) as a later trial's gate would read it. The table puts
the share of windows read slow then (`slow_windows_pct`) beside the share today's rules read slow
on the same readings. A replay of judgements, not a new measurement: it says which windows the
rules would have counted, not how long the sweep would have taken.

    python -m studies.speed.replay_witness studies/speed/results/one_gpu_h100/forkserver
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import pandas as pd

from sweeper.analysis.host_state import window_readings
from sweeper.measure import witness


def replay(df: pd.DataFrame) -> pd.DataFrame:
    df = df.sort_values("started_at")
    start = pd.Timestamp(df["started_at"].iloc[0]).timestamp()
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        host = Path(tmp) / "fast_ms"
        for pid, (_, row) in enumerate(df.iterrows(), start=1):
            xs = window_readings(row["windows_json"])
            if not xs:
                continue
            now = pd.Timestamp(row["started_at"]).timestamp() - start + 1e9  # a clock the file's window reads
            own = witness.own_fast_ms(xs)
            witness.record_host_fast_ms(own, host, pid=pid, now=now)
            ref = witness.host_fast_ms(host, now=now)
            out.append({"model": row["model"], "precision": row["precision"], "mode": row["mode"],
                        "windows": len(xs), "ref_then_ms": row.get("witness_ref_ms"),
                        "slow_then_pct": row.get("slow_windows_pct"), "ref_now_ms": ref,
                        "slow_now_pct": 100.0 * sum(witness.is_slow(x, ref) for x in xs) / len(xs)})
    return pd.DataFrame(out)


def markdown(t: pd.DataFrame) -> str:
    lines = ["| trial (start order) | windows | reference then ms | slow then | reference now ms | slow now |",
             "|---|---|---|---|---|---|"]
    for r in t.itertuples():
        lines.append(f"| {r.model} {r.precision} {r.mode} | {r.windows} | {r.ref_then_ms:.3f} | {r.slow_then_pct:.0f}% "
                     f"| {r.ref_now_ms:.3f} | {r.slow_now_pct:.0f}% |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, help="a sweep's results folder (results.parquet)")
    args = ap.parse_args()
    print(markdown(replay(pd.read_parquet(args.results / "results.parquet"))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
