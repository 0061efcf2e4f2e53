"""Who owns a results directory: one live driver at a time, named to anyone refused.

The owner holds an exclusive `flock` on `DIR/.sweeper.lock` for as long as it writes there and
writes its host, pid and sweep into that file. The kernel drops the lock when the owner's process
dies however it ends (kill -9 included), so a lock file left by a dead driver never blocks
`--resume`: only a live holder refuses. The descriptor is close-on-exec, so processes the driver
starts (Ray's) never inherit the lock. The file is removed on release; a claimant that locked a
file someone removed meanwhile (checked by inode) tries again on the new one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from datetime import UTC, datetime
from pathlib import Path

LOCK_FILE = ".sweeper.lock"
_HOLDER_WAIT_S = 2.0
"""How long a refused claimant waits for the holder to write its name (it locks, then writes)."""


class DirectoryInUse(ValueError):
    """Another live driver owns the results directory."""


class Ownership:
    """A held claim on a results directory; `release()` ends it (idempotent)."""

    def __init__(self, results_dir: Path, fd: int):
        self.path, self._fd = results_dir / LOCK_FILE, fd

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()  # before unlocking: nobody can lock this inode and find it still named
        os.close(self._fd)
        self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


def claim(results_dir: Path, sweep_id: str) -> Ownership:
    """Own `results_dir` (created if missing), or raise DirectoryInUse naming the live owner."""
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / LOCK_FILE
    while True:
        fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DirectoryInUse(_refusal(results_dir, path)) from None
        if _same_file(fd, path):
            break
        os.close(fd)  # the previous owner removed the file between our open and our lock
    holder = {"host": socket.gethostname(), "pid": os.getpid(), "sweep_id": sweep_id,
              "since": datetime.now(UTC).isoformat(timespec="seconds")}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
    return Ownership(results_dir, fd)


def check_not_owned(results_dir: Path) -> None:
    """Raise DirectoryInUse if a live driver owns `results_dir`; creates nothing."""
    path = results_dir / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return  # no lock file (or no directory): nobody owns it
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise DirectoryInUse(_refusal(results_dir, path)) from None
    finally:
        os.close(fd)


def _refusal(results_dir: Path, path: Path) -> str:
    return (f"{results_dir} is in use by {_holder_text(path)}: wait for that sweep to end, "
            "or choose another --results directory")


def _same_file(fd: int, path: Path) -> bool:
    try:
        named = path.stat()
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (named.st_dev, named.st_ino)


def _holder_text(path: Path) -> str:
    """'sweep S (host H, pid P, since T)' from the lock file, once the holder has written it."""
    deadline = time.monotonic() + _HOLDER_WAIT_S
    while True:
        try:
            holder = json.loads(path.read_text())
            return (f"sweep {holder['sweep_id']} (host {holder['host']}, pid {holder['pid']}, "
                    f"since {holder['since']})")
        except (OSError, ValueError, KeyError, TypeError):
            if time.monotonic() > deadline:
                return "another sweep (its host and pid are not written yet)"
            time.sleep(0.05)
