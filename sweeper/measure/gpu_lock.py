"""Several trials on one GPU (`resources.trials_per_gpu`): the GPU's lock, a reader-writer `flock`.

No GPU work of a neighbour may run inside a trial's timed windows. So a measuring process that
shares its GPU holds this lock (an `flock` on a per-host file named by the GPU's UUID) from the start
of its work to its end: *shared* for its untimed GPU work (model build, references, warm-ups,
accuracy checks), which may overlap a neighbour's untimed work, and *exclusive* while it times
windows (`timing`), which waits for every neighbour's GPU work to end and keeps it out meanwhile.
It lets go of it while it compiles: the compiling call (dynamo and inductor on the CPU; its first
execution, a few milliseconds of GPU work, may land in a neighbour's window), for good when nothing
on the GPU follows (a warm compile's process); and it holds it shared while its timing waits for the
host's fast CPU state between windows (`shared_meanwhile`). An autotuning compile benchmarks kernels
on the GPU, so it keeps the lock. The kernel releases a dead holder's lock. A process that does not
share its GPU holds nothing and waits for nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a lock is a file: the lock's own processes need no torch
    import torch

LOCK_DIR = Path(tempfile.gettempdir()) / "sweeper-gpu-locks"
AUTOTUNING_MODES = ("max-autotune", "max-autotune-no-cudagraphs")
"""Modes whose compile benchmarks candidate kernels on the GPU: they compile holding the lock."""


class GpuLock:
    """This process's hold on its GPU's lock; every method is a no-op when `key` is None."""

    def __init__(self, key: str | None, lock_dir: Path | None = None):
        self.key, self.lock_dir = key, lock_dir or LOCK_DIR
        self.waited_s, self.held_s, self.exclusive_s = 0.0, 0.0, 0.0
        self._fd: int | None = None
        self._alone = False  # inside `timing`
        self._since = 0.0
        self._lent_s = 0.0  # inside `timing`, the seconds `shared_meanwhile` held it shared

    @property
    def holding(self) -> bool:
        return self._fd is not None

    @property
    def shared_gpu(self) -> bool:
        """Whether this process shares its GPU with other trials (else every method is a no-op)."""
        return self.key is not None

    def acquire(self, exclusive: bool = False) -> None:
        """Wait for the GPU, then hold it, shared (until `release`, or this process's end); `exclusive`:
        alone, as `timing` does."""
        if self.key is None or self._fd is not None:
            return
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_dir / f"{self.key}.lock", os.O_CREAT | os.O_RDWR, 0o666)
        self._flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        self._fd, self._since = fd, time.monotonic()

    def _flock(self, fd: int, operation: int) -> None:
        """Take (or convert to) `operation`'s kind of lock, counting the wait."""
        t0 = time.monotonic()
        fcntl.flock(fd, operation)
        self.waited_s += time.monotonic() - t0

    @contextlib.contextmanager
    def timing(self) -> Iterator[None]:
        """Hold the GPU alone for the block (timed windows), then as before it. A block inside
        another keeps it alone until the outer one ends."""
        if self.key is None or self._alone:
            yield
            return
        held = self.holding
        if held:  # shared -> exclusive: flock converts by letting go, then waiting (never a deadlock)
            self._flock(self._fd, fcntl.LOCK_EX)
        else:
            self.acquire(exclusive=True)
        start, self._alone, self._lent_s = time.monotonic(), True, 0.0
        try:
            yield
        finally:
            self._alone = False
            self.exclusive_s += time.monotonic() - start - self._lent_s
            if held:  # back to shared (flock converts by letting go first: a neighbour may come between)
                self._flock(self._fd, fcntl.LOCK_SH)
            else:
                self.release()

    def release(self) -> None:
        if self._fd is None:
            return
        self.held_s += time.monotonic() - self._since
        os.close(self._fd)  # releases the lock
        self._fd = None

    @contextlib.contextmanager
    def shared_meanwhile(self) -> Iterator[bool]:
        """Inside `timing`: the GPU shared for the block (a wait between windows, no GPU work of this
        process), so that neighbours' untimed work runs meanwhile; then alone again. Yields whether it
        was shared: outside `timing`, or on a GPU of its own, nothing changes."""
        if self.key is None or not self._alone:
            yield False
            return
        start = time.monotonic()
        self._flock(self._fd, fcntl.LOCK_SH)  # exclusive -> shared
        try:
            yield True
        finally:
            self._flock(self._fd, fcntl.LOCK_EX)  # waits for the neighbours' untimed work to end
            self._lent_s += time.monotonic() - start

    @contextlib.contextmanager
    def released(self, again: bool = True) -> Iterator[None]:
        """Let go of the GPU for the block (if held), then wait for it again (with `again`; without,
        the process has no more GPU work and leaves it to its neighbours)."""
        held = self.holding
        self.release()
        try:
            yield
        finally:
            if held and again:
                self.acquire()

    def as_row(self) -> dict[str, Any]:
        shared = self.shared_gpu
        return {"gpu_lock_wait_s": self.waited_s if shared else None,
                "gpu_lock_held_s": self.held_s if shared else None,
                "gpu_lock_exclusive_s": self.exclusive_s if shared else None}


_CURRENT = GpuLock(None)


def key_for(device: torch.device, trials_per_gpu: int) -> str | None:
    """The lock's name for `device`'s GPU when trials share it (its UUID), else None."""
    if trials_per_gpu <= 1 or device.type != "cuda":
        return None
    import torch

    return f"GPU-{str(torch.cuda.get_device_properties(device).uuid).removeprefix('GPU-')}"


def hold(key: str | None, lock_dir: Path | None = None) -> GpuLock:
    """This process's lock from now on (None: a GPU of its own), held once it is free."""
    global _CURRENT
    _CURRENT.release()
    _CURRENT = GpuLock(key, lock_dir)
    _CURRENT.acquire()
    return _CURRENT


@contextlib.contextmanager
def released_while_compiling(mode: str, again: bool = True) -> Iterator[None]:
    """Around a compiling call: the GPU is free for a neighbour meanwhile, unless the mode autotunes;
    without `again` (nothing on the GPU follows), free after it as well."""
    if mode not in AUTOTUNING_MODES:
        with _CURRENT.released(again):
            yield
        return
    yield
    if not again:
        _CURRENT.release()


def shared_meanwhile() -> contextlib.AbstractContextManager[bool]:
    """Inside timed windows' hold, around a wait between them: neighbours' untimed GPU work may run."""
    return _CURRENT.shared_meanwhile()


def timing() -> contextlib.AbstractContextManager[None]:
    """Around timed windows: this process's GPU to itself (a no-op on a GPU of its own)."""
    return _CURRENT.timing()


def current() -> GpuLock:
    return _CURRENT
