"""Measure one trial over an input stream instead of one fixed batch: eager, then compiled,
on the same batches. Each runs a first pass (stream_s: every compile and recompile
included); then `steady_passes` more of each, eager and compiled in alternation, give the
steady throughput (real tokens per second, padding not counted) of both under the same
conditions. Compiled outputs are checked against eager on the real positions of the first
batch of every distinct shape. Compile health tells graphs, recompiles and a fall back to eager.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from sweeper.measure import pipeline
from sweeper.measure import streams
from sweeper.measure.health import Health, compare, watch_compiles
from sweeper.measure.streams import Stream, StreamBatch
from sweeper.measure.timing import MemoryTracker, WindowStats, timed_call
from sweeper.spec.trials import Trial
from sweeper.measure.workbench import Workbench
from sweeper.zoo.bundle import output_tensor

log = logging.getLogger(__name__)


@dataclass
class PassTimes:
    first: list[float]
    """Seconds per batch of the first pass (compiles included)."""
    steady: list[list[float]]
    """Seconds per batch of each later pass."""

    @property
    def stream_s(self) -> float:
        return sum(self.first)

    @property
    def stats(self) -> WindowStats:
        """One window per steady pass."""
        return WindowStats([sum(p) for p in self.steady], [t for p in self.steady for t in p], len(self.first))

    def steady_batch_s(self, i: int) -> float:
        return statistics.median(p[i] for p in self.steady)

    @property
    def overhead_s(self) -> float:
        """First pass minus the steady time of the same batches: compiling and first-touch costs."""
        steady = sum(statistics.median(ts) for ts in zip(*self.steady, strict=True))
        return max(0.0, self.stream_s - steady)


def _pass(wb: Workbench, module: torch.nn.Module, stream: Stream,
          after: Callable[[StreamBatch, Any], None] | None = None) -> list[float]:
    times = []
    for sb in stream.batches:
        wb.batch = sb.batch
        secs, out = timed_call(lambda: wb.step(module), wb.device)
        times.append(secs)
        if after is not None:
            after(sb, out)  # outside the timed call
    wb.batch = stream.batches[0].batch
    return times


def _steady(wb: Workbench, module: torch.nn.Module, stream: Stream, mem: MemoryTracker) -> list[list[float]]:
    mem.reset()
    try:
        return [_pass(wb, module, stream) for _ in range(wb.trial.workload["steady_passes"])]
    except Exception as e:  # noqa: BLE001 - any failure becomes this trial's status
        raise pipeline.classify(e, "run") from e


def _timing_row(prefix: str, times: PassTimes, stream: Stream) -> dict[str, Any]:
    stats, n = times.stats, len(stream.batches)
    tokens = stream.real_tokens
    row = {f"{prefix}stream_s": times.stream_s,
           f"{prefix}throughput_items_s": stats.throughput(stream.items / n),
           f"{prefix}real_tokens_per_s": stats.throughput(tokens / n) if tokens is not None else None,
           f"{prefix}latency_p50_ms": stats.percentile_ms(50)}
    if not prefix:
        row.update(latency_p90_ms=stats.percentile_ms(90), latency_p99_ms=stats.percentile_ms(99),
                   throughput_spread_pct=stats.spread_pct, timed_windows=len(times.steady),
                   iters_per_window=n, throughput_tokens_s=row["real_tokens_per_s"])
    return row


def measure_eager(wb: Workbench, stream: Stream, row: dict[str, Any]) -> PassTimes:
    mem = MemoryTracker(wb.device)
    try:
        first = _pass(wb, wb.model, stream)
    except Exception as e:  # noqa: BLE001
        raise pipeline.classify(e, "run") from e
    times = PassTimes(first, _steady(wb, wb.model, stream, mem))
    row.update(_timing_row("eager_", times, stream), eager_peak_mem_gib=mem.peak_gib())
    return times


class _Accuracy:
    """Compiled vs eager on the real positions of the first batch of each distinct shape.

    The check's own memory (eager reference outputs, float32 copies) is kept out of the
    tracked peak: the peak so far is saved before each check and the tracker reset after it.
    """

    def __init__(self, wb: Workbench, mem: MemoryTracker):
        self.wb, self.mem = wb, mem
        self.seen: set[streams.Shape] = set()
        self.max_abs, self.rel = 0.0, 0.0
        self.peak_gib = 0.0

    def __call__(self, sb: StreamBatch, out: Any) -> None:
        if sb.shape in self.seen:
            return
        self.seen.add(sb.shape)
        self.peak_gib = max(self.peak_gib, self.mem.peak_gib())
        got = streams.real_positions(output_tensor(out).detach().to(torch.float32, copy=True), sb.batch)
        ref = streams.real_positions(output_tensor(self.wb.step(self.wb.model)).float(), sb.batch)
        max_abs, rel = compare([ref], [got])
        self.max_abs, self.rel = max(self.max_abs, max_abs), max(self.rel, rel)
        del got, ref, out
        self.mem.reset()

    def row(self) -> dict[str, Any]:
        tol = pipeline.tolerance(self.wb.trial)
        return {"max_abs_err": self.max_abs, "rel_err": self.rel, "accuracy_tol": tol,
                "accuracy_ok": self.rel <= tol, "accuracy_shapes": len(self.seen)}


def _first_pass(wb: Workbench, compiled: torch.nn.Module, stream: Stream, row: dict[str, Any],
                mem: MemoryTracker) -> tuple[list[float], float]:
    """The compiled first pass; returns its seconds per batch and its peak memory (checks left out)."""
    check = _Accuracy(wb, mem)
    try:
        first = _pass(wb, compiled, stream, check)
    except Exception as e:  # noqa: BLE001
        raise pipeline.classify(e, "compile") from e
    row.update(check.row(), first_call_s=first[0], stream_s=sum(first))
    return first, max(check.peak_gib, mem.peak_gib())


def _steady_vs_eager(wb: Workbench, compiled: torch.nn.Module, stream: Stream,
                     mem: MemoryTracker) -> tuple[list[list[float]], list[list[float]], float]:
    """Steady passes, eager and compiled in turn; returns both and the compiled passes' peak."""
    eager, timed, peak = [], [], 0.0
    try:
        for _ in range(wb.trial.workload["steady_passes"]):
            eager.append(_pass(wb, wb.model, stream))
            mem.reset()
            timed.append(_pass(wb, compiled, stream))
            peak = max(peak, mem.peak_gib())
    except Exception as e:  # noqa: BLE001 - any failure becomes this trial's status
        raise pipeline.classify(e, "run") from e
    return timed, eager, peak


def measure_compiled(wb: Workbench, stream: Stream, row: dict[str, Any], eager: PassTimes, emit) -> None:
    mem = MemoryTracker(wb.device)
    if wb.device.type == "cuda":
        torch.cuda.empty_cache()
    mem.reset()
    compiled = pipeline.compile_model(wb)
    health = Health()
    try:
        with watch_compiles() as health:
            first, compile_peak = _first_pass(wb, compiled, stream, row, mem)
            emit(row)
            steady, eager_steady, steady_peak = _steady_vs_eager(wb, compiled, stream, mem)
    finally:
        row.update(health.as_row(), fell_back_to_eager=health.recompile_limit_hit)
    times, eager = PassTimes(first, steady), PassTimes(eager.first, eager_steady)
    row.update(**_timing_row("", times, stream), **_timing_row("eager_", eager, stream), peak_mem_gib=steady_peak,
               peak_mem_compile_gib=max(compile_peak, steady_peak), peak_reserved_gib=mem.peak_reserved_gib())
    _stream_ratios(row, stream, eager, times)
    if health.recompile_limit_hit:
        _flag_fallback(wb.trial, row)


def _stream_ratios(row: dict[str, Any], stream: Stream, eager: PassTimes, times: PassTimes) -> None:
    n = len(stream.batches)
    row["compile_s"] = max(0.0, times.first[0] - times.steady_batch_s(0))  # the first graph's compile
    row["stream_compile_s"] = times.overhead_s
    row["compile_s_per_shape"] = times.overhead_s / stream.n_shapes
    gain = (eager.stats.median_iter_s - times.stats.median_iter_s)  # steady seconds saved per batch
    extra = max(0.0, times.overhead_s - eager.overhead_s)
    row["stream_break_even_batches"] = extra / gain if gain > 0 else math.inf
    row["break_even_iters"] = row["stream_break_even_batches"]
    row["stream_speedup_vs_eager"] = row["eager_stream_s"] / row["stream_s"]
    pipeline.relative_to_eager(row)
    log.debug("stream of %d batches: %.3g s compiled vs %.3g s eager", n, row["stream_s"], row["eager_stream_s"])


def _flag_fallback(trial: Trial, row: dict[str, Any]) -> None:
    limit = trial.measure.get("recompile_limit") or torch._dynamo.config.recompile_limit
    note = (f"FELL BACK TO EAGER: hit torch._dynamo's recompile limit ({limit}) after {row['graphs']} graphs "
            f"for {row['stream_shapes']} distinct shapes; later new shapes ran uncompiled")
    row["notes"] = note
    log.warning("trial %s: %s", trial.trial_id, note)


def measure_eager_only(wb: Workbench, row: dict[str, Any], eager: PassTimes, stream: Stream) -> None:
    row.update(_timing_row("", eager, stream), peak_mem_gib=row["eager_peak_mem_gib"],
               peak_mem_compile_gib=row["eager_peak_mem_gib"],
               peak_reserved_gib=MemoryTracker(wb.device).peak_reserved_gib(), **pipeline.EAGER_BASELINE,
               stream_speedup_vs_eager=1.0, fell_back_to_eager=False)


def run(wb: Workbench, row: dict[str, Any], emit, warm: bool = False,
        mark: Callable[[str], None] = lambda _: None) -> None:
    """Measure `wb.trial` over its stream into `row`; raises pipeline.TrialFailed on failure.
    `mark` is told when the "stream" is built and the "eager" and "compiled" parts end."""
    stream = streams.build_stream(wb.trial, wb.bundle, wb.device)
    wb.batch = stream.batches[0].batch
    mark("stream")
    if warm:  # the warm-cache process times the compile of the first batch's shape
        pipeline.measure_warm(wb, row)
        mark("compiled")
        return
    row.update(stream_batches=len(stream.batches), stream_shapes=stream.n_shapes, pad_waste=stream.pad_waste)
    eager = measure_eager(wb, stream, row)
    mark("eager")
    emit(row)
    if wb.trial.mode == "eager":
        measure_eager_only(wb, row, eager, stream)
    else:
        measure_compiled(wb, stream, row, eager, emit)
        mark("compiled")
