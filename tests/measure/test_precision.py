"""How precisely a timed arm's median is known, and the rounds a precision target adds: a
launch-bound step whose windows spread gets more of them, a steady one does not."""

from __future__ import annotations

import itertools
import math

import pytest

from sweeper.measure import matching, witness
from sweeper.measure.timing import Arm


def test_the_median_error_follows_the_windows_spread_and_their_number():
    se = matching.median_se_pct([1.0, 2.0, 3.0, 4.0, 5.0])  # median 3, MAD 1
    assert se == pytest.approx(1.2533 * 1.4826 / math.sqrt(5) / 3 * 100)
    assert matching.median_se_pct([1.0] * 8 + [9.0]) == 0.0  # one outlier does not move it
    assert matching.median_se_pct([1.0, 2.0]) is None
    wide = [1.0, 1.3] * 10
    assert matching.median_se_pct(wide * 4) == pytest.approx(matching.median_se_pct(wide) / 2)


def test_the_default_target_is_for_gpus_and_zero_turns_it_off():
    assert matching.target_se_pct(None, "cuda") == matching.DEFAULT_GPU_TARGET_SE_PCT
    assert matching.target_se_pct(None, "cpu") is None
    assert matching.target_se_pct(0.0, "cuda") is None and matching.target_se_pct(1.0, "cpu") == 1.0


def _noisy_arm(values) -> Arm:
    it = itertools.cycle(values)
    return Arm(lambda: [next(it)] * 2, 2)


@pytest.fixture
def fast_host(monkeypatch, tmp_path):
    monkeypatch.setattr(witness, "HOST_FILE", tmp_path / "fast_ms")
    witness.record_host_fast_ms(1.0)
    monkeypatch.setattr(witness, "probe_ms", lambda: 1.0)  # every window at the fast state


def test_a_spread_arm_is_timed_until_its_median_is_precise_enough_and_a_steady_one_is_not(fast_host):
    steady = [_noisy_arm([0.01]), _noisy_arm([0.004])]
    m = matching.run_matched(steady, windows=5, target_pct=2.5)
    assert len(m.arms[0].window_s) == 5  # nothing to add
    spread = [_noisy_arm([0.010, 0.012, 0.009, 0.013, 0.010, 0.011]), _noisy_arm([0.004])]
    m = matching.run_matched(spread, windows=5, target_pct=2.5)
    timed = len(m.arms[0].window_s)
    assert 5 < timed <= 5 * (1 + matching.PRECISION_ROUNDS)
    assert m.se_pct(0) <= 2.5 or timed == 5 * (1 + matching.PRECISION_ROUNDS)
    assert m.row(["eager_", ""])["eager_median_se_pct"] == pytest.approx(m.se_pct(0))
    untargeted = matching.run_matched([_noisy_arm([0.010, 0.013]), _noisy_arm([0.004])], windows=5)
    assert len(untargeted.arms[0].window_s) == 5  # without a target: the planned windows


def test_a_target_no_arm_can_reach_stops_at_the_cap(fast_host):
    arms = [_noisy_arm([0.010, 0.020, 0.005, 0.030]), _noisy_arm([0.004])]
    m = matching.run_matched(arms, windows=4, target_pct=0.1)
    assert len(m.arms[0].window_s) == 4 * (1 + matching.PRECISION_ROUNDS)
    assert m.imprecise(0.1) and not m.imprecise(None)
