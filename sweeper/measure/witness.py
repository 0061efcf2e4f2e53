"""The host's CPU speed, read before every timed window: a fixed probe of tiny torch CPU ops.

A launch-bound step's time follows the speed of the host's CPUs (the dispatcher and the launch
path are CPU work), and some hosts run their CPUs at two speeds for seconds at a time. The probe
runs the same kind of work (PROBE_OPS tiny torch CPU ops) and its time says which speed the next
window ran at. A window's reading is the slower of the probes just before and just after it.

Window readings are judged against the host's fast state as windows read it: the median of the
low quantiles of window readings that the host's latest measuring processes saw (a small per-host
file, which `sweeper calibrate` can seed), or this process's own if lower. A window is slow when its
reading is over `SLOW_FACTOR` times that. Readings taken any other way (an idle process's, a single
probe's) run lower and are never recorded: against them, windows read slow by construction. The
median of recent processes, not the lowest ever: one process's fluke, or a host whose speed drifts
over minutes, must not leave every later window "slow".
"""

from __future__ import annotations

import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from sweeper.results.schema import WITNESS_SLOW_FACTOR

PROBE_OPS = 400
"""Tiny ops per probe: about 1.5 ms on a fast host core, at most ~2% of a 0.1 s window."""
SLOW_FACTOR = WITNESS_SLOW_FACTOR
"""A reading this much over the fast state is a slow window (the two states differ by ~1.6x)."""
FAST_QUANTILE = 0.2
"""A process's own fast state: this quantile of its readings (the fastest reading can be a fluke)."""
HOST_FILE = Path(tempfile.gettempdir()) / "sweeper-witness" / "window_fast_ms"
"""The fast states of the host's latest measuring processes' window readings, a line each: time, pid,
milliseconds (a new name: the older file held idle readings, which run lower)."""
HOST_MEMORY_S = 600.0
"""A process's fast state counts for the host this long after it was recorded."""
HOST_PROCESSES = 7
"""The host's fast state is the median over at most this many of its latest processes."""

_PROBE_TENSOR = torch.zeros(4)


def probe_ms() -> float:
    """Milliseconds of PROBE_OPS tiny torch CPU ops: the host's CPU speed right now."""
    t = _PROBE_TENSOR
    t0 = time.perf_counter()
    for _ in range(PROBE_OPS):
        t.add(1)
    return (time.perf_counter() - t0) * 1e3


LAUNCHES = 200
"""Kernel launches per launch probe: about 1 ms of CPU on a GPU host, its kernels a few microseconds each."""


def launch_probe(device: torch.device) -> Callable[[], float]:
    """A probe of the launch path a launch-bound step pays per kernel: milliseconds of CPU to
    enqueue LAUNCHES tiny kernels on an idle GPU, which then runs them out before the window.
    The CPU witness times the host's cores; this one also times the driver's path to the GPU."""
    g = torch.zeros(1, device=device)

    def read() -> float:
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        for _ in range(LAUNCHES):
            g.add_(1)
        ms = (time.perf_counter() - t0) * 1e3
        torch.cuda.synchronize(device)
        return ms
    return read


def _recent_entries(path: Path, now: float) -> list[tuple[float, int, float]]:
    """The host file's entries (time, pid, ms) recorded within HOST_MEMORY_S, oldest first."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    entries = []
    for line in lines:
        try:
            t, pid, ms = line.split()
            entry = (float(t), int(pid), float(ms))
        except ValueError:  # a file of an older format, or torn: it does not count
            continue
        if now - entry[0] <= HOST_MEMORY_S and entry[2] > 0:  # one written this millisecond: counts
            entries.append(entry)
    return sorted(entries)


def host_fast_ms(path: Path | None = None, now: float | None = None) -> float | None:
    """The host's fast state: the median of its latest processes' recorded ones (None: none recent)."""
    recent = _recent_entries(path or HOST_FILE, time.time() if now is None else now)[-HOST_PROCESSES:]
    return statistics.median(ms for _, _, ms in recent) if recent else None


def record_host_fast_ms(value: float, path: Path | None = None, pid: int | None = None,
                        now: float | None = None) -> None:
    """Record this process's fast state for the host, or lower it if `value` is faster (atomic replace)."""
    path = path or HOST_FILE
    pid = os.getpid() if pid is None else pid
    now = time.time() if now is None else now
    entries = _recent_entries(path, now)
    mine = [ms for _, p, ms in entries if p == pid]
    if mine and min(mine) <= value:
        return
    others = [e for e in entries if e[1] != pid][-(2 * HOST_PROCESSES):]
    kept = [*others, (now, pid, value)]
    with contextlib.suppress(OSError):  # an unwritable temp dir leaves each process its own reference
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text("".join(f"{t:.3f} {p} {ms:.6f}\n" for t, p, ms in kept))
        tmp.replace(path)


def own_fast_ms(readings: list[float]) -> float:
    """This process's fast state: the FAST_QUANTILE quantile of its readings."""
    xs = sorted(readings)
    return xs[min(len(xs) - 1, int(FAST_QUANTILE * len(xs)))]


def reference_ms(window_readings: list[float], path: Path | None = None) -> float:
    """The fast state to judge timed windows' readings by (each the slower of the probes around
    its window): the host's (`host_fast_ms`) or this process's own, whichever is faster. This
    process's own is recorded for the host's later trials."""
    own = own_fast_ms(window_readings)
    record_host_fast_ms(own, path)
    known = host_fast_ms(path)
    return own if known is None else min(own, known)


def is_slow(reading_ms: float, ref_ms: float) -> bool:
    return reading_ms > ref_ms * SLOW_FACTOR


def median_or_none(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None
