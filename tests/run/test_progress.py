"""The sweep's time-left estimate prices each trial by finished trials of its own kind."""

from __future__ import annotations

import logging

import pytest

from sweeper.run.progress import Progress, kind
from sweeper.spec.sweep_spec import parse_spec
from sweeper.spec.trials import expand
from tests.helpers import tiny_spec


def test_eager_trials_finishing_first_do_not_make_compiled_ones_look_cheap() -> None:
    # 4 eager trials of 10 s, then 4 compiled of 60 s; 2 slots
    kinds = {f"e{i}": "eager" for i in range(4)} | {f"c{i}": "default" for i in range(4)}
    p = Progress(total=8, slots=2, kinds=kinds)
    for i in range(4):
        p.start(f"e{i}", now=0.0)
        p.finish(f"e{i}", "eager", {"status": "ok"}, now=10.0)
    # nothing compiled has finished: compiled trials take the median of all finished (10 s)
    assert p.eta_s(now=10.0) == pytest.approx(4 * 10.0 / 2)
    p.start("c0", now=10.0)
    p.finish("c0", "default", {"status": "ok"}, now=70.0)
    p.start("c1", now=70.0)
    # c1 has run 30 s of its 60 s estimate; c2, c3 wait: (30 + 60 + 60) / 2
    assert p.eta_s(now=100.0) == pytest.approx(75.0)
    # the old single median (10 s, from 4 eager and 1 compiled) would have said (3 x 10) / 2 = 15 s


def test_an_unseen_compiled_kind_borrows_from_compiled_trials_not_eager() -> None:
    kinds = {"e": "eager", "d": "default", "m": "max-autotune"}
    p = Progress(total=3, slots=1, kinds=kinds)
    for tid, secs in (("e", 5.0), ("d", 50.0)):
        p.start(tid, now=0.0)
        p.finish(tid, tid, {"status": "ok"}, now=secs)
    assert p.eta_s(now=50.0) == pytest.approx(50.0)


def test_without_kinds_every_trial_counts_the_same() -> None:
    p = Progress(total=3, slots=1)
    p.start("a", now=0.0)
    p.finish("a", "a", {"status": "ok"}, now=8.0)
    assert p.eta_s(now=8.0) == pytest.approx(16.0)
    assert p.failed == 0


def test_kinds_separate_modes_and_streams() -> None:
    trials, _ = expand(parse_spec(tiny_spec()))
    assert sorted(kind(t) for t in trials) == ["default", "eager"]
    assert Progress.of(trials, slots=2).kinds == {t.trial_id: kind(t) for t in trials}


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def progress_lines():
    handler, logger = _Lines(), logging.getLogger("sweeper.run.ray_tune")
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.INFO)
    yield handler.lines
    logger.removeHandler(handler)
    logger.setLevel(old)


def test_first_line_says_what_starts_and_what_waits_for_a_slot(progress_lines) -> None:
    p = Progress(total=8, slots=2)
    p.announce({"cpu": 16, "gpu": 1}, None, {"CPU": 64.0, "GPU": 4.0}, {"CPU": 32.0, "GPU": 2.0})
    assert progress_lines == ["starting 8 trials, each holding 16 CPUs, 1 GPU; cluster: 64 CPUs, 4 GPUs (free now: "
                              "32 CPUs, 2 GPUs); 2 start now; 6 wait for a free slot (as many at a time as the "
                              "cluster holds)"]


def test_trials_that_fit_nowhere_now_say_so_then_and_while_they_wait(progress_lines) -> None:
    p = Progress(total=3, slots=1)
    p.announce({"cpu": 1, "gpu": 1}, None, {"CPU": 8.0}, {"CPU": 8.0})
    assert progress_lines[0].endswith("0 start now; none fits in what is free now: they wait for the cluster "
                                      "(or its autoscaler) to free or add it")
    asked = []
    p.waiting(3, {"cpu": 1, "gpu": 1}, lambda: asked.append(1) or {"CPU": 8.0}, every_s=60, now=p.last_wait_line + 1)
    assert len(progress_lines) == 1 and not asked  # not due yet: the cluster is not even asked
    p.waiting(3, {"cpu": 1, "gpu": 1}, lambda: {"CPU": 8.0}, every_s=60, now=p.last_wait_line + 61)
    assert progress_lines[1] == "3 trials waiting for resources: each needs 1 CPU, 1 GPU, free now: 8 CPUs, 0 GPUs"


def test_each_trial_start_is_a_line(progress_lines) -> None:
    p = Progress(total=2, slots=2)
    p.start("a", "m eager bs1 infer fp32", now=0.0)
    p.start("b", "m eager bs2 infer fp32", now=1.0)
    assert progress_lines == ["started m eager bs1 infer fp32 | 1 running",
                              "started m eager bs2 infer fp32 | 2 running"]
