"""Tables of `core_check.py` runs: per CPU, each process's median eager step and launch witness,
and whether a CPU's rank holds from one process to the next.

    python3 -m studies.decisive.core_tables core_1.json core_2.json core_3.json
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
from pathlib import Path


def ranks(xs: list[float]) -> list[int]:
    order = sorted(range(len(xs)), key=xs.__getitem__)
    r = [0] * len(xs)
    for k, i in enumerate(order):
        r[i] = k
    return r


def spearman(a: list[float], b: list[float]) -> float:
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb, strict=True)) / (n * (n * n - 1))


def pearson(pairs: list[tuple[float, float]]) -> float:
    xs, ys = zip(*pairs, strict=True)
    return statistics.correlation(xs, ys)


def persistence(windows: list[dict]) -> tuple[float, float]:
    """Correlation of one window's CPU witness with the next window's: (next on the same CPU, next
    on another CPU). Windows are in timing order, a condition's windows back to back."""
    same, other = [], []
    for a, b in itertools.pairwise(windows):
        (same if a["condition"] == b["condition"] else other).append((a["cpu_ms"], b["cpu_ms"]))
    return pearson(same), pearson(other)


def main(paths: list[str]) -> None:
    runs = [json.loads(Path(p).read_text()) for p in paths]
    names = list(runs[0]["summary"])
    print("| condition | " + " | ".join(f"p{k + 1} step ms (launch ms)" for k in range(len(runs))) + " |")
    print("|---" * (len(runs) + 1) + "|")
    for name in names:
        cells = [f"{r['summary'][name]['step_ms']:.3f} ({r['summary'][name]['launch_ms']:.3f})" for r in runs]
        print(f"| {name} | " + " | ".join(cells) + " |")
    cpus = [n for n in names if n != "all"]
    for k, r in enumerate(runs):
        same, other = persistence(r["windows"])
        print(f"p{k + 1}: witness of the next window (~0.1 s later): same CPU r={same:.2f}, another CPU r={other:.2f}")
        steps = [r["summary"][n]["step_ms"] for n in cpus]
        print(f"p{k + 1}: correlation over windows: cpu witness {r['correlation']['cpu']:.2f}, "
              f"launch witness {r['correlation']['launch']:.2f}; per-CPU medians "
              f"{min(steps):.3f}-{max(steps):.3f} ms (spread {100 * (max(steps) / min(steps) - 1):.1f}%)")
    for a in range(len(runs)):
        for b in range(a + 1, len(runs)):
            sa = [runs[a]["summary"][n]["step_ms"] for n in cpus]
            sb = [runs[b]["summary"][n]["step_ms"] for n in cpus]
            print(f"rank correlation of the CPUs' step medians, p{a + 1} vs p{b + 1}: {spearman(sa, sb):.2f}")
    alls = [r["summary"]["all"]["step_ms"] for r in runs]
    pinned = [statistics.median(r["summary"][n]["step_ms"] for n in cpus) for r in runs]
    print(f"unpinned: {', '.join(f'{x:.3f}' for x in alls)} ms (spread {100 * (max(alls) / min(alls) - 1):.1f}%); "
          f"pinned, median over CPUs: {', '.join(f'{x:.3f}' for x in pinned)} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
