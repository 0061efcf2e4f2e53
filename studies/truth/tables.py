"""Tables of the measurement-truth study (studies/truth/), from its committed results.

    python -m studies.truth.tables studies/truth/results > table.md

Reads `at_once/`, `alone/`, `repeat2/`, `repeat3/`, `train/` (sweeper results directories),
`memory_fit/*.json` and `walls.txt` under the given directory, and prints markdown:
at-once vs alone speedups with their intervals, run-to-run repeats, the largest difference
between two runs of one setting (what the reported interval's floors are set from), training accuracy against
float64, the memory-fit check and the wall times.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from sweeper.analysis.drift import baseline_spread_pct
from sweeper.analysis.floors import RUN_TO_RUN_FLOOR, STABLE_SPREAD_PCT, UNSTABLE_BASELINE_FLOOR
from sweeper.analysis.frames import prepare
from sweeper.analysis.ranking import DRIFT_LIMIT_PCT
from sweeper.results.store import read_results

REPO = Path(__file__).resolve().parents[2]

KEY = ["model", "precision", "mode", "batch_size"]
AGREE_PCT = 3.0


def _load(root: Path, name: str) -> pd.DataFrame:
    path = root / name
    return prepare(read_results([path])) if path.exists() else pd.DataFrame()


def _ci(r: pd.Series, low: str = "speedup_low", high: str = "speedup_high") -> str:
    return f"{r['speedup_vs_eager']:.2f}x [{r[low]:.2f}, {r[high]:.2f}]"


def _inside(value: float, r: pd.Series, low: str = "speedup_low", high: str = "speedup_high") -> bool:
    return bool(r[low] <= value <= r[high])


def at_once_vs_alone(at_once: pd.DataFrame, alone: pd.DataFrame) -> list[str]:
    """Each at-once speedup with its in-trial interval and its reported interval (widened by the
    sweep's self-check); the alone speedup is the control."""
    both = at_once[~at_once["is_eager"]].merge(alone, on=KEY, suffixes=("", "_alone"))
    lines = ["| model | prec | mode | at once, in-trial interval | at once, reported interval | alone | alone inside: "
             "in-trial / reported | eager spread % (at once) | diff % | in-trial eager drift % (at once) | "
             "windows with a neighbour compiling % |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    counts = [0, 0]
    for _, r in both.sort_values(KEY).iterrows():
        alone_s = r["speedup_vs_eager_alone"]
        inside = [_inside(alone_s, r, "speedup_ci_low", "speedup_ci_high"), _inside(alone_s, r)]
        counts = [c + i for c, i in zip(counts, inside, strict=True)]
        diff = (r["speedup_vs_eager"] / alone_s - 1) * 100
        stable = r["eager_spread"] < STABLE_SPREAD_PCT
        agree = "" if not stable else (" (stable, agree)" if abs(diff) <= AGREE_PCT else " (stable, DISAGREE)")
        lines.append(f"| {r['model']} | {r['precision']} | {r['mode']} | {_ci(r, 'speedup_ci_low', 'speedup_ci_high')} "
                     f"| {_ci(r)} | {alone_s:.2f}x "
                     f"[{r['speedup_ci_low_alone']:.2f}, {r['speedup_ci_high_alone']:.2f}] | "
                     f"{'yes' if inside[0] else 'NO'} / {'yes' if inside[1] else 'NO'} | {r['eager_spread']:.1f} | "
                     f"{diff:+.1f}{agree} | {r['baseline_drift_pct']:+.1f} | {r['host_busy_windows_pct']:.0f} |")
    lines.append(f"\nAlone speedups inside the at-once interval: {counts[0]} of {len(both)} (in-trial), "
                 f"{counts[1]} of {len(both)} (reported).")
    return lines


def repeats(runs: dict[str, pd.DataFrame]) -> list[str]:
    names = list(runs)
    frames = [runs[n][~runs[n]["is_eager"]].set_index(KEY) for n in names]
    common = sorted(set.intersection(*(set(f.index) for f in frames)))
    lines = ["| model | prec | mode | " + " | ".join(names) + " | every repeat inside the others' reported intervals | "
             "reported interval width % (median) | spread of the repeats % | drifted (self-check) |",
             "|---|---|---|" + "---|" * len(names) + "---|---|---|---|"]
    for key in common:
        rs = [f.loc[key] for f in frames]
        inside = all(_inside(r["speedup_vs_eager"], o) for r in rs for o in rs if o is not r)
        widths = sorted((r["speedup_high"] - r["speedup_low"]) / r["speedup_vs_eager"] * 100 for r in rs)
        values = [r["speedup_vs_eager"] for r in rs]
        spread = (max(values) - min(values)) / sorted(values)[len(values) // 2] * 100
        drifted = [n for n, r in zip(names, rs, strict=True) if abs(r["baseline_drift_pct"]) > DRIFT_LIMIT_PCT]
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(_ci(r) for r in rs)
                     + f" | {'yes' if inside else 'NO'} | {widths[len(widths) // 2]:.1f} | {spread:.1f} | "
                     + f"{', '.join(drifted) or '-'} |")
    return lines


def run_to_run(runs: dict[str, pd.DataFrame]) -> list[str]:
    """Every ordered pair of runs of one compiled setting: how far the second's speedup lies from
    the first's, by whether the first's eager windows held still; the largest of each kind is
    what the reported interval's floors (sweeper/analysis/drift.py) must cover."""
    frames = {n: r[~r["is_eager"] & r["status"].eq("ok")].assign(spread=baseline_spread_pct)
              .set_index(KEY) for n, r in runs.items()}
    pairs = []
    for a, fa in frames.items():
        for b, fb in frames.items():
            for key in fa.index.intersection(fb.index) if a != b else []:
                ra, rb = fa.loc[key], fb.loc[key]
                pairs.append({"stable": ra["spread"] < STABLE_SPREAD_PCT, "key": key, "runs": f"{a} -> {b}",
                              "diff": abs(rb["speedup_vs_eager"] / ra["speedup_vs_eager"] - 1),
                              "inside": _inside(rb["speedup_vs_eager"], ra)})
    df = pd.DataFrame(pairs)
    lines = ["| first run's eager windows | pairs | largest difference | setting, runs | floor | second inside the "
             "first's reported interval |", "|---|---|---|---|---|---|"]
    for stable, floor in ((True, RUN_TO_RUN_FLOOR), (False, UNSTABLE_BASELINE_FLOOR)):
        g = df[df["stable"] == stable] if not df.empty else df
        if g.empty:
            continue
        top = g.loc[g["diff"].idxmax()]
        lines.append(f"| {'held still' if stable else 'spread'} | {len(g)} | {top['diff']:.1%} | "
                     f"{' '.join(map(str, top['key']))}, {top['runs']} | +-{floor:.0%} | "
                     f"{int(g['inside'].sum())} of {len(g)} |")
    return lines


def training(train: pd.DataFrame) -> list[str]:
    lines = ["| model | prec | mode | status | eager err vs fp64 | compiled err vs fp64 | allowed | "
             "compiled vs eager (old rule's number) | reference |", "|---|---|---|---|---|---|---|---|---|"]
    for _, r in train.sort_values(KEY).iterrows():
        if r["is_eager"]:
            continue
        lines.append(f"| {r['model']} | {r['precision']} | {r['mode']} | {r['status']} | "
                     f"{r['eager_err_vs_fp64']:.3g} | "
                     f"{r['compiled_err_vs_fp64']:.3g} | {r['accuracy_tol']:.3g} | {r['rel_err']:.3g} | "
                     f"{r['accuracy_reference']} |")
    return lines


def memory(root: Path) -> list[str]:
    lines = ["| setting | cap | cap GiB | status | need GiB (whole trial / compiled alone) "
             "| steady allocated peak GiB |",
             "|---|---|---|---|---|---|"]
    for f in sorted((root / "memory_fit").glob("*.json")):
        rows = json.loads(f.read_text())
        steady = rows[0].get("peak_mem_gib")
        for r in rows:
            cap = "-" if r["cap_gib"] is None else f"{r['cap_gib']:.3f}"
            need = r.get("mem_need_reserved_gib", r.get("compiled_need_reserved_gib"))
            need_text = "-" if need is None else f"{need:.3f}"
            steady_text = f"{steady:.3f}" if r is rows[0] and steady is not None else "-"
            lines.append(f"| {r['setting']} | {r['cap']} | {cap} | {r['status']} | {need_text} | {steady_text} |")
    return lines


def _runs(root: Path, prefix: str, first: str | None) -> dict[str, pd.DataFrame]:
    runs = {d.name: _load(root, d.name) for d in sorted(root.glob(f"{prefix}[0-9]"))}
    return {first: _load(root, first), **runs} if first and (root / first).exists() else runs


def main() -> int:
    root = Path(sys.argv[1])
    out: list[str] = []
    if (root / "at_once").exists() and (root / "alone").exists():
        at_once, alone = _load(root, "at_once"), _load(root, "alone")
        at_once["eager_spread"] = baseline_spread_pct(at_once)
        out += ["## At once vs alone", *at_once_vs_alone(at_once, alone), ""]
    repeated = {prefix: _runs(root, prefix, first)
                for prefix, first in (("repeat", "at_once"), ("single_repeat", None))}
    for prefix, runs in repeated.items():
        if len(runs) > 1:
            out += [f"## Run to run ({prefix})", *repeats(runs), ""]
    every = {**({"alone": _load(root, "alone")} if (root / "alone").exists() else {}), **repeated["repeat"]}
    if len(every) > 1:
        out += ["## Between two runs of one setting (" + ", ".join(every) + ")", *run_to_run(every), ""]
    if (root / "train").exists():
        out += ["## Training accuracy against float64", *training(_load(root, "train")), ""]
    if (root / "memory_fit").exists():
        out += ["## Memory fit", *memory(root), ""]
    if (root / "walls.txt").exists():
        out += ["## Wall times", "```", (root / "walls.txt").read_text().strip(), "```"]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
