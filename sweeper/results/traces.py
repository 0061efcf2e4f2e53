"""Compile traces of traced trials (`measure.trace: true`): the measuring process's TORCH_TRACE
log, gzip-compressed, goes from the worker to the results directory (run.artifacts: through a
writer on the driver's node, no shared file system) and is kept as RESULTS/traces/<trial_id>.log.gz
beside results.parquet.
No torch or pandas: the runner, the report and `sweeper trace` all use it."""

from __future__ import annotations

import base64
import gzip
import os
from collections.abc import Iterable
from pathlib import Path

TRACES_DIR = "traces"
SUFFIX = ".log.gz"
MAX_TRACE_BYTES = 16 * 2**20
"""A compressed trace larger than this stays behind."""
PACKED_KEY = "trace_log_gz_b64"
"""The key under which a row carries its packed trace until it is written (never a row column)."""


def pack(directory: Path) -> str | None:
    """The directory's TORCH_TRACE logs, one gzip stream as base64 text; None if there are none
    or they compress above MAX_TRACE_BYTES."""
    logs = sorted(directory.glob("*.log")) if directory.is_dir() else []
    data = gzip.compress(b"".join(p.read_bytes() for p in logs), compresslevel=6) if logs else b""
    return base64.b64encode(data).decode("ascii") if 0 < len(data) <= MAX_TRACE_BYTES else None


def trace_path(results_dir: Path, trial_id: str) -> Path:
    return results_dir / TRACES_DIR / f"{trial_id}{SUFFIX}"


def beside(result_files: Iterable[Path]) -> dict[str, Path]:
    """Trial id -> trace file, for the traces kept beside each results file."""
    found: dict[str, Path] = {}
    for f in result_files:
        for trace in sorted((f.parent / TRACES_DIR).glob(f"*{SUFFIX}")):
            found[trace.name.removesuffix(SUFFIX)] = trace
    return found


def links(result_files: Iterable[Path], report: Path) -> dict[str, str]:
    """Trial id -> its trace file as a link relative to the report's directory."""
    return {tid: os.path.relpath(path, Path(report).resolve().parent)
            for tid, path in beside(Path(f).resolve() for f in result_files).items()}
