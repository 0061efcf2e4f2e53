"""A speedup's interval from paired eager and compiled windows: it holds the speedup, a shared
slowdown cancels, and it is never narrower than its floor."""

from __future__ import annotations

import random

import pytest

from sweeper.measure.timing import WindowStats, paired_interval


def _stats(per_iter_s: list[float], iters: int = 10) -> WindowStats:
    return WindowStats([t * iters for t in per_iter_s], [t for t in per_iter_s for _ in range(iters)], iters)


def test_interval_holds_the_speedup_and_narrows_with_stable_windows():
    rng = random.Random(1)
    noisy = [1.0 + 0.3 * rng.random() for _ in range(16)]  # a launch-bound eager step: +-30% between windows
    eager = _stats([2.0 * x for x in noisy])
    compiled = _stats([1.0 * (1 + 0.01 * rng.random()) for _ in range(16)])
    low, high = paired_interval(eager, compiled)
    point = statistics_ratio(eager, compiled)
    assert low <= point <= high
    assert low > 1.9 and high < 2.8
    steady = paired_interval(_stats([2.0] * 16), _stats([1.0] * 16))
    assert steady == pytest.approx((2.0, 2.0))
    assert (high - low) > 10 * (steady[1] - steady[0] + 1e-9)


def test_interval_pairs_windows_so_a_shared_slowdown_cancels():
    slow = [1.0] * 8 + [3.0] * 8  # the host slows halfway, for both arms alike
    low, high = paired_interval(_stats([2 * s for s in slow]), _stats(slow))
    assert low == pytest.approx(2.0, rel=0.35) and high == pytest.approx(2.0, rel=0.35)


def statistics_ratio(eager: WindowStats, compiled: WindowStats) -> float:
    return eager.median_iter_s / compiled.median_iter_s


def test_the_in_trial_interval_is_never_narrower_than_its_floor():
    from sweeper.measure.timing import IN_TRIAL_FLOOR, speedup_interval

    low, high = speedup_interval(_stats([2.0] * 16), _stats([1.0] * 16))
    assert (low, high) == pytest.approx((2.0 * (1 - IN_TRIAL_FLOOR), 2.0 * (1 + IN_TRIAL_FLOOR)))
    rng = random.Random(3)
    wide = speedup_interval(_stats([2.0 * (1 + 0.5 * rng.random()) for _ in range(16)]), _stats([1.0] * 16))
    assert wide[1] - wide[0] > 4 * IN_TRIAL_FLOOR * 2.0  # noisy windows keep their own, wider interval
