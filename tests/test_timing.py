"""Trackers and accuracy helpers, without compiling anything."""

from __future__ import annotations

import math

import pytest
import torch

from sweeper.health import compare, default_tolerance
from sweeper.timing import MemoryTracker, WindowStats, calibrate, run_windows


def test_window_stats_percentiles_and_throughput():
    stats = WindowStats(window_s=[1.0, 2.0, 1.5, 1.2, 1.8], iter_s=[i / 100 for i in range(1, 101)],
                        iters_per_window=10)
    assert stats.median_iter_s == pytest.approx(0.15)
    assert stats.throughput(items_per_iter=30) == pytest.approx(200.0)
    assert stats.percentile_ms(50) == pytest.approx(500.0)
    assert stats.percentile_ms(99) == pytest.approx(990.0)
    assert stats.spread_pct == pytest.approx((0.2 - 0.1) / 0.15 * 100)


def test_calibrate_meets_time_and_iteration_floors():
    calls = []
    fn = lambda: calls.append(sum(range(20000)))  # noqa: E731
    iters = calibrate(fn, torch.device("cpu"), warmup_iters=3, min_iters=4, min_window_s=0.05)
    assert len(calls) == 3 and iters >= 4
    stats = run_windows(fn, torch.device("cpu"), windows=5, iters=iters)
    assert len(stats.window_s) == 5 and len(stats.iter_s) == 5 * iters
    assert min(stats.window_s) >= 0.02  # the time floor, loosely (calibrated from warm-up)


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
