"""Tables of the decisive-numbers study from its committed rows:

    python -m studies.decisive.tables [DIR [ARM ...]]   (DIR: studies/decisive/results; ARMs: ungated gated)

Per arm of the study (ungated: the witness classifies windows; gated: each round also waits for
the host's fast state), the repeats of each setting side by side: headline speedup and its
reported interval, the in-trial eager step, whether each repeat's headline lies inside every
other repeat's interval, and the sweep's verdicts (drift past each row's limit, and of those the
rows whose speedup is not established: `drift_blocks`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from sweeper.analysis.frames import prepare
from sweeper.analysis.ranking import DRIFT_LIMIT_PCT
from sweeper.results.store import read_results


def repeats(arm: Path) -> pd.DataFrame:
    frames = []
    for rep in sorted(p for p in arm.iterdir() if p.is_dir()):
        df = prepare(read_results([rep]))
        frames.append(df.assign(rep=rep.name))
    return pd.concat(frames, ignore_index=True)


def table(df: pd.DataFrame) -> str:
    compiled = df[df["mode"] != "eager"].copy()
    lines = ["| model | mode | repeat | speedup | reported interval | half-width | eager ms/step | host state "
             "(slow windows, wait) | inside the others' intervals | drift vs reference |", "|" + "---|" * 10]
    for (model, mode), g in compiled.groupby(["model", "mode"]):
        for _, r in g.sort_values("rep").iterrows():
            others = g[g["rep"] != r["rep"]]
            s = r["speedup_vs_eager"]
            inside = (others["speedup_low"] <= s) & (s <= others["speedup_high"])
            half = 50 * (r["speedup_high"] - r["speedup_low"]) / r["speedup_vs_eager"]
            eager_ms = 1e3 * r["batch_size"] / r["eager_throughput_items_s"]
            wait = r.get("host_wait_s")
            waited = f", {wait:.1f} s)" if pd.notna(wait) else ")"
            state = f"{r['host_state']} ({r['slow_windows_pct']:.0f}%{waited}"
            lines.append(f"| {model} | {mode} | {r['rep']} | {r['speedup_vs_eager']:.2f}x | "
                         f"{r['speedup_low']:.2f}-{r['speedup_high']:.2f}x | +-{half:.1f}% | {eager_ms:.2f} | "
                         f"{state} | "
                         f"{int(inside.sum())} of {len(others)} | {r['baseline_drift_pct']:+.1f}% |")
    limit = compiled.get("drift_limit_pct", DRIFT_LIMIT_PCT)
    off = compiled["baseline_drift_pct"].abs() > limit
    blocks = off & compiled["drift_blocks"].fillna(True).astype(bool)
    lines.append(f"\nDrift past each row's limit (at least {DRIFT_LIMIT_PCT:g}%): {int(off.sum())} of {len(compiled)} "
                 f"compiled rows; not established (a cause that biases the in-trial ratio): {int(blocks.sum())}; "
                 f"between processes at one host speed (interval spans both speedups): {int((off & ~blocks).sum())}.")
    return "\n".join(lines)


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "studies/decisive/results")
    for arm in sys.argv[2:] or ("ungated", "gated"):
        print(f"## {arm}\n\n{table(repeats(root / arm))}\n")


if __name__ == "__main__":
    main()
