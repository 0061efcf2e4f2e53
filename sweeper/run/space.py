"""Before a sweep: will its results fit? An estimate of what the sweep writes on the results' file
system, per trial, against its free space, and one warning line when it falls short.

Each trial writes its row (an Arrow part file and its share of results.parquet), a compiled
trial with `megacache_warm_start` its Mega-Cache artifact, a traced one its compile trace, and
Tune its records under RESULTS/tune (unless --storage is elsewhere). The sizes per trial are the
constants below (measured sizes, kept beside them), or, on a resumed sweep, what this directory's
own trials took so far."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from sweeper.results.store import part_files
from sweeper.spec.trials import Trial

log = logging.getLogger("sweeper")
# Measured sizes: a row's Arrow part file of today's schema 22.5 KB, its share of results.parquet
# 5-10 KB; a Mega-Cache artifact up to 12.6 MB over the search study's grid (studies/search/results;
# 32 MiB is the most kept); a gzip'd compile trace 0.40-0.42 MB (studies/trace/results); Tune's
# experiment state 21 KB plus, per trial, 3.2 KB json, 2.8 KB csv, 1.7 KB TensorBoard (a CPU sweep).
PART_BYTES = 22_500
COMPACTED_ROW_BYTES = 10_000
MEGACACHE_BYTES = 12_600_000
TRACE_BYTES = 420_000
TUNE_BASE_BYTES = 21_000
TUNE_LOG_BYTES = {"json": 3_200, "csv": 2_800, "tensorboard": 1_700}
MARGIN = 1.5
"""Warn below this times the estimate: the sizes vary with model and schema."""


def _mean_size(files: list[Path], default: int) -> int:
    sizes = [p.stat().st_size for p in files if p.is_file()]
    return int(sum(sizes) / len(sizes)) if sizes else default


def estimate_bytes(results_dir: Path, trials: list[Trial], tune_logs: tuple[str, ...],
                   storage: str | None) -> dict[str, int]:
    """Bytes the sweep's `trials` will likely write on the results' file system, by what writes them."""
    compiled = [t for t in trials if t.mode != "eager"]
    need = {"rows": len(trials) * (_mean_size(part_files(results_dir), PART_BYTES) + COMPACTED_ROW_BYTES),
            "Mega-Cache artifacts": _mean_size(list((results_dir / "megacache").glob("*.bin")), MEGACACHE_BYTES)
            * sum(t.measure.megacache_warm_start and t.measure.warm_compile for t in compiled),
            "compile traces": _mean_size(list((results_dir / "traces").glob("*.log.gz")), TRACE_BYTES)
            * sum(bool(t.measure.trace) for t in compiled)}
    if storage is None:
        need["Tune records"] = len(trials) * (TUNE_BASE_BYTES + sum(TUNE_LOG_BYTES.get(n, 0) for n in tune_logs))
    return {k: v for k, v in need.items() if v}


def shortfall_line(results_dir: Path, trials: list[Trial], tune_logs: tuple[str, ...],
                   storage: str | None) -> str | None:
    """The warning, when the file system holding `results_dir` has less free space than the estimate."""
    need = estimate_bytes(results_dir, trials, tune_logs, storage)
    free = shutil.disk_usage(results_dir).free
    total = sum(need.values())
    if free >= total * MARGIN:
        return None
    parts = ", ".join(f"{k} {_mb(v)}" for k, v in sorted(need.items(), key=lambda kv: -kv[1]))
    return (f"sweeper: warning: {results_dir} has {_mb(free)} free; these {len(trials)} trials will likely write "
            f"{_mb(total)} ({parts}); to shrink it: --tune-logs none, measure.trace: false, "
            "measure.megacache_warm_start: false; a sweep that runs out of space stops and keeps its rows")


def warn_if_short(results_dir: Path, trials: list[Trial], tune_logs: tuple[str, ...], storage: str | None) -> None:
    line = shortfall_line(results_dir, trials, tune_logs, storage)
    if line:
        log.warning("%s", line)


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.0f} KB"
