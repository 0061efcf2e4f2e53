"""Alternated windows compared at the same host speed: which pairs a speedup may use.

Pair i is window i of each arm, timed back to back. It is *fast* when every window of it read the
host's fast state (`witness`) and no other trial compiled during it where that is watched (a GPU
shared with other trials: `neighbours`), *slow* when every one read slow; other pairs count for neither.
The headline figures use the fast pairs (at least MIN_MATCHED_PAIRS of them: else the host ran
slow through the trial, and the headline falls back to all pairs, saying so); the slow pairs
give the speedup in the slow state beside it. When too few pairs are fast, more are timed, up to
EXTRA_ROUNDS times the planned windows: a slow stretch of the host lasts seconds. Unless the
host's state is shown to move no arm's step (`unmoved_by_host`): then the trial is *steady*, its headline uses
every pair and the state adds no rounds (a GPU-bound step waits for the GPU at any CPU speed).
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
import time
from dataclasses import dataclass
from typing import Any

from sweeper.measure import gpu_lock, witness
from sweeper.measure.neighbours import neighbours_compiling
from sweeper.measure.timing import Arm, WindowStats, run_interleaved

MIN_MATCHED_PAIRS = 5
"""Fewest fast pairs a headline figure is taken from."""
MIN_STATE_PAIRS = 3
"""Fewest slow pairs a slow-state speedup is taken from."""
EXTRA_ROUNDS = 2
"""At most this many times the planned windows are timed again, while too few pairs are fast."""
PRECISION_ROUNDS = 5
"""With a precision target, at most this many times the planned windows are timed again in all."""
DEFAULT_GPU_TARGET_SE_PCT = 2.5
STEADY_PCT = 1.0
"""An arm is unmoved by the host's state when its slow-state and fast-state windows' median steps
differ by at most this many percent, STEADY_SE standard errors included (`unmoved_by_host`)."""
STEADY_SE = 2.0


def median_se_pct(per_iter_s: list[float]) -> float | None:
    """Standard error of the median of `per_iter_s`, in percent of it: the normal approximation
    (1.2533 sigma / sqrt(n)) with sigma from the median absolute deviation, which a few windows
    slowed by a neighbour do not inflate. None under three windows."""
    if len(per_iter_s) < 3:
        return None
    med = statistics.median(per_iter_s)
    mad = statistics.median(abs(x - med) for x in per_iter_s)
    return 1.2533 * 1.4826 * mad / math.sqrt(len(per_iter_s)) / med * 100.0 if med > 0 else None


def target_se_pct(value: float | None, device_type: str) -> float | None:
    """measure.target_se_pct, or its default: DEFAULT_GPU_TARGET_SE_PCT on a GPU, none on the CPU
    (its windows are not gated, and a busy small host would time every trial to the cap); 0: none."""
    if value is None:
        return DEFAULT_GPU_TARGET_SE_PCT if device_type == "cuda" else None
    return value or None


def unmoved_by_host(arm: WindowStats, ref_ms: float) -> bool:
    """Whether `arm`'s step time is shown not to follow the host's state: at least MIN_STATE_PAIRS
    windows read each state, and the medians of the two differ by at most STEADY_PCT even at
    STEADY_SE standard errors out. An arm that may follow it (too few windows of a state, or too
    spread to tell) is not unmoved: wrongly judged unmoved, a headline would mix the states."""
    read_slow = [witness.is_slow(r, ref_ms) for r in arm.witness_ms]
    fast = [x for x, was_slow in zip(arm.per_iter_s, read_slow, strict=True) if not was_slow]
    slow = [x for x, was_slow in zip(arm.per_iter_s, read_slow, strict=True) if was_slow]
    if min(len(fast), len(slow)) < MIN_STATE_PAIRS:
        return False
    excess_pct = (statistics.median(slow) / statistics.median(fast) - 1.0) * 100.0
    se = math.hypot(median_se_pct(fast) or 0.0, median_se_pct(slow) or 0.0)
    return abs(excess_pct) + STEADY_SE * se <= STEADY_PCT


@dataclass
class Matched:
    """Every arm's windows and the host state each pair ran in."""

    arms: list[WindowStats]
    ref_ms: float
    fast: list[int]
    slow: list[int]
    steady: bool = False
    """The host's state was shown to move no arm's step (`unmoved_by_host`)."""
    waited_s: float = 0.0
    """Seconds the rounds waited for the host's fast state (`HostGate`)."""

    @classmethod
    def of(cls, arms: list[WindowStats], ref_ms: float | None = None) -> Matched:
        """A pair is fast when every arm's window read the fast state and no watched neighbour
        compiled during either (a compile on the host's other cores slows a launch-bound step, and
        the witness reads it slow only in part); busy windows' readings do not make the reference."""
        n = len(arms[0].window_s)
        busy = set(_busy_pairs(arms))
        quiet = [a.witness_ms[i] for a in arms for i in range(n) if i not in busy]
        ref = ref_ms if ref_ms is not None else witness.reference_ms(quiet or [r for a in arms for r in a.witness_ms])
        states = [[witness.is_slow(a.witness_ms[i], ref) for a in arms] for i in range(n)]
        steady = all(unmoved_by_host(a, ref) for a in arms)
        return cls(arms, ref, [i for i, s in enumerate(states) if not any(s) and i not in busy],
                   [i for i, s in enumerate(states) if all(s)], steady)

    @property
    def state(self) -> str:
        """fast: the headline compares fast pairs only; steady: the host's state moved no arm's step,
        it uses all pairs; slow: too few were fast and the state mattered, it uses all pairs."""
        if self.steady:
            return "steady"
        return "fast" if len(self.fast) >= MIN_MATCHED_PAIRS else "slow"

    @property
    def headline_pairs(self) -> list[int]:
        """The pairs the headline figures come from."""
        return self.fast if self.state == "fast" else list(range(len(self.arms[0].window_s)))

    def headline(self, k: int) -> WindowStats:
        return self.arms[k].subset(self.fast) if self.state == "fast" else self.arms[k]

    def se_pct(self, k: int) -> float | None:
        """The standard error of arm k's headline median step, in percent (`median_se_pct`)."""
        return median_se_pct(self.headline(k).per_iter_s)

    def imprecise(self, target_pct: float | None) -> bool:
        """Some arm's headline median is known less precisely than `target_pct` (None: no target)."""
        if target_pct is None:
            return False
        errors = [self.se_pct(k) for k in range(len(self.arms))]
        return any(e is None or e > target_pct for e in errors)

    @property
    def busy_pairs(self) -> list[int]:
        """The pairs during which a watched neighbour compiled (never fast)."""
        return _busy_pairs(self.arms)

    @property
    def slow_windows_pct(self) -> float:
        flags = [witness.is_slow(r, self.ref_ms) for a in self.arms for r in a.witness_ms]
        return 100.0 * sum(flags) / len(flags) if flags else 0.0

    def row(self, prefixes: list[str]) -> dict[str, Any]:
        """The witness columns of a row; `prefixes` name the arms' columns ("eager_", "")."""
        row: dict[str, Any] = {"witness_ref_ms": self.ref_ms, "slow_windows_pct": self.slow_windows_pct,
                               "host_state": self.state, "matched_pairs": len(self.headline(0).window_s),
                               "timed_windows": len(self.arms[0].window_s),
                               "host_wait_s": self.waited_s}
        for k, prefix in enumerate(prefixes):
            row[f"{prefix}witness_ms"] = witness.median_or_none(self.headline(k).witness_ms)
            row[f"{prefix}gpu_clock_mhz"] = self.headline(k).median_clock_mhz
            row[f"{prefix}launch_witness_ms"] = witness.median_or_none(self.headline(k).launch_ms)
            row[f"{prefix}median_se_pct"] = self.se_pct(k)
        arms = list(zip(prefixes, self.arms, strict=True))
        row["windows_json"] = json.dumps({
            "ref_ms": round(self.ref_ms, 4),
            **{f"{p or 'compiled_'}s_per_iter": [round(x, 9) for x in a.per_iter_s] for p, a in arms},
            **{f"{p or 'compiled_'}witness_ms": [round(x, 4) for x in a.witness_ms] for p, a in arms},
            **{f"{p or 'compiled_'}clock_mhz": a.clock_mhz for p, a in arms if a.clock_mhz},
            **{f"{p or 'compiled_'}launch_ms": [round(x, 4) for x in a.launch_ms] for p, a in arms if a.launch_ms},
            **({"busy_pairs": self.busy_pairs} if any(a.busy for a in self.arms) else {}),
        })
        return row


def _busy_pairs(arms: list[WindowStats]) -> list[int]:
    return [i for i in range(len(arms[0].window_s)) if any(a.busy[i] for a in arms if a.busy)]


def speedup(base: WindowStats, new: WindowStats) -> float:
    return base.median_iter_s / new.median_iter_s


class HostGate:
    """Before each round of windows: the witness, read again (every GATE_PAUSE_S) while it says
    the host runs slow, until it reads fast or the trial's `wait_s` is spent. It judges by the
    host's recorded fast state of windows; on a host with none yet, by a survey's."""

    def __init__(self, wait_s: float, ref_ms: float | None = None):
        self.left_s, self.waited_s = wait_s, 0.0
        self.quiet = gpu_lock.current().shared_gpu  # waits for neighbours' compiles too
        self.ref_ms = ref_ms or witness.host_fast_ms() or witness.own_fast_ms(self._survey())

    @staticmethod
    def _survey() -> list[float]:
        """Readings for SURVEY_S, each the slower of two probes as a window's is (never recorded:
        idle readings run lower than windows'): ten readings taken in one slow stretch would make
        the slow state this trial's reference."""
        readings, t0 = [], time.perf_counter()
        while time.perf_counter() - t0 < SURVEY_S:
            readings.append(witness.probe_ms())
            time.sleep(GATE_PAUSE_S)
        return [max(a, b) for a, b in itertools.pairwise(readings)] or readings

    def __call__(self) -> float:
        """The reading the round starts from. While it waits, a GPU shared with neighbours is
        theirs for untimed work (`gpu_lock.shared_meanwhile`); once alone again, it reads anew.
        The wait for the GPU is the lock's (`gpu_lock_wait_s`), not the host's."""
        reading = witness.probe_ms()
        while self._unsettled(reading) and self.left_s > 0:
            with gpu_lock.shared_meanwhile() as lent:
                reading = self._wait_fast(reading)
            if lent:  # the neighbours' untimed work may have run long: the round starts from a new reading
                reading = witness.probe_ms()
        return reading

    def _unsettled(self, reading: float) -> bool:
        """The host reads slow, or (on a GPU shared with other trials) a neighbour is compiling:
        the wait lends it the GPU, and its compile, CPU work of seconds, ends on its own."""
        return witness.is_slow(reading, self.ref_ms) or (self.quiet and neighbours_compiling() > 0)

    def _wait_fast(self, reading: float) -> float:
        t0 = time.perf_counter()
        while self._unsettled(reading) and time.perf_counter() - t0 < self.left_s:
            time.sleep(GATE_PAUSE_S)
            reading = witness.probe_ms()
        spent = time.perf_counter() - t0
        self.left_s, self.waited_s = max(0.0, self.left_s - spent), self.waited_s + spent
        return reading


def wait_allowance_s(host_wait_s: float | None, device_type: str) -> float:
    """measure.host_wait_s, or its default: 30 s on a GPU, none on the CPU (both arms slow alike)."""
    if host_wait_s is not None:
        return host_wait_s
    return DEFAULT_GPU_WAIT_S if device_type == "cuda" else 0.0


DEFAULT_GPU_WAIT_S = 30.0
GATE_PAUSE_S = 0.01
SURVEY_S = 8.0
"""A host's first gated trial reads the witness this long before its first round."""


def run_matched(arms: list[Arm], windows: int, wait_s: float = 0.0, target_pct: float | None = None,
                fast_rounds: bool = True) -> Matched:
    """Time `windows` alternated rounds of the arms, then more while fewer than `windows` pairs ran
    at the host's fast state (with `fast_rounds`: at most EXTRA_ROUNDS x windows more) or, with
    `target_pct`, while an arm's headline median is less precise than that (at most PRECISION_ROUNDS
    x windows more); with `wait_s`, each round first waits for the fast state (`HostGate`), at most
    `wait_s` in all. Without `fast_rounds` (a trial that times at whatever speed the host runs: on
    the CPU both arms slow alike) the host's state adds no rounds. On a GPU shared with other trials,
    the GPU is this process's alone meanwhile (`gpu_lock.timing`)."""
    with gpu_lock.timing():
        return _matched_rounds(arms, windows, wait_s, target_pct, fast_rounds)


def _matched_rounds(arms: list[Arm], windows: int, wait_s: float, target_pct: float | None,
                    fast_rounds: bool) -> Matched:
    gate = HostGate(wait_s) if wait_s > 0 else None
    before = gate or witness.probe_ms
    stats = run_interleaved(arms, windows, before)
    timed, cap = windows, windows * (1 + (EXTRA_ROUNDS if target_pct is None else PRECISION_ROUNDS))
    while True:
        m = Matched.of(stats)
        if gate is not None:
            m.waited_s = gate.waited_s
            gate.ref_ms = m.ref_ms  # judged as windows read from now on
            gate.left_s = 0.0 if m.steady else gate.left_s  # a steady trial waits for nothing
        missing = windows - len(m.fast) if fast_rounds and not m.steady else 0
        if (missing <= 0 and not m.imprecise(target_pct)) or timed >= cap:
            return m
        more = run_interleaved(arms, min(max(missing, windows // 2, 1), cap - timed), before)
        timed += len(more[0].window_s)
        stats = [a.extended(b) for a, b in zip(stats, more, strict=True)]


def slow_arms(m: Matched) -> tuple[WindowStats, ...] | None:
    """Every arm's slow-state windows, or None when too few pairs ran slow."""
    arms = tuple(m.arms[k].subset(m.slow) for k in range(len(m.arms)))
    return arms if len(m.slow) >= MIN_STATE_PAIRS else None


def slow_throughputs(m: Matched, prefixes: list[str], items_per_iter: float) -> dict[str, float | None]:
    """Each arm's items/s over the pairs that ran at the host's slow state (null: too few)."""
    slow = slow_arms(m)
    if slow is None:
        return {f"{p}throughput_slow_items_s": None for p in prefixes}
    return {f"{p}throughput_slow_items_s": s.throughput(items_per_iter) for p, s in zip(prefixes, slow, strict=True)}
