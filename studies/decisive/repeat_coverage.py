"""How often one repeat's headline should fall inside another repeat's interval, given how far the
repeats themselves spread: the decisive study's repeat target weighed against the rows.

If a setting's headline speedup varies from run to run with a spread sigma (of its log), two runs
differ by D ~ N(0, 2 sigma^2), and a row's interval [low, high] holds the other run's headline with
probability P(-log(x/low) <= D <= log(high/x)). Summed over the pairs of each arm's repeats, that is
the coverage intervals as wide as the reported ones can be expected to give; an exact 95% interval
of one run (1.96 sigma each side) gives erf(1.96 / 2) = 83%, however well it is built. sigma is each
setting's sample spread over its repeats (3 or 5: itself uncertain).

    python -m studies.decisive.repeat_coverage [studies/decisive/results]
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from studies.decisive.drift_between import repeat_pairs, repeats

Z99 = 2.576
"""Two-sided 99% normal quantile: a check that passes 99 times in 100 needs Z99 * sqrt(2) sigma."""


_phi = statistics.NormalDist().cdf


def pairs(df: pd.DataFrame) -> pd.DataFrame:
    """One line per (row, other repeat of its setting): observed hold and its expected probability."""
    sigma = df.groupby(["arm", "model", "mode"], sort=False)["speedup_vs_eager"].transform(
        lambda s: float(np.std(np.log(s.to_numpy(float)), ddof=1)))
    p = repeat_pairs(df.copy().assign(sigma=sigma))  # the copy joins the frame's column blocks first

    def expected(r: pd.Series) -> float:
        scale = math.sqrt(2) * r["sigma"]
        if not scale > 0:
            return 1.0
        x = r["speedup_vs_eager"]
        return _phi(math.log(r["speedup_high"] / x) / scale) - _phi(-math.log(x / r["speedup_low"]) / scale)

    return pd.DataFrame({"arm": p["arm"], "setting": p["model"] + " " + p["mode"], "sigma_pct": 100 * p["sigma"],
                         "half_width_pct": p["half_width_pct"], "held": p["covers"],
                         "expected": p.apply(expected, axis=1)})


def table(df: pd.DataFrame) -> str:
    p = pairs(df)
    lines = ["| arm | settings | checks | held | expected of intervals this wide | run-to-run spread (median) | "
             "half-width (median) | half-width a check needs to pass 99 times in 100 (median) |",
             "|---|---|---|---|---|---|---|---|"]
    for arm, g in [*p.groupby("arm", sort=False), ("**all**", p)]:
        sigma = g.groupby(["arm", "setting"])["sigma_pct"].first()
        lines.append(f"| {arm} | {len(sigma)} | {len(g)} | {int(g['held'].sum())} ({100 * g['held'].mean():.0f}%) | "
                     f"{100 * g['expected'].mean():.0f}% | {sigma.median():.1f}% | "
                     f"+-{g['half_width_pct'].median():.1f}% | +-{Z99 * math.sqrt(2) * sigma.median():.1f}% |")
    return "\n".join(lines)


def matched_speed(df: pd.DataFrame, beta: float) -> pd.DataFrame:
    """The reduce-overhead rows' speedups and intervals taken to one host speed: a CUDA-graph replay
    does not move with the host's CPUs, so if the eager step's time goes as the witness reading to the
    power beta, speedup x (W0 / eager_witness_ms)^beta is the speedup at a reading W0 (W0 cancels in
    every comparison, so it is left out)."""
    out = df.copy()
    ro = out["mode"].eq("reduce-overhead")
    factor = out.loc[ro, "eager_witness_ms"].astype(float) ** -beta
    for col in ("speedup_vs_eager", "speedup_low", "speedup_high"):
        out.loc[ro, col] = out.loc[ro, col].astype(float) * factor
    return out


def matched_table(df: pd.DataFrame, betas: tuple[float, ...] = (0.0, 0.5, 1.0)) -> str:
    """The reduce-overhead repeat checks with each row taken to one host speed (`matched_speed`)."""
    lines = ["| the eager step's power of the witness reading (beta) | reduce-overhead checks held | "
             "run-to-run spread (median) |", "|---|---|---|"]
    for beta in betas:
        p = pairs(matched_speed(df, beta))
        ro = p[p["setting"].str.endswith("reduce-overhead")]
        sigma = ro.groupby(["arm", "setting"])["sigma_pct"].first()
        lines.append(f"| {beta:g} | {int(ro['held'].sum())} of {len(ro)} ({100 * ro['held'].mean():.0f}%) | "
                     f"{sigma.median():.1f}% |")
    return "\n".join(lines)


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "studies/decisive/results")
    df = repeats(root)
    print(table(df), matched_table(df), sep="\n\n")


if __name__ == "__main__":
    main()
