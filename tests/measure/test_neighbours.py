"""Neighbour compiles, measured: a live neighbour's compile marker is seen and a dead one's is not, and
a row says in how many windows a neighbour compiled."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sweeper.measure import neighbours
from sweeper.measure import process as measure
from sweeper.spec.sweep_spec import parse_spec
from sweeper.spec.trials import Trial, expand
from tests.helpers import tiny_spec


def _trial(**overrides) -> tuple[Trial, Trial]:
    trials, _ = expand(parse_spec(tiny_spec(**overrides)))
    return tuple(sorted(trials, key=lambda t: t.mode != "eager"))  # (eager, compiled)


def test_a_live_neighbours_compile_marker_is_seen_and_a_dead_ones_is_not(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / str(sleeper.pid)).touch()
        (tmp_path / str(os.getpid())).touch()  # our own marker is not a neighbour
        assert neighbours.neighbours_compiling(tmp_path) == 1
        busy = neighbours.BusyWindows(tmp_path)
        busy.before()
        busy.after()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert neighbours.neighbours_compiling(tmp_path) == 0  # its marker stays, its process is gone
    busy.before()
    busy.after()
    assert busy.busy_pct == 50.0
    with neighbours.compile_marker(tmp_path):
        assert (tmp_path / str(os.getpid())).exists()
    assert not (tmp_path / str(os.getpid())).exists()


@pytest.mark.slow
def test_row_says_how_many_windows_a_neighbour_compiled_in(tmp_path, monkeypatch):
    eager, _ = _trial()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    monkeypatch.setattr(neighbours, "MARKER_DIR", tmp_path)
    try:
        quiet = measure.run({"trial": eager.to_dict(), "device": "cpu"}, tmp_path / "a.json")
        (tmp_path / str(sleeper.pid)).touch()
        busy = measure.run({"trial": eager.to_dict(), "device": "cpu"}, tmp_path / "b.json")
    finally:
        sleeper.kill()
        sleeper.wait()
    assert quiet["host_busy_windows_pct"] == 0.0 and busy["host_busy_windows_pct"] == 100.0
    assert busy["cpu_count"] == len(os.sched_getaffinity(0))
