"""Timing: per-iteration latency in timed windows, alternated arms, and the speedup's interval.

On CUDA an event is recorded after every iteration and the device is synchronized once
per window, so per-iteration latencies cost no extra synchronization. On CPU the host
clock is read after every iteration.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from sweeper.measure import witness


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_call(fn: Callable[[], object], device: torch.device) -> tuple[float, object]:
    """Wall seconds of one call, device synchronized before and after."""
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - t0, out


@dataclass
class WindowStats:
    window_s: list[float]
    iter_s: list[float]
    iters_per_window: int
    witness_ms: list[float] = field(default_factory=list)
    """Per window: the host-speed witness's reading around it (`sweeper.measure.witness`)."""
    clock_mhz: list[float | None] = field(default_factory=list)
    """Per window: the GPU's SM clock read as the window ended (empty on CPU or without NVML)."""
    launch_ms: list[float] = field(default_factory=list)
    """Per window: the launch witness read just before it (`witness.launch_probe`; empty on CPU)."""
    busy: list[bool] = field(default_factory=list)
    """Per window: whether another trial on the host compiled during it (empty: not watched)."""

    def subset(self, windows: list[int]) -> WindowStats:
        """The same measurement restricted to the given windows (by index)."""
        n = self.iters_per_window

        def pick(xs: list) -> list:
            return [xs[k] for k in windows] if xs else []
        return WindowStats(pick(self.window_s), [s for k in windows for s in self.iter_s[k * n:(k + 1) * n]], n,
                           pick(self.witness_ms), pick(self.clock_mhz), pick(self.launch_ms), pick(self.busy))

    def extended(self, more: WindowStats) -> WindowStats:
        return WindowStats(self.window_s + more.window_s, self.iter_s + more.iter_s, self.iters_per_window,
                           self.witness_ms + more.witness_ms, self.clock_mhz + more.clock_mhz,
                           self.launch_ms + more.launch_ms, self.busy + more.busy)

    @property
    def median_clock_mhz(self) -> float | None:
        known = [c for c in self.clock_mhz if c is not None]
        return statistics.median(known) if known else None

    @property
    def per_iter_s(self) -> list[float]:
        return [w / self.iters_per_window for w in self.window_s]

    @property
    def median_iter_s(self) -> float:
        return statistics.median(self.window_s) / self.iters_per_window

    def throughput(self, items_per_iter: float) -> float:
        return items_per_iter / self.median_iter_s

    def percentile_ms(self, q: float) -> float:
        xs = sorted(self.iter_s)
        k = min(len(xs) - 1, max(0, math.ceil(q / 100 * len(xs)) - 1))
        return xs[k] * 1e3

    @property
    def spread_pct(self) -> float:
        per_iter = [w / self.iters_per_window for w in self.window_s]
        return (max(per_iter) - min(per_iter)) / statistics.median(per_iter) * 100


def repeat(fn: Callable[[], object], n: int) -> None:
    """Call `fn` n times, holding no output beyond the call that made it."""
    for _ in range(n):
        fn()


def calibrate(fn: Callable[[], object], device: torch.device, warmup_iters: int,
              min_iters: int, min_window_s: float) -> int:
    """Run the warm-up, then time `min_iters` warmed-up calls; return iterations per window
    meeting both floors. The warm-up itself is not the yardstick: its first calls carry one-off
    costs (cuDNN autotuning, allocator growth, a training step's optimizer state), which would
    make every window shorter than `min_window_s`. Outputs are dropped as they come, as in a
    user's loop: keeping them would add several outputs to the peak memory the warm-up starts."""
    timed_call(lambda: repeat(fn, warmup_iters), device)
    probe_iters = max(1, min_iters)
    elapsed, _ = timed_call(lambda: repeat(fn, probe_iters), device)
    per_iter = max(elapsed / probe_iters, 1e-7)
    return max(min_iters, math.ceil(min_window_s / per_iter))


def _window(fn: Callable[[], object], device: torch.device, iters: int) -> list[float]:
    """Seconds of each of `iters` back-to-back calls."""
    if device.type == "cuda":
        events = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
        events[0].record()
        for i in range(iters):
            fn()
            events[i + 1].record()
        events[-1].synchronize()
        return [events[i].elapsed_time(events[i + 1]) / 1e3 for i in range(iters)]
    laps = []
    t = time.perf_counter()
    for _ in range(iters):
        fn()
        now = time.perf_counter()
        laps.append(now - t)
        t = now
    return laps


Window = Callable[[], list[float]]
"""Runs one timed window and returns the seconds of each iteration in it."""


def fixed_window(fn: Callable[[], object], device: torch.device, iters: int) -> Window:
    """A window of `iters` back-to-back calls of `fn`."""
    return lambda: _window(fn, device, iters)


@dataclass
class Arm:
    """One contender of an interleaved measurement: its window, and hooks run around each window
    outside the timed region (a memory tracker's reset and read, a look at the neighbours)."""

    window: Window
    iters: int
    before: Callable[[], None] = lambda: None
    after: Callable[[], None] = lambda: None
    clock: Callable[[], float | None] | None = None
    """Read as each window ends, before `after`: the GPU's SM clock (None: not read)."""
    launch: Callable[[], float] | None = None
    """Read just before each window, after the CPU witness: the launch witness (None: not read)."""
    busy: Callable[[], bool] | None = None
    """Read after `after`: whether a neighbour compiled during the window just timed (None: not watched)."""


def run_interleaved(arms: list[Arm], windows: int,
                    before_round: Callable[[], float] = witness.probe_ms) -> list[WindowStats]:
    """Time `windows` windows of each arm, alternating arms window by window (A B A B ...).

    Contenders timed one after the other see different conditions when something else
    shares the host (a neighbour's compile, clock changes); alternating short windows gives
    both the same conditions, and pairs window i of one arm with window i of the other for
    the speedup's interval (`paired_interval`). `before_round` returns the witness reading the
    round starts from (`matching.HostGate` waits there for the host's fast state).
    """
    window_s: list[list[float]] = [[] for _ in arms]
    iter_s: list[list[float]] = [[] for _ in arms]
    clocks: list[list[float | None]] = [[] for _ in arms]
    launches: list[list[float]] = [[] for _ in arms]
    busy: list[list[bool]] = [[] for _ in arms]
    readings: list[float] = []  # the witness before each window, in timing order, then one after the last
    for _ in range(windows):
        first = before_round()  # the round's first witness reading (a gate may wait for a fast one)
        for k, arm in enumerate(arms):
            arm.before()
            readings.append(first if k == 0 else witness.probe_ms())
            if arm.launch is not None:
                launches[k].append(arm.launch())
            laps = arm.window()
            if arm.clock is not None:
                clocks[k].append(arm.clock())
            arm.after()
            if arm.busy is not None:
                busy[k].append(arm.busy())
            iter_s[k].extend(laps)
            window_s[k].append(sum(laps))
    readings.append(witness.probe_ms())
    around = [max(a, b) for a, b in itertools.pairwise(readings)]  # a window's: the slower of its two
    return [WindowStats(w, i, arm.iters, around[k::len(arms)], clocks[k], launches[k], busy[k])
            for k, (w, i, arm) in enumerate(zip(window_s, iter_s, arms, strict=True))]


def run_windows(fn: Callable[[], object], device: torch.device, windows: int, iters: int) -> WindowStats:
    return run_interleaved([Arm(fixed_window(fn, device, iters), iters)], windows)[0]


BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95


def paired_interval(base: WindowStats, new: WindowStats, seed: int = 0) -> tuple[float, float]:
    """95% bootstrap interval of the speedup of `new` over `base`, median(base) / median(new) per
    iteration, resampling the pairs of alternated windows (window i of each was timed back to back,
    under the same conditions). A difference inside it is not established."""
    b, n = base.per_iter_s, new.per_iter_s
    pairs = list(zip(b, n, strict=True))
    rng = random.Random(seed)
    ratios = sorted(statistics.median(p[0] for p in draw) / statistics.median(p[1] for p in draw)
                    for draw in (rng.choices(pairs, k=len(pairs)) for _ in range(BOOTSTRAP_RESAMPLES)))
    tail = (1 - CONFIDENCE) / 2
    return ratios[int(tail * len(ratios))], ratios[min(len(ratios) - 1, int((1 - tail) * len(ratios)))]


IN_TRIAL_FLOOR = 0.02
"""Least half-width of a speedup's in-trial interval, as a fraction: the paired bootstrap sees
only how windows of one process vary, and those share its kernels, clocks and memory placement,
so it can come out far narrower than +-2% (+-0.4% on an H200). What differs between processes
(another compile, another state of the host) is wider still: the reported interval's floors in
sweeper/analysis/drift.py, measured between runs."""


def speedup_interval(base: WindowStats, new: WindowStats, seed: int = 0) -> tuple[float, float]:
    """The speedup's in-trial interval as rows report it: the paired bootstrap, at least
    +-IN_TRIAL_FLOOR around the speedup itself."""
    low, high = paired_interval(base, new, seed)
    point = base.median_iter_s / new.median_iter_s
    return min(low, point * (1 - IN_TRIAL_FLOOR)), max(high, point * (1 + IN_TRIAL_FLOOR))
