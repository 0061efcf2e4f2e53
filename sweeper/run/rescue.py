"""Rows the results directory could not take (a full disk, a lost mount): how the sweep stops,
and where those rows go so that none is lost.

A failed write of a row raises `ResultsUnwritable` out of the Tune callback that recorded it. It is
a BaseException, like KeyboardInterrupt, so Tune's controller lets it through unwrapped and the
sweep stops the way Ctrl-C stops it; the row stays in the driver's memory. At the end each such row
is written again into the results directory (space may have come back), else into a fallback
directory off it, `FALLBACK_ENV` or TMPDIR/sweeper-unwritten, under the sweep's id. `--resume`
takes a fallback directory's rows back into the results directory before it runs anything.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from sweeper.results.store import next_part_seq, part_files, read_results, write_part

log = logging.getLogger(__name__)
FALLBACK_ENV = "SWEEPER_FALLBACK_DIR"
NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
"""Errors that say the results' file system takes no more, whatever the file."""


class ResultsUnwritable(BaseException):
    """A write into the results directory failed: the sweep stops, its measured rows are kept."""

    def __init__(self, error: OSError):
        super().__init__(str(error))
        self.error = error


def unwritable(exc: BaseException, results_dir: Path) -> OSError | None:
    """The OSError behind `exc` (itself, its cause or context, as Tune wraps a callback's error) when it
    is a full or read-only file system, or concerns a file in `results_dir`; else None."""
    seen: set[int] = set()
    here = str(results_dir.resolve())
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ResultsUnwritable):
            return exc.error
        if isinstance(exc, OSError) and (exc.errno in NO_SPACE or
                                         str(exc.filename or "").startswith((here, str(results_dir)))):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def fallback_dir(sweep_id: str) -> Path:
    root = os.environ.get(FALLBACK_ENV) or str(Path(tempfile.gettempdir()) / "sweeper-unwritten")
    return Path(root) / sweep_id


def save(results_dir: Path, sweep_id: str, rows: list[dict[str, Any]]) -> tuple[int, Path | None]:
    """Write `rows` as part files into `results_dir` again; those that still fail go to the fallback
    directory. Returns how many landed in `results_dir`, and the fallback directory if any went there
    (None: all written, or the fallback failed too, logged)."""
    written, left = 0, list(rows)
    try:
        seq = next_part_seq(results_dir)
        while left:
            write_part(results_dir, seq, left[0])
            seq, written = seq + 1, written + 1
            left.pop(0)
    except OSError as e:
        log.debug("results directory still unwritable: %s", e)
    if not left:
        return written, None
    target = fallback_dir(sweep_id)
    try:
        seq = next_part_seq(target)
        for i, row in enumerate(left):
            write_part(target, seq + i, row)
    except OSError as e:
        log.error("sweeper: %d measured rows are in no file: the fallback directory %s failed too (%s); set %s "
                  "to a directory with space", len(left), target, e, FALLBACK_ENV)
        return written, None
    return written, target


def adopt(sweep_id: str) -> list[dict[str, Any]]:
    """The rows a stopped run of this sweep left in its fallback directory (none: [])."""
    target = fallback_dir(sweep_id)
    if not part_files(target):
        return []
    df = read_results([target])
    return [r for r in df.to_dict("records") if r.get("sweep_id") == sweep_id]


def discard(sweep_id: str) -> None:
    """Remove the fallback directory once its rows are in the results directory."""
    shutil.rmtree(fallback_dir(sweep_id), ignore_errors=True)
