"""Trackers and accuracy helpers, without compiling anything."""

from __future__ import annotations

import math

import pytest
import torch

from sweeper.measure import timing
from sweeper.measure.accuracy import compare, default_tolerance
from sweeper.measure.memory import MemoryTracker
from sweeper.measure.timing import Arm, WindowStats, calibrate, fixed_window, run_interleaved, run_windows


def test_window_stats_percentiles_and_throughput():
    stats = WindowStats(window_s=[1.0, 2.0, 1.5, 1.2, 1.8], iter_s=[i / 100 for i in range(1, 101)],
                        iters_per_window=10)
    assert stats.median_iter_s == pytest.approx(0.15)
    assert stats.throughput(items_per_iter=30) == pytest.approx(200.0)
    assert stats.percentile_ms(50) == pytest.approx(500.0)
    assert stats.percentile_ms(99) == pytest.approx(990.0)
    assert stats.spread_pct == pytest.approx((0.2 - 0.1) / 0.15 * 100)


class _Clock:
    """The timing code's clock, advanced by the work itself: what a call costs is what the test
    says, however busy the machine running the test is."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def spend(self, s: float) -> None:
        self.now += s


@pytest.fixture
def clock(monkeypatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(timing, "time", fake)
    return fake


def test_calibrate_meets_time_and_iteration_floors(clock):
    calls = []

    def fn():
        clock.spend(0.004)
        calls.append(1)

    iters = calibrate(fn, torch.device("cpu"), warmup_iters=3, min_iters=4, min_window_s=0.05)
    assert len(calls) == 3 + 4 and iters == 13  # the warm-up, then the timed probe: ceil(0.05 / 0.004)
    stats = run_windows(fn, torch.device("cpu"), windows=5, iters=iters)
    assert len(stats.window_s) == 5 and len(stats.iter_s) == 5 * iters
    assert min(stats.window_s) >= 0.05  # the time floor


def test_calibrate_ignores_the_warm_ups_one_off_cost(clock):
    """A first call sixty times slower than the rest (cuDNN autotuning, optimizer state) must not
    shorten the windows: calibrated from the warm-up it would give 2 calls of 5 ms (10 ms)."""
    calls = []

    def fn():
        clock.spend(0.3 if not calls else 0.005)
        calls.append(1)

    iters = calibrate(fn, torch.device("cpu"), warmup_iters=3, min_iters=2, min_window_s=0.05)
    assert iters == 10


class _Host:
    """A host that gets three times slower halfway through (a neighbour starts compiling)."""

    def __init__(self, switch_after: int, clock: _Clock):
        self.calls, self.switch_after, self.order, self.clock = 0, switch_after, [], clock

    def work(self, name: str, ms: float):
        def call():
            self.order.append(name)
            self.calls += 1
            self.clock.spend(ms / 1e3 * (3 if self.calls > self.switch_after else 1))
        return call


def test_interleaved_windows_alternate_and_keep_the_ratio_when_the_host_slows_down(clock):
    cpu = torch.device("cpu")
    host = _Host(switch_after=30, clock=clock)  # 2 arms x 6 windows x 5 calls = 60 calls
    arms = [Arm(fixed_window(host.work(n, ms), cpu, 5), 5) for n, ms in (("e", 4), ("c", 2))]
    eager, compiled = run_interleaved(arms, windows=6)
    assert host.order == (["e"] * 5 + ["c"] * 5) * 6
    assert len(eager.window_s) == len(compiled.window_s) == 6 and len(compiled.iter_s) == 30
    assert eager.median_iter_s / compiled.median_iter_s == pytest.approx(2.0)

    # the same contenders timed one after the other: the slowdown lands on one of them
    host = _Host(switch_after=30, clock=clock)
    eager = run_windows(host.work("e", 4), cpu, windows=6, iters=5)
    compiled = run_windows(host.work("c", 2), cpu, windows=6, iters=5)
    assert eager.median_iter_s / compiled.median_iter_s < 1.0  # 2x faster read as slower


def test_interleaved_memory_peak_leaves_out_the_other_arm():
    cpu = torch.device("cpu")
    big = lambda: torch.ones(96 * 1024 * 1024).sum()  # noqa: E731 - 384 MiB, touched and freed
    small = lambda: torch.ones(1024).sum()  # noqa: E731
    peaks = {"small": 0.0, "big": 0.0}

    def tracked(name: str, fn) -> Arm:
        mem = MemoryTracker(cpu)
        def after() -> None:
            peaks[name] = max(peaks[name], mem.peak_gib())
        return Arm(fixed_window(fn, cpu, 2), 2, mem.reset, after)

    run_interleaved([Arm(fixed_window(big, cpu, 2), 2), tracked("small", small), tracked("big", big)], windows=3)
    assert peaks["big"] - peaks["small"] > 0.3  # each arm's peak is reset before its own window


def test_cpu_memory_tracker_sees_a_big_allocation():
    mem = MemoryTracker(torch.device("cpu"))
    mem.reset()
    before = mem.peak_gib()
    x = torch.ones(64 * 1024 * 1024)  # 256 MiB, touched
    after = mem.peak_gib()
    del x
    assert after - before > 0.2
    assert mem.peak_reserved_gib() is None


def test_compare_reports_relative_and_absolute_error():
    ref = [torch.ones(10), torch.arange(4.0)]
    assert compare(ref, [t.clone() for t in ref]) == (0.0, 0.0)
    max_abs, rel = compare(ref, [torch.ones(10) * 1.1, torch.arange(4.0)])
    assert max_abs == pytest.approx(0.1) and rel == pytest.approx(0.1)
    assert compare(ref, [torch.full((10,), float("nan")), ref[1]]) == (math.inf, math.inf)
    assert compare(ref, [torch.ones(11), ref[1]])[1] == math.inf


def test_tolerances_by_precision():
    assert default_tolerance("bf16", "high") > default_tolerance("fp32", "high") > default_tolerance("fp32", "highest")
