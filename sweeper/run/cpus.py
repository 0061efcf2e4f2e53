"""A trial's own share of the host's CPUs: whole physical cores, held through a per-host slot lock.

Ray counts CPUs but does not pin processes to them. A neighbour trial's compile (inductor starts
one worker per core) then takes the cores an eager step needs to launch its kernels, and the eager
baseline slows while a CUDA-graph replay does not: the speedup inflates. So each trial takes a
slot, a fixed set of whole physical cores (SMT siblings together), and its measuring processes and
their compile workers run on those cores only. Slots are numbered per host and held with `flock`,
so trials of any sweep on the host, whatever started them, never share one; a dead holder's lock
is released by the kernel.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SLOT_DIR = Path(tempfile.gettempdir()) / "sweeper-cpu-slots"
WAIT_S = 30.0
"""How long a trial waits for a free slot before it runs unpinned (and says so in its row)."""


def _sibling_key(cpu: int) -> tuple[int, int]:
    topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
    try:
        return int((topo / "physical_package_id").read_text()), int((topo / "core_id").read_text())
    except (OSError, ValueError):
        return (0, cpu)  # no topology: every logical CPU counts as a core of its own


def physical_cores(cpus: set[int] | None = None) -> list[list[int]]:
    """The usable logical CPUs grouped by physical core, in order of their first CPU."""
    cpus = cpus if cpus is not None else os.sched_getaffinity(0)
    groups: dict[tuple[int, int], list[int]] = {}
    for cpu in sorted(cpus):
        groups.setdefault(_sibling_key(cpu), []).append(cpu)
    return sorted(groups.values(), key=lambda g: g[0])


def slot_cpus(cores: list[list[int]], cpus_per_slot: int, slot: int) -> list[int]:
    """Logical CPUs of slot `slot`: whole cores, taken in order, until `cpus_per_slot` CPUs."""
    slots: list[list[int]] = [[]]
    for core in cores:
        if len(slots[-1]) >= cpus_per_slot:
            slots.append([])
        slots[-1].extend(core)
    full = [s for s in slots if len(s) >= cpus_per_slot]
    return full[slot]


def slot_count(cores: list[list[int]], cpus_per_slot: int) -> int:
    n = 0
    with contextlib.suppress(IndexError):
        while True:
            slot_cpus(cores, cpus_per_slot, n)
            n += 1
    return n


@contextlib.contextmanager
def cpu_slot(cpus_per_trial: int, wait_s: float = WAIT_S) -> Iterator[list[int] | None]:
    """Hold a free slot of `cpus_per_trial` CPUs for the block; yields its CPUs, or None (unpinned)
    when the host has no such slot or none came free within `wait_s`."""
    cores = physical_cores()
    n_slots = slot_count(cores, cpus_per_trial)
    if n_slots == 0 or cpus_per_trial >= sum(len(c) for c in cores):
        yield None  # the trial may use the whole host: nothing to share, nothing to pin
        return
    SLOT_DIR.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_s
    while True:
        for slot in range(n_slots):
            fd = os.open(SLOT_DIR / f"{cpus_per_trial}cpu-{slot}.lock", os.O_CREAT | os.O_RDWR, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                yield slot_cpus(cores, cpus_per_trial, slot)
            finally:
                os.close(fd)  # releases the lock
            return
        if time.monotonic() > deadline:
            log.warning("no free slot of %d CPUs after %.0f s: this trial runs unpinned", cpus_per_trial, wait_s)
            yield None
            return
        time.sleep(0.2)


def cpus_per_trial(wanted: int | None, gpu_share: float, device: str, nodes: list[dict[str, Any]]) -> tuple[int, bool]:
    """CPUs each trial holds, and whether its processes are pinned to them: `wanted` (the spec's
    resources.cpus_per_trial) when set; on GPUs by default each trial's equal share of its node's
    CPUs by GPU share, the smallest over the alive GPU nodes of `nodes` (as `ray.nodes()` lists them);
    else one CPU, unpinned."""
    if wanted is not None:
        return wanted, True
    if device != "cuda":
        return 1, False
    shares = [int(n["Resources"]["CPU"] * gpu_share // n["Resources"]["GPU"])
              for n in nodes if n.get("Alive") and n["Resources"].get("GPU") and n["Resources"].get("CPU")]
    return max(1, min(shares, default=1)), True
