"""Several trials on one GPU (`resources.trials_per_gpu`): a per-GPU lock around timed work.

While one trial compiles (CPU work, on its own CPUs) another may time on the same GPU, but two
trials' warm-ups and timed windows must never overlap: each would slow the other's kernels. So a
measuring process that shares its GPU holds this lock, an `flock` on a per-host file named by the
GPU's UUID, for its warm-ups and timed windows, and for an autotuning compile (which benchmarks
kernels on the GPU). The compiling call itself and its accuracy check run unlocked: milliseconds
of GPU work that may land in a neighbour's window, whose interval then shows it. The kernel
releases a dead holder's lock. A process that does not share its GPU holds nothing and waits
for nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

LOCK_DIR = Path(tempfile.gettempdir()) / "sweeper-gpu-locks"
AUTOTUNING_MODES = ("max-autotune", "max-autotune-no-cudagraphs")
"""Modes whose compile benchmarks candidate kernels on the GPU: their compile holds the lock."""


class GpuLock:
    """This process's hold on its GPU's lock (a no-op when `key` is None). Re-entrant."""

    def __init__(self, key: str | None, lock_dir: Path | None = None):
        self.key, self.lock_dir = key, lock_dir or LOCK_DIR
        self.waited_s, self.held_s, self._depth = 0.0, 0.0, 0

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        if self.key is None or self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_dir / f"{self.key}.lock", os.O_CREAT | os.O_RDWR, 0o666)
        t0 = time.monotonic()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            t1 = time.monotonic()
            self.waited_s += t1 - t0
            self._depth = 1
            try:
                yield
            finally:
                self._depth = 0
                self.held_s += time.monotonic() - t1
        finally:
            os.close(fd)  # releases the lock

    def as_row(self) -> dict[str, Any]:
        shared = self.key is not None
        return {"gpu_lock_wait_s": self.waited_s if shared else None,
                "gpu_lock_held_s": self.held_s if shared else None}


_CURRENT = GpuLock(None)


def key_for(device: torch.device, trials_per_gpu: int) -> str | None:
    """The lock's name for `device`'s GPU when trials share it (its UUID), else None."""
    if trials_per_gpu <= 1 or device.type != "cuda":
        return None
    return f"GPU-{str(torch.cuda.get_device_properties(device).uuid).removeprefix('GPU-')}"


def use(key: str | None, lock_dir: Path | None = None) -> GpuLock:
    """Make `key`'s lock this process's (None: a GPU of its own); returns it."""
    global _CURRENT
    _CURRENT = GpuLock(key, lock_dir)
    return _CURRENT


def timed() -> contextlib.AbstractContextManager[None]:
    """Hold this process's GPU lock for warm-ups and timed windows."""
    return _CURRENT.held()


def compiling(mode: str) -> contextlib.AbstractContextManager[None]:
    """Hold it for a compile too when the mode autotunes on the GPU."""
    return _CURRENT.held() if mode in AUTOTUNING_MODES else contextlib.nullcontext()


def current() -> GpuLock:
    return _CURRENT
