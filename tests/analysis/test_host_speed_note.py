"""The speedup at the host's two CPU speeds, as recommend says it: both where they differ beyond the
interval, and a warning where the trial never saw the fast state."""

from __future__ import annotations

from sweeper.analysis.ranking import host_speed_note

ROW = {"mode": "reduce-overhead", "speedup_vs_eager": 2.4, "speedup_low": 2.2, "speedup_high": 2.6,
       "speedup_slow": 1.6, "slow_windows_pct": 40.0, "host_state": "fast"}


def test_the_slow_states_speedup_is_said_beside_the_headline_where_it_lies_outside_the_interval():
    assert host_speed_note(ROW) == "2.4x at full CPU speed, 1.6x when this host's CPUs ran slow (40% of its windows)"
    assert host_speed_note({**ROW, "speedup_slow": 2.5}) == ""  # inside the interval: one speed as far as we can tell
    assert host_speed_note({**ROW, "speedup_slow": None}) == ""  # too few slow pairs to say
    assert host_speed_note({**ROW, "mode": "eager"}) == ""
    assert host_speed_note({**ROW, "host_state": "steady"}) == ""  # its steps were shown not to follow the host


def test_a_trial_that_never_saw_the_fast_state_says_its_headline_is_the_slow_states():
    note = host_speed_note({**ROW, "host_state": "slow", "slow_windows_pct": 98.0, "speedup_vs_eager": 10.7})
    assert note.startswith("measured while this host's CPUs ran slow (98% of its windows): 10.7x is the slow")
