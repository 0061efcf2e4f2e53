"""Progress of a running sweep, from its first second: a line when it starts (its trials, what
the cluster has, what waits and why), a line when each trial starts, one when it finishes with a
time-left estimate, and a line now and then while trials wait for resources.

The estimate prices each trial still to run by the median duration of finished trials of its
own kind (its compile mode, with or without an input stream): eager trials take seconds,
compiled ones a minute or more, so one median over whatever finished first would be wrong
by the ratio of the two until the mix evens out. A kind with no finished trial yet takes the
median of the finished compiled trials (or of all, for eager). Running trials count with what
is left of their estimate; the sum is spread over the trial slots.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sweeper.results.schema import EAGER
from sweeper.spec.trials import Trial

log = logging.getLogger("sweeper.run.ray_tune")


def kind(trial: Trial) -> str:
    return f"{trial.mode}{' stream' if trial.workload is not None else ''}"


@dataclass
class Progress:
    total: int
    slots: int
    kinds: dict[str, str] = field(default_factory=dict)
    """Trial id -> kind, for every trial of this run; empty: all of one kind."""
    started: dict[str, float] = field(default_factory=dict)
    durations: dict[str, float] = field(default_factory=dict)
    failed: int = 0

    @classmethod
    def of(cls, trials: list[Trial], slots: int) -> Progress:
        return cls(total=len(trials), slots=slots, kinds={t.trial_id: kind(t) for t in trials})

    last_wait_line: float = 0.0

    def announce(self, per_trial: dict[str, float], concurrent: int | None, cluster: dict[str, float],
                 free: dict[str, float]) -> None:
        """The sweep's first line: how many trials, what each holds, what the cluster has, and
        how many start at once (the others wait: for a slot, or for resources)."""
        fits = _fits(per_trial, free)
        now = min(fits, concurrent or fits, self.total)
        limit = f"at most {concurrent} at a time" if concurrent else "as many at a time as the cluster holds"
        why = ("" if now >= self.total else
               f"; {self.total - now} wait for a free slot ({limit})" if now else
               "; none fits in what is free now: they wait for the cluster (or its autoscaler) to free or add it")
        log.info("starting %d trials, each holding %s; cluster: %s (free now: %s); %d start now%s", self.total,
                 _resources_text(per_trial), _resources_text(cluster), _resources_text(free), now, why)
        self.last_wait_line = time.monotonic()

    def waiting(self, pending: int, per_trial: dict[str, float], free: Callable[[], dict[str, float]],
                every_s: float = 60.0, now: float | None = None) -> None:
        """While trials wait and none runs, a line every `every_s` seconds saying what they wait for
        (`free` asks the cluster what is free, only when a line is due)."""
        now = time.monotonic() if now is None else now
        if pending and self.wait_line_due(every_s, now):
            self.last_wait_line = now
            log.info("%d trials waiting for resources: each needs %s, free now: %s", pending,
                     _resources_text(per_trial), _resources_text(free()))

    def wait_line_due(self, every_s: float = 60.0, now: float | None = None) -> bool:
        """Whether `waiting` would print now (were trials waiting): cheap, so callers can skip counting them."""
        now = time.monotonic() if now is None else now
        return not self.started and now - self.last_wait_line >= every_s

    def start(self, tid: str, label: str | None = None, now: float | None = None) -> None:
        self.started[tid] = time.monotonic() if now is None else now
        if label is not None:
            log.info("started %s | %d running", label, len(self.started))

    def finish(self, tid: str, label: str, row: dict[str, Any], now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self.durations[tid] = now - self.started.pop(tid, now)
        self.failed += row["status"] != "ok"
        if not log.isEnabledFor(logging.INFO):
            return  # the estimate below walks every trial: 2,000 finishes would cost seconds for no line
        status = row["status"] if row["status"] == "ok" else f"{row['status'].upper()}"
        speed = row.get("speedup_vs_eager")
        extra = f" speedup {speed:.2f}x" if isinstance(speed, float) else ""
        log.info("[%d/%d] %-13s %s%s | %d running, %d failed, ~%s left", len(self.durations), self.total,
                 status, label, extra, len(self.started), self.failed, fmt_s(self.eta_s(now)))

    def _estimator(self) -> Callable[[str | None], float]:
        """Seconds to expect from a trial of a kind, from the trials finished so far."""
        by_kind: dict[str | None, list[float]] = {}
        for tid, d in self.durations.items():
            by_kind.setdefault(self.kinds.get(tid), []).append(d)
        medians = {k: statistics.median(ds) for k, ds in by_kind.items()}
        everything = list(self.durations.values())
        compiled = [d for k, ds in by_kind.items() if not _is_eager(k) for d in ds] or everything
        for_eager = statistics.median(everything) if everything else 0.0
        for_compiled = statistics.median(compiled) if compiled else 0.0

        def estimate(k: str | None) -> float:
            if k in medians:
                return medians[k]
            return for_eager if _is_eager(k) else for_compiled
        return estimate

    def eta_s(self, now: float | None = None) -> float:
        """Seconds until the last trial ends, by the estimate described above."""
        now = time.monotonic() if now is None else now
        left = self.total - len(self.durations)
        if left <= 0:
            return 0.0
        estimate = self._estimator()
        pending = [tid for tid in self.kinds if tid not in self.durations and tid not in self.started]
        work = sum(max(0.0, estimate(self.kinds.get(tid)) - (now - t0)) for tid, t0 in self.started.items())
        work += sum(estimate(self.kinds[tid]) for tid in pending)
        unknown = left - len(self.started) - len(pending)  # trials this Progress was not told about
        work += max(0, unknown) * estimate(None)
        return work / max(1, min(self.slots, left))


_RESOURCE_NAMES = {"cpu": "CPU", "gpu": "GPU"}


def _fits(per_trial: dict[str, float], free: dict[str, float]) -> int:
    """How many trials the free resources hold at once (Tune's lower-case names or Ray's)."""
    needs = {_RESOURCE_NAMES.get(k, k): v for k, v in per_trial.items() if v}
    return int(min((free.get(k, 0.0) // v for k, v in needs.items()), default=0))


def _resources_text(resources: dict[str, float]) -> str:
    named = {_RESOURCE_NAMES.get(k, k): v for k, v in resources.items()}
    return ", ".join(f"{named.get(k, 0):g} {k}{'' if named.get(k, 0) == 1 else 's'}" for k in ("CPU", "GPU"))


def _is_eager(k: str | None) -> bool:
    return k is not None and k.startswith(EAGER)


def fmt_s(s: float) -> str:
    return f"{s / 60:.0f}m{s % 60:02.0f}s" if s >= 60 else f"{s:.0f}s"
