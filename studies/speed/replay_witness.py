"""Replay a sweep's recorded host-speed readings through today's witness rules, trial by trial.

Each row keeps every timed window's witness reading (`windows_json`) and the reference its windows
were judged by (`witness_ref_ms`). In start order, each trial's readings give its own fast state
(sweeper.measure.witness.own_fast_ms); that state is recorded in a private host file at the trial's
start time, and the host's fast state is read back from it (witness.host_fast_ms: the median of the
latest processes within witness.HOST_MEMORY_S) as a later trial's gate would read it. The table puts
the share of windows read slow then (`slow_windows_pct`) beside the share today's rules read slow
on the same readings. A replay of judgements, not a new measurement: it says which windows the
rules would have counted, not how long the sweep would have taken.

`--matching` replays the pairing too (sweeper.measure.matching.Matched.of on each row's windows, at
the replayed reference): the state today's rules give each trial (fast, steady, slow), how many of
its windows they would have needed (`planned` while steady or with enough fast pairs among the first
`planned`) against how many it timed, and the headline speedup then and now, over the timed windows.

    python -m studies.speed.replay_witness studies/speed/results/one_gpu_h100/forkserver [--matching]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import pandas as pd

from sweeper.analysis.host_state import window_readings
from sweeper.measure import matching, witness
from sweeper.measure.timing import WindowStats


def replay(df: pd.DataFrame, planned: int | None = None) -> pd.DataFrame:
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
                        "slow_now_pct": 100.0 * sum(witness.is_slow(x, ref) for x in xs) / len(xs),
                        **_matching(row, ref, planned)})
    return pd.DataFrame(out)


def _arms(windows_json: str) -> list[WindowStats]:
    w = json.loads(windows_json)
    return [WindowStats(w[f"{p}s_per_iter"], w[f"{p}s_per_iter"], 1, w[f"{p}witness_ms"])
            for p in ("eager_", "compiled_") if w.get(f"{p}s_per_iter")]


def _matching(row: pd.Series, ref: float, planned: int | None) -> dict[str, object]:
    """Today's pairing of the row's timed windows at the replayed reference (None: not asked)."""
    if planned is None:
        return {}
    arms = _arms(row["windows_json"])
    planned = min(planned, len(arms[0].window_s))
    m, first = matching.Matched.of(arms, ref), matching.Matched.of([a.subset(list(range(planned))) for a in arms], ref)
    enough = first.steady or len(first.fast) >= planned
    speedup = (lambda x: matching.speedup(x.headline(0), x.headline(1))) if len(arms) == 2 else (lambda x: None)
    return {"state_now": m.state, "timed": len(arms[0].window_s), "needed_now": planned if enough else None,
            "speedup_then": row.get("speedup_vs_eager"), "speedup_now": speedup(m)}


def markdown(t: pd.DataFrame) -> str:
    lines = ["| trial (start order) | windows | reference then ms | slow then | reference now ms | slow now |",
             "|---|---|---|---|---|---|"]
    for r in t.itertuples():
        lines.append(f"| {r.model} {r.precision} {r.mode} | {r.windows} | {r.ref_then_ms:.3f} | {r.slow_then_pct:.0f}% "
                     f"| {r.ref_now_ms:.3f} | {r.slow_now_pct:.0f}% |")
    return "\n".join(lines)


def matching_markdown(t: pd.DataFrame) -> str:
    lines = ["| trial (start order) | state now | windows timed | needed now | speedup then | speedup now |",
             "|---|---|---|---|---|---|"]
    for r in t.itertuples():
        needed = "more" if pd.isna(r.needed_now) else f"{int(r.needed_now)}"
        then = "-" if pd.isna(r.speedup_then) else f"{r.speedup_then:.3f}x"
        now = "-" if r.speedup_now is None or pd.isna(r.speedup_now) else f"{r.speedup_now:.3f}x"
        lines.append(f"| {r.model} {r.precision} {r.mode} | {r.state_now} | {r.timed} | {needed} | {then} | {now} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, help="a sweep's results folder (results.parquet)")
    ap.add_argument("--matching", type=int, nargs="?", const=16, metavar="PLANNED",
                    help="replay the pairing too, with this many planned windows (default 16)")
    args = ap.parse_args()
    t = replay(pd.read_parquet(args.results / "results.parquet"), args.matching)
    print(markdown(t))
    if args.matching:
        print()
        print(matching_markdown(t))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
