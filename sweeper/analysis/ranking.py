"""The one ranking of a context's settings, shared by `recommend`, the report and its stream block.

* **Context**: settings compete only with rows of the same model, phase, precision, device, workload (input
  stream) and sequence length (`CONTEXT`): across contexts the work differs.
* **Cost**: the time a fixed amount of work takes: seconds per item for a long run, else `compile + items /
  throughput` (a stream's compile: every compile it needed). Ties on time go to the lower memory, then the
  shorter compile; which compiled setting tied with the fastest is recommended: `ties`.
* **Memory**: the whole-run peak (the larger of the steady peak and the compile/autotune peak).
* **Noise**: a speedup's interval is the reported interval (`speedup_low` / `speedup_high`, see `drift`)
  where the rows carry one, else the speedup plus or minus the spread of the trial's windows
  (`throughput_spread_pct`), never narrower than the tie band; a difference inside it is a tie. A row whose
  in-trial baseline drifted past its limit (`drift_limit_pct`) for a cause that biases the in-trial ratio
  (`drift_blocks`) has no established speedup; a drift between processes at one host speed only widens the
  interval to span the speedup over the others (`drift`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from sweeper.analysis.drift import DRIFT_LIMIT_PCT
from sweeper.analysis.floors import RUN_TO_RUN_FLOOR
from sweeper.analysis.frames import flag, fmt_num, is_missing
from sweeper.results.schema import EAGER

CONTEXT = ["model", "phase", "precision", "device_name", "accelerator_type", "workload", "seq_len", "new_tokens"]
"""Columns whose values make one context: its settings compete; other contexts' do not."""

TIE_BAND_PCT = round(100 * RUN_TO_RUN_FLOOR, 6)
"""Speedups and time differences within this many percent are ties, whatever the noise: the
run-to-run range of one setting (`floors.RUN_TO_RUN_FLOOR`), also for rows without an interval."""
CHANGE_PCT = 5.0
"""A change between two result sets counts beyond this many percent (compare)."""
COMPILE_FLOOR_S = 0.5
"""... and, for compile time, beyond this many seconds."""


@dataclass(frozen=True)
class Standing:
    """How a setting's speedup over eager stands against its measured noise."""

    kind: str
    """faster, slower, tie, drifted (baseline moved), reference (eager) or unknown (not measured)."""
    speedup: float | None
    low: float | None
    high: float | None
    source: str
    """Where the interval comes from: bootstrap interval, window spread or tie band."""
    drift_pct: float | None = None
    drift_limit_pct: float = DRIFT_LIMIT_PCT

    @property
    def established(self) -> bool:
        return self.kind in ("faster", "slower")

    @property
    def noise_pct(self) -> float:
        """Half-width of the interval, in percent of the speedup (at least the tie band)."""
        if self.speedup is None or self.low is None or self.high is None or not self.speedup > 0:
            return TIE_BAND_PCT
        return max(TIE_BAND_PCT, 50.0 * (self.high - self.low) / self.speedup)

    def note(self) -> str:
        """Why a speedup is not established, or '' when it is."""
        if self.kind == "drifted":
            return (f"speedup not established: baseline drifted (the in-trial eager baseline differs by "
                    f"{fmt_num(self.drift_pct)}% from the context's other eager measurements, limit "
                    f"{fmt_num(self.drift_limit_pct)}%)")
        if self.kind == "tie":
            return (f"speedup not established: {fmt_num(self.speedup)}x is inside the noise "
                    f"({fmt_num(self.low)}-{fmt_num(self.high)}x, {self.source})")
        return ""


def _num(value: Any) -> float | None:
    if is_missing(value):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def standing(row: pd.Series | dict) -> Standing:
    """The speedup of one row against its noise (see the module docstring)."""
    speedup = _num(row.get("speedup_vs_eager"))
    drift = _num(row.get("baseline_drift_pct"))
    limit = _num(row.get("drift_limit_pct")) or DRIFT_LIMIT_PCT
    if row.get("mode") == EAGER:
        return Standing("reference", 1.0, 1.0, 1.0, "the reference", drift)
    if speedup is None:
        return Standing("unknown", None, None, None, "not measured", drift)
    low, high = _num(row.get("speedup_low")), _num(row.get("speedup_high"))
    source = "paired windows' interval, widened by the sweep's self-check"
    if drift is not None and abs(drift) > limit:
        source += f" to span the speedup over the other processes' eager step ({fmt_num(drift)}% apart)"
    if low is None or high is None:
        low, high = _num(row.get("speedup_ci_low")), _num(row.get("speedup_ci_high"))
        source = "bootstrap interval of paired windows"
    if low is None or high is None:
        spread = _num(row.get("throughput_spread_pct"))
        half = max(TIE_BAND_PCT, spread or 0.0) / 100.0
        low, high = speedup * (1 - half), speedup * (1 + half)
        source = "window spread" if spread is not None and spread > TIE_BAND_PCT else "tie band"
    past = drift is not None and abs(drift) > limit
    if past and flag(row.get("drift_blocks")) is not False:  # rows without the column: as before
        kind = "drifted"
    elif low > 1.0 and speedup >= 1 + TIE_BAND_PCT / 100:
        kind = "faster"
    elif high < 1.0 and speedup <= 1 - TIE_BAND_PCT / 100:
        kind = "slower"
    else:
        kind = "tie"
    return Standing(kind, speedup, low, high, source, drift, limit)


def host_speed_note(row: pd.Series | dict) -> str:
    """Where the host's CPUs ran at two speeds during the trial and the speedup differs between them
    by more than its interval: the headline (fast state) beside the slow state's; or, where the trial
    ran slow throughout, that its headline is the slow state's. '' otherwise (eager and steady rows)."""
    speedup, slow = _num(row.get("speedup_vs_eager")), _num(row.get("speedup_slow"))
    slow_pct = _num(row.get("slow_windows_pct"))
    if row.get("mode") == EAGER or speedup is None or row.get("host_state") == "steady":
        return ""
    share = f" ({fmt_num(slow_pct)}% of its windows)" if slow_pct is not None else ""
    if row.get("host_state") == "slow":
        return (f"measured while this host's CPUs ran slow{share}: {fmt_num(speedup)}x is the slow state's "
                f"speedup; at full CPU speed it was not measured")
    low, high = _num(row.get("speedup_low")), _num(row.get("speedup_high"))
    if slow is None or low is None or high is None or low <= slow <= high:
        return ""
    return f"{fmt_num(speedup)}x at full CPU speed, {fmt_num(slow)}x when this host's CPUs ran slow{share}"


def run_peak_gib(row: pd.Series | dict) -> float | None:
    """The whole-run peak: the larger of the steady peak and the peak while compiling."""
    values = [v for v in (_num(row.get("peak_mem_gib")), _num(row.get("peak_mem_compile_gib"))) if v is not None]
    return max(values) if values else None


def run_peak_column(df: pd.DataFrame) -> pd.Series:
    """`run_peak_gib` of every row of a prepared frame."""
    return df[["peak_mem_gib", "peak_mem_compile_gib"]].max(axis=1, skipna=True)


def need_column(df: pd.DataFrame) -> pd.Series:
    """Device memory a setting needs from the allocator (reserved, GiB): measured with the compiled
    setting alone where the row has it, else the whole trial's (eager rows: the eager trial's own)."""
    alone = pd.to_numeric(df.get("compiled_need_reserved_gib", pd.Series(index=df.index, dtype="float64")),
                          errors="coerce")
    return alone.fillna(pd.to_numeric(df["mem_need_reserved_gib"], errors="coerce")).astype("float64")


def compile_cost_column(df: pd.DataFrame) -> pd.Series:
    """Seconds of compiling per row: every compile of a stream, else the cold compile, 0 for eager."""
    return df["stream_compile_s"].fillna(df["compile_s"]).fillna(0.0)


def work_s(throughput_items_s: float, compile_s: float, items: float | None) -> float:
    """Seconds for `items` items, compile included; for a long run (None), seconds per item."""
    return compile_s + items / throughput_items_s if items else 1.0 / throughput_items_s


def rank_key(time_s: float, peak_gib: float | None, compile_s: float) -> tuple[float, float, float]:
    """Sort key: less time first, then less memory, then a shorter compile."""
    return (time_s, peak_gib if peak_gib is not None else math.inf, compile_s)


def tied(time_a: float, time_b: float, noise_pct: float) -> bool:
    """Whether two times differ by less than the noise (and the tie band)."""
    if not time_a > 0 or not time_b > 0:
        return False
    gap_pct = 100.0 * abs(time_a - time_b) / min(time_a, time_b)
    return gap_pct <= max(TIE_BAND_PCT, noise_pct)


def context_label(key: dict[str, Any]) -> str:
    """`phase · precision · device · workload · seq N` of a context (its set values)."""
    parts = []
    for name in CONTEXT[1:]:
        value = key.get(name)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        parts.append(f"seq {int(value)}" if name == "seq_len" else f"+{int(value)} tokens" if name == "new_tokens"
                     else f"on {value} nodes" if name == "accelerator_type"
                     else str(value))
    return " · ".join(parts)


@dataclass(frozen=True)
class Candidate:
    """One setting that may be recommended, with what the ranking reads of it."""

    setting: str
    compile_call: str
    mode: str
    dynamic: bool | None
    backend: str | None
    batch_size: int | None
    throughput_items_s: float
    peak_mem_gib: float | None
    """The whole-run peak (compile included): what a memory limit is checked against."""
    steady_peak_mem_gib: float | None
    compile_s: float
    """Every compile of a stream, else the cold compile; 0 for eager."""
    speedup_vs_eager: float | None
    speedup_ci_low: float | None
    speedup_ci_high: float | None
    speedup_established: bool
    speedup_note: str
    """Why the speedup is not established (inside the noise, baseline drifted), or ''."""
    seconds_per_item: float
    workload_s: float | None
    trial_id: str | None
    stream: bool = False
    """An input-stream trial: compile_s is every compile of the stream."""
    compile_what: str = "cold compile"
    """What compile_s measures: cold compile, warm start from the artifact, compiles over the stream."""
    spread_pct: float | None = None
    """(max - min) / median of the timed windows: how far apart repeated timings fell."""
    noise_pct: float = TIE_BAND_PCT
    """Half-width of the speedup's interval in percent: differences inside it are ties."""
    host_note: str = ""
    """The speedup at the host's two CPU speeds where they differ (`host_speed_note`), or ''."""
    own_options: bool = False
    """The trial applied an inductor option set of its own (`inductor_options_json`), not the mode alone."""

    @property
    def time_s(self) -> float:
        return self.workload_s if self.workload_s is not None else self.seconds_per_item

    @property
    def is_eager(self) -> bool:
        return self.mode == EAGER


def candidate_key(c: Candidate) -> tuple[float, float, float]:
    return rank_key(c.time_s, c.peak_mem_gib, c.compile_s)


def drifted(c: Candidate) -> bool:
    """Whether the candidate's speedup is not established because its baseline drifted."""
    return "baseline drifted" in c.speedup_note


def verdict(best: Candidate | None, best_compiled: Candidate | None) -> tuple[str, str]:
    """(verdict, css class) of a context from its ranked choice and its best compiled setting."""
    if best is None:
        return "no setting meets the constraints", "v-fail"
    if best.is_eager:
        if best_compiled is None:
            return "eager wins (no compiled setting qualifies)", "v-lose"
        s = fmt_num(best_compiled.speedup_vs_eager)
        if tied(best.time_s, best_compiled.time_s, best_compiled.noise_pct):
            return f"no clear difference (best compiled {s}×, inside the noise)", "v-even"
        return f"eager wins (best compiled {s}×)", "v-lose"
    s = best.speedup_vs_eager
    if best.speedup_established and s is not None and s > 1:
        return f"compile: {s:.2f}× faster", "v-win"
    if drifted(best):
        low, high = interval(best)
        between = f"; interval {fmt_num(low)}-{fmt_num(high)}×" if low is not None else ""
        return f"speedup not established ({fmt_num(s)}×, baseline drifted{between})", "v-even"
    return f"no clear difference ({fmt_num(s)}×, inside the noise)", "v-even"


def why_lost(loser: Candidate, best: Candidate, items: float | None) -> str:
    """Why the runner-up ranks below the choice, with a warning when the gap is inside the noise."""
    noise = max(loser.noise_pct, best.noise_pct)
    tie = ("; a gap inside the measured noise (±" + fmt_num(noise)
           + "%), so a tie within measurement noise: re-measure before relying on it"
           if tied(loser.time_s, best.time_s, noise) else "")
    if items is not None and loser.workload_s is not None and best.workload_s is not None:
        extra = loser.workload_s - best.workload_s
        if loser.throughput_items_s > best.throughput_items_s:
            return (f"faster per item ({fmt_num(loser.throughput_items_s)} vs {fmt_num(best.throughput_items_s)} "
                    f"items/s) but its {fmt_num(loser.compile_s)} s compile is not paid back in "
                    f"{fmt_num(items)} items: {fmt_num(extra)} s slower in total" + tie)
        return (f"{fmt_num(extra)} s slower for the workload ({fmt_num(loser.workload_s)} s vs "
                f"{fmt_num(best.workload_s)} s; {fmt_num(loser.throughput_items_s)} vs "
                f"{fmt_num(best.throughput_items_s)} items/s, compile {fmt_num(loser.compile_s)} s vs "
                f"{fmt_num(best.compile_s)} s)" + tie)
    gap = 100.0 * (1.0 - loser.throughput_items_s / best.throughput_items_s)
    if gap > 0:
        return (f"{fmt_num(gap)}% lower throughput ({fmt_num(loser.throughput_items_s)} vs "
                f"{fmt_num(best.throughput_items_s)} items/s)" + tie)
    return (f"same throughput, but more memory ({fmt_num(loser.peak_mem_gib)} vs {fmt_num(best.peak_mem_gib)} GiB) "
            f"or longer compile ({fmt_num(loser.compile_s)} vs {fmt_num(best.compile_s)} s)")


def interval(c: Candidate) -> tuple[float | None, float | None]:
    """The speedup interval of a candidate: its bootstrap interval, else +- its noise."""
    if c.speedup_ci_low is not None and c.speedup_ci_high is not None:
        return c.speedup_ci_low, c.speedup_ci_high
    s = c.speedup_vs_eager
    return (None, None) if s is None else (s * (1 - c.noise_pct / 100), s * (1 + c.noise_pct / 100))
