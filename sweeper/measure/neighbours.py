"""Whether another trial on this host compiled while this one timed: measured, not guessed.

A measuring process announces its compile with a marker file named by its pid in a per-host
directory, removed when the compile ends (a marker whose process is gone is ignored). Between
timed windows a process looks for markers of other live processes; the row then says in how
many of its timed windows a neighbour was compiling (`host_busy_windows_pct`).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

MARKER_DIR = Path(tempfile.gettempdir()) / "sweeper-compiling"


@contextlib.contextmanager
def compile_marker(marker_dir: Path | None = None) -> Iterator[None]:
    """Mark this process as compiling for the duration of the block."""
    marker_dir = marker_dir or MARKER_DIR
    marker = marker_dir / str(os.getpid())
    try:
        marker_dir.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        marker = None  # an unwritable temp dir must not fail the trial; neighbours just cannot see us
    try:
        yield
    finally:
        if marker is not None:
            marker.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def neighbours_compiling(marker_dir: Path | None = None) -> int:
    """Live processes other than this one that are compiling now."""
    try:
        names = os.listdir(marker_dir or MARKER_DIR)
    except OSError:
        return 0
    me = os.getpid()
    return sum(1 for n in names if n.isdigit() and int(n) != me and _alive(int(n)))


class BusyWindows:
    """Counts timed windows during which a neighbour compiled (looked at before and after each)."""

    def __init__(self, marker_dir: Path | None = None):
        self.marker_dir, self.windows, self.busy = marker_dir, 0, 0
        self._before = 0
        self.last = False  # whether a neighbour compiled during the window looked at last

    def before(self) -> None:
        self._before = neighbours_compiling(self.marker_dir)

    def after(self) -> None:
        self.windows += 1
        self.last = bool(self._before or neighbours_compiling(self.marker_dir))
        self.busy += self.last

    @property
    def busy_pct(self) -> float | None:
        return 100.0 * self.busy / self.windows if self.windows else None
