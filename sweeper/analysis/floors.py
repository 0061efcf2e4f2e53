"""The least half-widths of reported speedup intervals, measured between runs, and a host profile's
own (`sweeper calibrate`) in their place: what `sweeper.analysis.drift` widens intervals and drift
limits to."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

STABLE_SPREAD_PCT = 5.0
"""A baseline whose timed windows spread less than this ((max - min) / median) is stable."""
RUN_TO_RUN_FLOOR = 0.04
"""Least half-width of the reported interval of any compiled row, as a fraction: the largest
difference between two runs' speedups of one setting whose eager windows held still, measured
on 2x H200 (the truth study's README; `sweeper calibrate` measures a host of your own)."""
UNSTABLE_BASELINE_FLOOR = 0.09
"""The same over an unstable baseline (eager windows spread STABLE_SPREAD_PCT or more)."""


@dataclass(frozen=True)
class Floors:
    """The least half-widths of reported intervals, as fractions, and where they were measured."""

    run_to_run: float = RUN_TO_RUN_FLOOR
    unstable_baseline: float = UNSTABLE_BASELINE_FLOOR
    source: str = "measured on 2x H200 (studies/truth/results)"


_floors = [Floors()]


def floors() -> Floors:
    """The floors in force: a host profile's, inside `host_floors`, else the module's."""
    return _floors[-1]


def read_profile(path: Path) -> Floors:
    """The floors of a host profile written by `sweeper calibrate` (ValueError naming the file)."""
    try:
        data = json.loads(Path(path).read_text())
        return Floors(float(data["run_to_run_floor"]), float(data["unstable_baseline_floor"]),
                      f"host profile {path} ({data.get('hostname', '?')}, {data.get('measured_at', '?')})")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"host profile {path} is not readable: {e}") from e


@contextlib.contextmanager
def host_floors(profile: Floors | None) -> Iterator[None]:
    """Use a host profile's floors for the analysis inside the block (None: the module's)."""
    _floors.append(profile or _floors[0])
    try:
        yield
    finally:
        _floors.pop()
