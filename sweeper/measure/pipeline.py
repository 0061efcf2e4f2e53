"""The fixed-shape measurement of one trial: eager baseline, cold compile, steady timing,
memory, compile health and accuracy, on one batch. `sweeper.measure.process` runs it."""

from __future__ import annotations

import logging
import math
from typing import Any

import torch

from sweeper.measure.health import Health, compare, default_tolerance, watch_compiles
from sweeper.measure.timing import Arm, MemoryTracker, WindowStats, calibrate, run_interleaved, run_windows, timed_call
from sweeper.spec.trials import Trial
from sweeper.measure.workbench import Workbench

log = logging.getLogger(__name__)
_OOM_TEXT = ("out of memory", "can't allocate memory")  # CUDA/HIP; torch's CPU allocator


class TrialFailed(Exception):
    def __init__(self, status: str, error: str):
        super().__init__(error)
        self.status, self.error = status, error


def describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text if len(text) <= 4000 else text[:4000] + " [...]"


def is_oom(exc: BaseException) -> bool:
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, (torch.cuda.OutOfMemoryError, MemoryError)) or any(m in str(e).lower() for m in _OOM_TEXT):
            return True
        e = e.__cause__ or e.__context__ or getattr(e, "inner_exception", None)
    return False


def classify(exc: BaseException, stage: str) -> TrialFailed:
    if is_oom(exc):
        return TrialFailed("oom", describe(exc))
    return TrialFailed("compile_error" if stage == "compile" else "runtime_error", describe(exc))


def _steady(wb: Workbench, fn, m: dict[str, Any], mem: MemoryTracker) -> tuple[WindowStats, float]:
    """Warm up, then time windows; returns the stats and the steady-phase peak memory.

    The peak is reset before the warm-up, not after it: CUDA-graph modes record their graphs
    (and fill their private memory pool) during the warm-up, and replays allocate nothing, so
    a peak taken over the timed windows alone would leave out the memory those modes hold.
    """
    mem.reset()
    iters = calibrate(fn, wb.device, m["warmup_iters"], m["min_window_iters"], m["min_window_s"])
    stats = run_windows(fn, wb.device, m["windows"], iters)
    return stats, mem.peak_gib()


def _timing_row(prefix: str, stats: WindowStats, wb: Workbench) -> dict[str, Any]:
    row = {f"{prefix}throughput_items_s": stats.throughput(wb.items_per_iter),
           f"{prefix}latency_p50_ms": stats.percentile_ms(50)}
    if not prefix:
        row.update(latency_p90_ms=stats.percentile_ms(90), latency_p99_ms=stats.percentile_ms(99),
                   throughput_spread_pct=stats.spread_pct, timed_windows=len(stats.window_s),
                   iters_per_window=stats.iters_per_window,
                   throughput_tokens_s=stats.throughput(wb.tokens_per_iter) if wb.tokens_per_iter else None)
    return row


def measure_eager(wb: Workbench, row: dict[str, Any]) -> WindowStats:
    mem = MemoryTracker(wb.device)
    try:
        stats, peak = _steady(wb, lambda: wb.step(wb.model), wb.trial.measure, mem)
    except Exception as e:  # noqa: BLE001 - any failure becomes this trial's status
        raise classify(e, "run") from e
    row.update(_timing_row("eager_", stats, wb), eager_peak_mem_gib=peak)
    return stats


def compile_model(wb: Workbench) -> torch.nn.Module:
    t, m = wb.trial, wb.trial.measure
    torch._dynamo.reset()
    if m.get("recompile_limit"):
        torch._dynamo.config.recompile_limit = m["recompile_limit"]
    kwargs: dict[str, Any] = {"backend": m["backend"], "dynamic": t.dynamic}
    if m["backend"] == "inductor":
        kwargs["mode"] = t.mode
    return torch.compile(wb.model, **kwargs)


def _first_call(wb: Workbench, compiled: torch.nn.Module) -> float:
    try:
        secs, _ = timed_call(lambda: wb.first(compiled), wb.device)
    except Exception as e:  # noqa: BLE001
        raise classify(e, "compile") from e
    return secs


def _steady_vs_eager(wb: Workbench, compiled: torch.nn.Module, eager_iters: int, m: dict[str, Any],
                     mem: MemoryTracker) -> tuple[WindowStats, WindowStats, float]:
    """Warm up the compiled module, then time its windows alternating with eager windows.

    Returns compiled stats, eager stats and the compiled steady peak (warm-up and compiled
    windows; eager windows are left out of it). The peak is reset before the warm-up, for
    the reason given in `_steady`.
    """
    mem.reset()
    iters = calibrate(lambda: wb.step(compiled), wb.device, m["warmup_iters"], m["min_window_iters"],
                      m["min_window_s"])
    peak = mem.peak_gib()
    for _ in range(m["warmup_iters"]):  # eager last ran before the compile
        wb.step(wb.model)
    arms = [Arm(lambda: wb.step(wb.model), eager_iters), Arm(lambda: wb.step(compiled), iters, mem)]
    eager, stats = run_interleaved(arms, wb.device, m["windows"])
    return stats, eager, max(peak, arms[1].peak_gib)


def measure_compiled(wb: Workbench, row: dict[str, Any], eager: WindowStats, emit) -> None:
    """Compile, check accuracy, then time compiled and eager windows in alternation.

    The eager windows timed before the compile stay in the row only if this part fails;
    otherwise the eager figures are the interleaved ones, so the speedup compares runs that
    shared the same conditions.
    """
    m = wb.trial.measure
    wb.restore_initial_state()
    mem = MemoryTracker(wb.device)
    if wb.device.type == "cuda":
        torch.cuda.empty_cache()
    mem.reset()
    compiled = compile_model(wb)
    health = Health()
    try:
        with watch_compiles() as health:
            row["first_call_s"] = _first_call(wb, compiled)
            _accuracy(wb, row)
            emit(row)
            compile_peak = mem.peak_gib()
            try:
                stats, eager, steady_peak = _steady_vs_eager(wb, compiled, eager.iters_per_window, m, mem)
            except Exception as e:  # noqa: BLE001
                raise classify(e, "run") from e
    finally:
        row.update(health.as_row())
    row.update(**_timing_row("", stats, wb), **_timing_row("eager_", eager, wb), peak_mem_gib=steady_peak,
               peak_mem_compile_gib=max(compile_peak, steady_peak), peak_reserved_gib=mem.peak_reserved_gib())
    row["compile_s"] = max(0.0, row["first_call_s"] - stats.median_iter_s)
    _ratios(row, eager, stats)


def relative_to_eager(row: dict[str, Any]) -> None:
    """Speedup and memory ratio of the compiled figures in `row` over its eager ones."""
    row["speedup_vs_eager"] = row["throughput_items_s"] / row["eager_throughput_items_s"]
    row["mem_ratio_vs_eager"] = row["peak_mem_gib"] / row["eager_peak_mem_gib"] if row["eager_peak_mem_gib"] else None


def _ratios(row: dict[str, Any], eager: WindowStats, stats: WindowStats) -> None:
    relative_to_eager(row)
    gain = eager.median_iter_s - stats.median_iter_s
    row["break_even_iters"] = row["compile_s"] / gain if gain > 0 else math.inf


def tolerance(trial: Trial) -> float:
    """The spec's accuracy tolerance, else the default for the trial's precision."""
    m = trial.measure
    return m.get("accuracy_tol") or default_tolerance(trial.precision, m["matmul_precision"])


def _accuracy(wb: Workbench, row: dict[str, Any]) -> None:
    tol = tolerance(wb.trial)
    max_abs, rel = compare(wb.reference, wb.first_outputs)
    row.update(max_abs_err=max_abs, rel_err=rel, accuracy_tol=tol, accuracy_ok=rel <= tol)


EAGER_BASELINE = {"speedup_vs_eager": 1.0, "mem_ratio_vs_eager": 1.0, "accuracy_ok": True, "max_abs_err": 0.0,
                  "rel_err": 0.0, "graphs": 0, "graph_breaks": 0, "recompiles": 0, "cudagraph_skips": 0,
                  "recompile_limit_hit": False}
"""What an eager row says of itself: it is its own baseline and reference, and compiled nothing."""


def measure_eager_only(wb: Workbench, row: dict[str, Any], eager: WindowStats) -> None:
    for k in ("throughput_items_s", "latency_p50_ms", "peak_mem_gib"):
        row[k] = row[f"eager_{k}"]
    row.update(_timing_row("", eager, wb), peak_mem_compile_gib=row["eager_peak_mem_gib"],
               peak_reserved_gib=MemoryTracker(wb.device).peak_reserved_gib(), **EAGER_BASELINE)


def measure_warm(wb: Workbench, row: dict[str, Any]) -> None:
    """Compile again in this (new) process, whose inductor cache the cold run filled."""
    compiled = compile_model(wb)
    first = _first_call(wb, compiled)
    m = wb.trial.measure
    stats, _ = _steady(wb, lambda: wb.step(compiled), {**m, "windows": 5}, MemoryTracker(wb.device))
    row.update(warm_first_call_s=first, warm_compile_s=max(0.0, first - stats.median_iter_s))
