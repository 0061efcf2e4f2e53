"""A trial's own CPUs: slots take whole physical cores, concurrent holders get disjoint slots, and a
pinned trial measures on its own CPUs."""

from __future__ import annotations

import os
import threading
import time

import pytest

from sweeper.run import cpus, isolate
from sweeper.spec.sweep_spec import parse_spec
from sweeper.spec.trials import Trial, expand
from tests.helpers import tiny_spec


def _trial(**overrides) -> tuple[Trial, Trial]:
    trials, _ = expand(parse_spec(tiny_spec(**overrides)))
    return tuple(sorted(trials, key=lambda t: t.mode != "eager"))  # (eager, compiled)


def test_slots_take_whole_physical_cores():
    smt = [[c, c + 8] for c in range(8)]  # 8 cores, 2 threads each: siblings 0/8, 1/9, ...
    assert cpus.slot_cpus(smt, 8, 0) == [0, 8, 1, 9, 2, 10, 3, 11]
    assert cpus.slot_cpus(smt, 8, 1) == [4, 12, 5, 13, 6, 14, 7, 15]
    assert cpus.slot_count(smt, 8) == 2 and cpus.slot_count(smt, 5) == 2  # 5 CPUs: 3 whole cores
    assert cpus.slot_count([[0], [1]], 1) == 2
    from sweeper.envinfo import format_cpus

    assert format_cpus([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert all(sum(map(len, cpus.physical_cores())) == len(os.sched_getaffinity(0)) for _ in [0])


def test_concurrent_holders_get_disjoint_slots_and_a_third_runs_unpinned(tmp_path, monkeypatch):
    monkeypatch.setattr(cpus, "SLOT_DIR", tmp_path)
    monkeypatch.setattr(cpus, "physical_cores", lambda: [[0], [1]])
    got: list[list[int] | None] = []
    release = threading.Event()

    def hold():
        with cpus.cpu_slot(1) as mine:
            got.append(mine)
            release.wait(5)

    holders = [threading.Thread(target=hold) for _ in range(2)]
    for h in holders:
        h.start()
    while len(got) < 2:
        time.sleep(0.01)
    with cpus.cpu_slot(1, wait_s=0.3) as third:
        assert third is None
    release.set()
    for h in holders:
        h.join()
    assert sorted(got) == [[0], [1]]
    with cpus.cpu_slot(1) as again:  # released with their holders
        assert again == [0]


@pytest.mark.slow
def test_a_pinned_trial_measures_on_its_own_cpus():
    eager, _ = _trial()
    payload = {"trial": eager.to_dict(), "device": "cpu", "pin_cpus": 1}
    row = isolate.run_trial(payload, max_retries=0)
    assert row["status"] == "ok", row["error"]
    assert row["cpus_pinned"] is True and row["cpu_count"] == 1
    assert row["cpu_affinity"] in {str(c) for c in os.sched_getaffinity(0)}
