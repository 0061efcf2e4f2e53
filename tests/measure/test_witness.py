"""The host-speed witness and the matching of alternated windows by host state: the probe, the
host's recorded fast state, which pairs a headline uses, the extra rounds a slow stretch gets,
and a warm-up that holds one output at a time (its peak is a user's loop's)."""

from __future__ import annotations

import gc
import itertools
import json
import statistics
import subprocess
import sys
import weakref

import pytest
import torch

from sweeper.measure import matching, timing, witness
from sweeper.measure.neighbours import BusyWindows
from sweeper.measure.timing import Arm, WindowStats


def test_the_probe_times_a_fixed_piece_of_cpu_work():
    readings = [witness.probe_ms() for _ in range(5)]
    assert all(r > 0 for r in readings)


def test_a_process_lowers_its_own_entry_and_a_slow_process_is_judged_by_the_host(tmp_path):
    path = tmp_path / "fast_ms"
    assert witness.host_fast_ms(path) is None
    witness.record_host_fast_ms(2.0, path)
    witness.record_host_fast_ms(3.0, path)  # slower than this process's own: not recorded
    assert witness.host_fast_ms(path) == 2.0
    # a process that ran slow throughout is judged by the host's fast state, not its own
    assert witness.reference_ms([3.2, 3.3, 3.1, 3.4, 3.2], path) == 2.0
    assert witness.reference_ms([1.0] * 5, path) == 1.0 and witness.host_fast_ms(path) == 1.0


def test_the_host_fast_state_is_the_median_of_recent_processes_not_one_flukes_low(tmp_path):
    """On an H100 host the trials' windows read 1.16-1.48 ms (their 10% quantiles) and one trial's
    first readings 0.94 ms; the lowest-ever reference then called every later window slow (8 of 20
    trials ran to the window cap). The median of the latest processes keeps 1.3 ms."""
    path, now = tmp_path / "fast_ms", 1000.0
    for pid, ms in enumerate([1.48, 1.29, 0.94, 1.30, 1.27, 1.32], start=100):
        witness.record_host_fast_ms(ms, path, pid=pid, now=now + pid)
    assert witness.host_fast_ms(path, now=now + 200) == pytest.approx(1.295)
    assert not witness.is_slow(1.40, witness.host_fast_ms(path, now=now + 200))
    # only the latest HOST_PROCESSES count, and none older than HOST_MEMORY_S
    for pid in range(200, 200 + witness.HOST_PROCESSES):
        witness.record_host_fast_ms(1.0, path, pid=pid, now=now + pid)
    assert witness.host_fast_ms(path, now=now + 300) == 1.0
    assert witness.host_fast_ms(path, now=now + 300 + witness.HOST_MEMORY_S) is None
    path.write_text("0.95\n")  # the older one-number format does not count
    assert witness.host_fast_ms(path) is None


def _stats(per_iter: list[float], readings: list[float]) -> WindowStats:
    return WindowStats([2 * x for x in per_iter], [x for x in per_iter for _ in range(2)], 2, readings)


def test_the_headline_compares_only_pairs_that_ran_fast_and_the_slow_pairs_give_the_slow_speedup():
    fast, slow = 1.0, 1.6
    states = [fast, fast, slow, fast, slow, fast, fast, slow, fast, fast]
    # eager is launch-bound (1.6x slower in the slow state); the compiled arm replays graphs (steady)
    eager = _stats([10.0 * s for s in states], states)
    compiled = _stats([4.0] * 10, states)
    m = matching.Matched.of([eager, compiled], ref_ms=fast)
    assert m.state == "fast" and m.fast == [0, 1, 3, 5, 6, 8, 9] and m.slow == [2, 4, 7]
    assert matching.speedup(m.headline(0), m.headline(1)) == pytest.approx(2.5)
    assert matching.speedup(*matching.slow_arms(m)) == pytest.approx(4.0)
    assert matching.speedup(*m.arms) == pytest.approx(2.5)  # the median: 7 of 10 fast
    assert m.slow_windows_pct == pytest.approx(30.0)
    row = m.row(["eager_", ""])
    assert row["matched_pairs"] == 7 and row["timed_windows"] == 10 and row["host_state"] == "fast"


def test_a_pair_with_one_slow_window_counts_for_neither_state():
    eager = _stats([1.0] * 6, [1.0, 1.0, 2.0, 1.0, 1.0, 2.0])
    compiled = _stats([1.0] * 6, [1.0, 2.0, 2.0, 1.0, 1.0, 1.0])
    m = matching.Matched.of([eager, compiled], ref_ms=1.0)
    assert m.fast == [0, 3, 4] and m.slow == [2]
    assert m.state == "slow" and m.headline(0) is eager  # too few fast pairs: every pair, said so
    assert matching.slow_arms(m) is None


def test_a_pair_timed_while_a_neighbour_compiled_is_not_fast_and_does_not_make_the_reference(monkeypatch, tmp_path):
    """On one H100 two trials sharing the GPU timed a launch-bound eager step 1.5-1.7x slower while
    the other compiled on its own CPUs; the witness read 2.2-2.6 ms against 1.4-1.6 ms, yet most such
    windows judged fast (by a reference made of them too): reduce-overhead's speedups came out 15-54% high."""
    monkeypatch.setattr(witness, "HOST_FILE", tmp_path / "fast_ms")
    quiet, busy = 1.0, 1.15  # the witness reads the neighbour's compile in part: under SLOW_FACTOR
    flags = [False, True, True, False, True, False, False, True, False, False]
    readings = [busy if b else quiet for b in flags]
    eager = _stats([15.0 if b else 10.0 for b in flags], readings)
    compiled = _stats([4.0] * 10, readings)
    eager.busy, compiled.busy = flags, [False] * 10  # either window of a pair makes it busy
    m = matching.Matched.of([eager, compiled])
    assert m.fast == [0, 3, 5, 6, 8, 9] and m.state == "fast"
    assert m.ref_ms == pytest.approx(quiet)  # the quiet windows' readings, not the busy ones'
    assert matching.speedup(m.headline(0), m.headline(1)) == pytest.approx(2.5)  # 3.75 in the busy pairs
    assert m.busy_pairs == [1, 2, 4, 7] == json.loads(m.row(["eager_", ""])["windows_json"])["busy_pairs"]
    unwatched = _stats([15.0 if b else 10.0 for b in flags], readings)  # no neighbour watch: as before
    assert len(matching.Matched.of([unwatched, _stats([4.0] * 10, readings)], ref_ms=quiet).fast) == 10


def test_interleaved_windows_say_which_ran_while_a_neighbour_compiled(tmp_path):
    neighbour = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        watch = BusyWindows(tmp_path)
        marks = iter([True, False, False, True])  # before window 1 and 4: a neighbour's compile marker

        def before() -> None:
            marker = tmp_path / str(neighbour.pid)
            if next(marks):
                marker.touch()
            else:
                marker.unlink(missing_ok=True)
            watch.before()
        arm = Arm(lambda: [0.001], 1, before, watch.after, busy=lambda: watch.last)
        stats = timing.run_interleaved([arm], 4)[0]
    finally:
        neighbour.kill()
        neighbour.wait()
    assert stats.busy == [True, False, False, True] and watch.busy_pct == 50.0
    assert stats.subset([0, 1]).busy == [True, False] and stats.extended(stats).busy == stats.busy * 2


class _Host:
    """A scripted host: the probe reads its state, and a window's step time follows it."""

    def __init__(self, states):
        self.states = itertools.chain(states, itertools.repeat(1.0))
        self.now = 1.0

    def probe(self) -> float:
        self.now = next(self.states)
        return self.now

    def arm(self, step_s: float, launch_bound: bool) -> Arm:
        return Arm(lambda: [step_s * (self.now if launch_bound else 1.0)] * 2, 2)


def test_a_slow_stretch_gets_more_rounds_until_enough_pairs_ran_fast(monkeypatch, tmp_path):
    monkeypatch.setattr(witness, "HOST_FILE", tmp_path / "fast_ms")
    witness.record_host_fast_ms(1.0)
    host = _Host([1.6] * 12)  # the first 12 readings slow, then fast
    monkeypatch.setattr(witness, "probe_ms", host.probe)
    m = matching.run_matched([host.arm(0.01, True), host.arm(0.004, False)], windows=5)
    assert len(m.fast) >= 5 and len(m.arms[0].window_s) <= 15
    assert matching.speedup(m.headline(0), m.headline(1)) == pytest.approx(2.5)


def test_the_extra_rounds_are_bounded_when_the_host_stays_slow(monkeypatch, tmp_path):
    monkeypatch.setattr(witness, "HOST_FILE", tmp_path / "fast_ms")
    witness.record_host_fast_ms(1.0)
    host = _Host([1.6] * 1000)
    monkeypatch.setattr(witness, "probe_ms", host.probe)
    m = matching.run_matched([host.arm(0.01, True), host.arm(0.004, False)], windows=5)
    assert len(m.arms[0].window_s) == 5 * (1 + matching.EXTRA_ROUNDS)
    assert m.state == "slow" and m.slow_windows_pct == 100.0


def test_a_trial_that_times_at_any_host_speed_gets_no_rounds_for_the_slow_state(monkeypatch, tmp_path):
    """On the CPU (no wait allowed: both arms slow alike) a slow host adds no windows; the rows
    still say the state they ran in."""
    monkeypatch.setattr(witness, "HOST_FILE", tmp_path / "fast_ms")
    witness.record_host_fast_ms(1.0)
    host = _Host([1.6] * 1000)
    monkeypatch.setattr(witness, "probe_ms", host.probe)
    m = matching.run_matched([host.arm(0.01, True), host.arm(0.004, False)], windows=5, fast_rounds=False)
    assert len(m.arms[0].window_s) == 5 and m.state == "slow"


def test_the_warm_up_holds_one_output_at_a_time_as_a_users_loop_does():
    live, most = set(), [0]

    class Output:
        pass

    def step():
        gc.collect()
        out = Output()
        live.add(id(out))
        weakref.finalize(out, live.discard, id(out))
        most[0] = max(most[0], len(live))
        return out

    timing.calibrate(step, torch.device("cpu"), warmup_iters=6, min_iters=6, min_window_s=1e-6)
    assert most[0] <= 2  # the new output, and at most the one still being dropped


def test_the_gate_waits_for_the_fast_state_and_stops_waiting_when_its_allowance_is_spent(monkeypatch, tmp_path):
    monkeypatch.setattr(witness, "HOST_FILE", tmp_path / "fast_ms")
    monkeypatch.setattr(matching, "GATE_PAUSE_S", 0.0)
    host = _Host([1.6] * 5 + [1.0] + [1.6] * 10**6)
    monkeypatch.setattr(witness, "probe_ms", host.probe)
    gate = matching.HostGate(wait_s=0.5, ref_ms=1.0)
    assert gate() == 1.0 and gate.waited_s > 0  # five slow readings, then a fast one
    assert gate() == 1.6 and gate.left_s == 0.0  # slow until the allowance ran out: the round goes on


def test_gated_rounds_are_timed_at_the_fast_state(monkeypatch, tmp_path):
    monkeypatch.setattr(witness, "HOST_FILE", tmp_path / "fast_ms")
    monkeypatch.setattr(matching, "GATE_PAUSE_S", 0.0)
    witness.record_host_fast_ms(1.0)
    pattern = itertools.cycle([1.6, 1.6, 1.6, 1.0, 1.0, 1.0])  # slow and fast stretches
    monkeypatch.setattr(witness, "probe_ms", lambda: next(pattern))
    host = _Host([])
    host.probe = lambda: 1.0
    m = matching.run_matched([Arm(lambda: [0.01, 0.01], 2), Arm(lambda: [0.004, 0.004], 2)], windows=5, wait_s=5.0)
    assert m.waited_s > 0 and m.row(["eager_", ""])["host_wait_s"] == m.waited_s


def test_the_default_wait_is_for_gpus_only():
    assert matching.wait_allowance_s(None, "cuda") == matching.DEFAULT_GPU_WAIT_S
    assert matching.wait_allowance_s(None, "cpu") == 0.0 and matching.wait_allowance_s(3.0, "cpu") == 3.0


class _Clock:
    """A clock each witness reading advances by what the reading says (ms) plus the gate's pause."""

    def __init__(self, readings: list[float]):
        self.now, self.readings = 0.0, iter(readings)

    def probe(self) -> float:
        ms = next(self.readings)
        self.now += ms / 1e3
        return ms

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def test_a_hosts_first_gate_surveys_the_witness_so_a_slow_start_is_not_its_fast_state(monkeypatch, tmp_path):
    monkeypatch.setattr(witness, "HOST_FILE", tmp_path / "fast_ms")
    # a slow stretch of 100 readings (about 1.2 s with the gate's pauses: well past ten readings), then fast
    clock = _Clock([1.6] * 100 + [1.0] * 10**5)
    monkeypatch.setattr(witness, "probe_ms", clock.probe)
    monkeypatch.setattr(matching, "time", clock)
    gate = matching.HostGate(wait_s=0.0)
    assert gate.ref_ms == 1.0 and clock.now >= matching.SURVEY_S  # ten readings would have said 1.6
    assert witness.host_fast_ms() is None  # idle readings run lower than windows': never recorded
    witness.record_host_fast_ms(1.2)  # a trial's windows, recorded: later gates judge by them at once
    before = clock.now
    assert matching.HostGate(wait_s=0.0).ref_ms == 1.2 and clock.now - before < 0.1


def test_a_trial_whose_steps_do_not_follow_the_host_state_is_steady_and_gets_no_rounds_for_it(monkeypatch, tmp_path):
    """A GPU-bound step waits for the GPU at either CPU speed: windows that read slow took as long as
    fast ones, so every pair counts and half the windows reading slow adds no rounds (on the H100
    yardstick a resnet50 eager trial timed 96 windows whose steps lay within 0.2%)."""
    monkeypatch.setattr(witness, "HOST_FILE", tmp_path / "fast_ms")
    witness.record_host_fast_ms(1.0)
    host = _Host(([1.0] * 6 + [1.6] * 6) * 1000)  # slow and fast stretches: half the windows read slow
    monkeypatch.setattr(witness, "probe_ms", host.probe)
    m = matching.run_matched([host.arm(0.01, False), host.arm(0.004, False)], windows=8)
    assert m.state == "steady" and len(m.arms[0].window_s) == 8 and m.headline_pairs == list(range(8))
    assert m.row(["eager_", ""])["matched_pairs"] == 8
    launch_bound = matching.run_matched([host.arm(0.01, True), host.arm(0.004, False)], windows=8)
    assert launch_bound.state != "steady" and len(launch_bound.arms[0].window_s) > 8


def test_an_arm_is_unmoved_by_the_host_only_when_its_states_are_shown_to_agree():
    states = [1.0, 1.6] * 6
    assert not matching.unmoved_by_host(_stats([10.0 * s for s in states], states), 1.0)  # follows
    assert matching.unmoved_by_host(_stats([10.0] * 12, states), 1.0)
    assert matching.unmoved_by_host(_stats([10.0, 10.01, 9.99, 10.0] * 3, states), 1.0)  # within 1%, precisely
    spread = [10.0, 10.9, 9.3, 10.4, 9.6, 11.0] * 2  # agree on the median, but too spread to tell
    assert not matching.unmoved_by_host(_stats(spread, states), 1.0)
    assert not matching.unmoved_by_host(_stats([10.0] * 12, [1.0] * 10 + [1.6] * 2), 1.0)  # two slow windows


def test_a_gate_waits_for_the_hosts_fast_state_not_a_fluke_of_its_first_readings(monkeypatch, tmp_path):
    """On the H100 host one trial's ten start readings came out at 0.94 ms against 1.1-1.5 ms in the
    other processes: judged by them, its gate waited its whole allowance for a state the host never
    showed again."""
    monkeypatch.setattr(witness, "HOST_FILE", tmp_path / "fast_ms")
    for pid, ms in enumerate([1.29, 1.30, 1.27, 1.32], start=100):
        witness.record_host_fast_ms(ms, pid=pid)
    clock = _Clock([0.94] * 10 + [1.35] * 10**5)
    monkeypatch.setattr(witness, "probe_ms", clock.probe)
    monkeypatch.setattr(matching, "time", clock)
    gate = matching.HostGate(wait_s=30.0)
    assert gate.ref_ms == pytest.approx(1.295)  # the host's median: this process's readings take no part
    gate()
    assert gate.waited_s == 0.0  # 1.35 ms is the host's fast state


def test_the_launch_witness_is_read_before_every_window_and_kept_through_extra_rounds(monkeypatch, tmp_path):
    monkeypatch.setattr(witness, "HOST_FILE", tmp_path / "fast_ms")
    witness.record_host_fast_ms(1.0)
    host = _Host([1.6] * 4)  # two slow rounds first: extra rounds are timed
    monkeypatch.setattr(witness, "probe_ms", host.probe)
    readings = itertools.count(1)
    arms = [host.arm(0.01, True), host.arm(0.004, False)]
    arms[0].launch = lambda: float(next(readings))  # the eager arm's launch witness only
    m = matching.run_matched(arms, windows=5)
    eager = m.arms[0]
    assert eager.launch_ms == [float(k) for k in range(1, len(eager.window_s) + 1)]
    assert m.arms[1].launch_ms == []
    row = matching.Matched.row(m, ["eager_", ""])
    assert row["eager_launch_witness_ms"] == pytest.approx(statistics.median(eager.subset(m.fast).launch_ms))
    assert row["launch_witness_ms"] is None
    assert "eager_launch_ms" in json.loads(row["windows_json"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the launch witness times CUDA kernel launches")
def test_the_launch_probe_times_kernel_launches_and_leaves_the_gpu_idle():
    read = witness.launch_probe(torch.device("cuda"))
    assert read() > 0
    assert torch.cuda.current_stream().query()


def test_a_compiled_trials_eager_windows_before_its_compile_wait_briefly_and_have_no_target():
    from types import SimpleNamespace

    import torch

    from sweeper.measure import pipeline

    def rules(mode: str, part: str, device: str, host_wait_s=None):
        measure = SimpleNamespace(host_wait_s=host_wait_s, target_se_pct=None)
        wb = SimpleNamespace(trial=SimpleNamespace(mode=mode, measure=measure), device=torch.device(device))
        return pipeline._host_rules(wb, part)

    gpu_default = (matching.DEFAULT_GPU_WAIT_S, matching.DEFAULT_GPU_TARGET_SE_PCT, True)
    assert rules("eager", "eager", "cuda") == gpu_default  # the eager trial's figures
    assert rules("default", "compiled", "cuda") == gpu_default  # the alternated windows
    assert rules("default", "eager", "cuda") == (pipeline.ALONE_WAIT_S, None, True)  # before the compile
    assert rules("default", "eager", "cuda", host_wait_s=2.0) == (2.0, None, True)  # never past the spec's
    assert rules("default", "eager", "cpu") == (0.0, None, False)  # no wait on the CPU, no rounds for its state
    assert rules("default", "compiled", "cuda", host_wait_s=0.0) == (0.0, 2.5, False)  # any speed, as asked
