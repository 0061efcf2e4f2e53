"""The one measurement pipeline of a trial: eager baseline, cold compile and accuracy, then
compiled and eager windows in alternation, memory and compile health; or a warm compile.

What the trial feeds (one fixed batch, or a stream of batches) is a strategy from
`sweeper.measure.feeds`; everything else is the same for both. `measure.process` runs it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from sweeper.measure import gpu_lock, gpu_util, matching, witness
from sweeper.measure.failures import classify
from sweeper.measure.feeds import BatchStream, FixedBatch
from sweeper.measure.health import Health, watch_compiles
from sweeper.measure.inductor_options import compile_kwargs
from sweeper.measure.memory import DeviceNeed, MemoryTracker
from sweeper.measure.neighbours import BusyWindows, compile_marker
from sweeper.measure.regions import compile_scope
from sweeper.measure.timing import Arm, WindowStats, calibrate, run_windows, speedup_interval, timed_call
from sweeper.measure.workbench import Workbench

log = logging.getLogger(__name__)


Feed = FixedBatch | BatchStream
Compiler = Callable[[Workbench], torch.nn.Module]  # makes the compiled module: compile_model, or measure.aoti's


@dataclass
class Context:
    """What every step of the pipeline shares: the workbench, the feed, the row, its trackers."""

    wb: Workbench
    feed: Feed
    row: dict[str, Any]
    emit: Callable[[dict[str, Any]], None]
    need: DeviceNeed
    busy: BusyWindows
    gpu: gpu_util.Sampler | None = None
    compiler: Compiler | None = None

    def tracker(self) -> MemoryTracker:
        return MemoryTracker(self.wb.device, self.need)

    def arm(self, module: torch.nn.Module, iters: int, mem: MemoryTracker | None = None) -> tuple[Arm, _Watch]:
        """An arm whose windows are watched for compiling neighbours (and for memory, if given). On a
        GPU shared with other trials, a window a neighbour compiled in makes its pair not fast
        (`matching.Matched.of`): there the sweep itself puts a compile beside the windows."""
        watch = _Watch(self.busy, mem, self.gpu)
        clock = self.gpu.clock_mhz if self.gpu is not None else None
        launch = witness.launch_probe(self.wb.device) if self.wb.device.type == "cuda" else None
        shared = gpu_lock.current().shared_gpu
        return Arm(self.feed.window(module, iters), iters, watch.before, watch.after, clock, launch,
                   (lambda: self.busy.last) if shared else None), watch


@dataclass
class _Watch:
    """Run around each timed window, outside it: neighbours looked at, memory peak reset and read,
    GPU utilization sampled (from the last thing before the window to the first after it)."""

    busy: BusyWindows
    mem: MemoryTracker | None
    gpu: gpu_util.Sampler | None = None
    peak_gib: float = 0.0
    util: gpu_util.ArmUtil = field(default_factory=gpu_util.ArmUtil)

    def before(self) -> None:
        self.busy.before()
        if self.mem is not None:
            self.mem.reset()
        if self.gpu is not None:
            self.gpu.begin(self.util)

    def after(self) -> None:
        if self.gpu is not None:
            self.gpu.end()
        self.busy.after()
        if self.mem is not None:
            self.peak_gib = max(self.peak_gib, self.mem.peak_gib())


def make_feed(wb: Workbench) -> Feed:
    return BatchStream(wb) if wb.trial.workload is not None else FixedBatch(wb)


def _timing_row(ctx: Context, prefix: str, stats: WindowStats) -> dict[str, Any]:
    row = ctx.feed.timing_row(prefix, stats)
    if not prefix:
        row.update(latency_p90_ms=stats.percentile_ms(90), latency_p99_ms=stats.percentile_ms(99),
                   throughput_spread_pct=stats.spread_pct, iters_per_window=stats.iters_per_window)
    elif prefix == "eager_":
        row["eager_spread_pct"] = stats.spread_pct
    return row


ALONE_WAIT_S = 10.0
"""A compiled trial's eager windows before its compile wait at most this long for the host's fast
state: they are one more member of the self-check's reference, which counts fast-state ones only."""


def _host_rules(wb: Workbench, part: str) -> tuple[float, float | None, bool]:
    """The host-speed wait, the precision target and whether the host's slow state adds rounds, for
    the windows that give the row's figures (`matching.run_matched`); a compiled trial's eager windows
    before its compile (`eager_alone`) get a short wait and no target. A trial allowed no wait (on
    the CPU by default) times at whatever speed the host runs: its state adds no rounds."""
    m, kind = wb.trial.measure, wb.device.type
    wait_s = matching.wait_allowance_s(m.host_wait_s, kind)
    if part != "compiled" and wb.trial.mode != "eager":
        return min(wait_s, ALONE_WAIT_S), None, wait_s > 0
    return wait_s, matching.target_se_pct(m.target_se_pct, kind), wait_s > 0


def measure_eager(ctx: Context) -> WindowStats:
    """Warm up and time eager alone. The peak is reset before the warm-up (see `_steady_vs_eager`)."""
    wb, mem = ctx.wb, ctx.tracker()
    mem.reset()
    try:
        iters = ctx.feed.warm_up(wb.model, ctx.row, "eager_")
        arm, watch = ctx.arm(wb.model, iters)
        matched = matching.run_matched([arm], ctx.feed.windows, *_host_rules(wb, "eager"))
    except Exception as e:
        raise classify(e, "run") from e
    stats = matched.headline(0)
    ctx.row.update(_timing_row(ctx, "eager_", stats), **watch.util.as_row("eager_"), eager_peak_mem_gib=mem.peak_gib())
    ctx.row.update(matched.row(["eager_"]), **matching.slow_throughputs(matched, ["eager_"], ctx.feed.items_per_iter()))
    return stats


def compile_model(wb: Workbench) -> torch.nn.Module:
    t, m = wb.trial, wb.trial.measure
    torch._dynamo.reset()
    if m.recompile_limit:
        torch._dynamo.config.recompile_limit = m.recompile_limit
    kwargs: dict[str, Any] = {"backend": m.backend, "dynamic": t.dynamic}
    if m.backend == "inductor":
        kwargs.update(compile_kwargs(t))
    return compile_scope(wb.model, t.scope, wb.blocks, kwargs)


def _steady_vs_eager(ctx: Context, compiled: torch.nn.Module, eager_iters: int,
                     mem: MemoryTracker) -> tuple[WindowStats, WindowStats, float]:
    """Warm up the compiled module, then time its windows alternating with eager windows.

    Returns compiled stats, eager stats and the compiled steady peak. The peak is reset before
    the warm-up, not after it: CUDA-graph modes record their graphs (and fill their private
    pool) during the warm-up, and replays allocate nothing, so a peak over the timed windows
    alone would leave out the memory those modes hold. Eager windows are left out of it.
    """
    wb = ctx.wb
    mem.reset()
    iters = ctx.feed.warm_up(compiled, ctx.row, "")
    peak = mem.peak_gib()
    ctx.feed.warm_up(wb.model, ctx.row, "eager_")  # eager last ran before the compile
    (eager_arm, eager_watch), (compiled_arm, watch) = ctx.arm(wb.model, eager_iters), ctx.arm(compiled, iters, mem)
    matched = matching.run_matched([eager_arm, compiled_arm], ctx.feed.windows, *_host_rules(wb, "compiled"))
    eager, stats = matched.headline(0), matched.headline(1)
    slow = matching.slow_throughputs(matched, ["eager_", ""], ctx.feed.items_per_iter())
    ctx.row.update(eager_watch.util.as_row("eager_"), **watch.util.as_row(""), **matched.row(["eager_", ""]), **slow,
                   speedup_all_windows=matching.speedup(*matched.arms))
    e_slow, c_slow = slow["eager_throughput_slow_items_s"], slow["throughput_slow_items_s"]
    ctx.row["speedup_slow"] = c_slow / e_slow if e_slow and c_slow else None
    return stats, eager, max(peak, watch.peak_gib)


def measure_compiled(ctx: Context, eager: WindowStats) -> None:
    """Compile, check accuracy, then time compiled and eager windows in alternation.

    The eager windows timed before the compile stay in the row only if this part fails;
    otherwise the eager figures are the interleaved ones, so the speedup compares runs that
    shared the same conditions, and its interval pairs each compiled window with its eager one.
    """
    wb, row = ctx.wb, ctx.row
    wb.restore_initial_state()
    mem = ctx.tracker()
    if wb.device.type == "cuda":
        torch.cuda.empty_cache()
    mem.reset()
    compiled = (ctx.compiler or compile_model)(wb)
    health = Health()
    try:
        with watch_compiles() as health:
            with compile_marker():
                try:
                    verdict, compile_peak = ctx.feed.first_compiled(compiled, row, mem, ctx.need)
                except Exception as e:
                    raise classify(e, "compile") from e
            row.update(verdict.as_row())
            ctx.emit(row)
            try:
                stats, eager, steady_peak = _steady_vs_eager(ctx, compiled, eager.iters_per_window, mem)
            except Exception as e:
                raise classify(e, "run") from e
    finally:
        row.update(health.as_row(), fell_back_to_eager=health.recompile_limit_hit)
    row.update(**_timing_row(ctx, "", stats), **_timing_row(ctx, "eager_", eager), peak_mem_gib=steady_peak,
               peak_mem_compile_gib=max(compile_peak, steady_peak), peak_reserved_gib=mem.peak_reserved_gib())
    ctx.feed.compile_row(row, stats, eager)
    relative_to_eager(row)
    if health.recompile_limit_hit:
        _flag_fallback(wb, row)
    row["speedup_ci_low"], row["speedup_ci_high"] = speedup_interval(eager, stats, wb.trial.measure.seed)


def _flag_fallback(wb: Workbench, row: dict[str, Any]) -> None:
    limit = wb.trial.measure.recompile_limit or torch._dynamo.config.recompile_limit
    shapes = f" for {row['stream_shapes']} distinct shapes" if row.get("stream_shapes") else ""
    row["notes"] = (f"FELL BACK TO EAGER: hit torch._dynamo's recompile limit ({limit}) after {row['graphs']} "
                    f"graphs{shapes}; later new shapes ran uncompiled")
    log.warning("trial %s: %s", wb.trial.trial_id, row["notes"])


def relative_to_eager(row: dict[str, Any]) -> None:
    """Speedup and memory ratio of the compiled figures in `row` over its eager ones."""
    row["speedup_vs_eager"] = row["throughput_items_s"] / row["eager_throughput_items_s"]
    row["mem_ratio_vs_eager"] = row["peak_mem_gib"] / row["eager_peak_mem_gib"] if row["eager_peak_mem_gib"] else None


EAGER_BASELINE = {"speedup_vs_eager": 1.0, "speedup_ci_low": 1.0, "speedup_ci_high": 1.0, "mem_ratio_vs_eager": 1.0,
                  "accuracy_ok": True, "max_abs_err": 0.0, "rel_err": 0.0, "graphs": 0, "graph_breaks": 0,
                  "recompiles": 0, "cudagraph_skips": 0, "recompile_limit_hit": False, "fell_back_to_eager": False}
"""What an eager row says of itself: it is its own baseline and reference, and compiled nothing."""


def measure_eager_only(ctx: Context, eager: WindowStats) -> None:
    row = ctx.row
    for k in ("throughput_items_s", "latency_p50_ms", "peak_mem_gib", "witness_ms", "gpu_clock_mhz",
              "launch_witness_ms", "throughput_slow_items_s", "median_se_pct", *gpu_util.COLUMNS):
        row[k] = row[f"eager_{k}"]
    row.update(_timing_row(ctx, "", eager), peak_mem_compile_gib=row["eager_peak_mem_gib"],
               peak_reserved_gib=ctx.tracker().peak_reserved_gib(), **EAGER_BASELINE)
    if isinstance(ctx.feed, BatchStream):
        row.update(stream_s=row["eager_stream_s"], stream_speedup_vs_eager=1.0)


def eager_alone(row: dict[str, Any]) -> dict[str, Any]:
    """A compiled trial's eager figures timed before its compile (the alternated ones replace them):
    one more measurement of its context's uncompiled baseline, by a process that had not compiled yet
    (`sweeper.analysis.drift.baseline_consensus`)."""
    figures = ("throughput_items_s", "witness_ms", "median_se_pct")
    alone = {f"eager_alone_{k}": row.get(f"eager_{k}") for k in figures}
    return {**alone, "eager_alone_wait_s": row.get("host_wait_s")}


def measure_warm(wb: Workbench, row: dict[str, Any], steady_step_s: float | None = None) -> None:
    """Compile again in this (new) process, whose inductor cache the cold run filled. A stream
    times the compile of its first batch's shape. The warm compile is the first call less one
    steady step: the cold process's (`steady_step_s`, the step its own compile_s left out), else
    timed here."""
    compiled = compile_model(wb)
    then_timed = steady_step_s is None  # else this process's GPU work ends with the first call
    with compile_marker(), gpu_lock.released_while_compiling(wb.trial.mode, again=then_timed):
        try:
            first, _ = timed_call(lambda: wb.first(compiled), wb.device)
        except Exception as e:
            raise classify(e, "compile") from e
    if then_timed:
        m = wb.trial.measure
        iters = calibrate(lambda: wb.step(compiled), wb.device, m.warmup_iters, m.min_window_iters, m.min_window_s)
        with gpu_lock.timing():
            steady_step_s = run_windows(lambda: wb.step(compiled), wb.device, 5, iters).median_iter_s
    row.update(warm_first_call_s=first, warm_compile_s=max(0.0, first - steady_step_s))


def measure(wb: Workbench, row: dict[str, Any], emit: Callable[[dict[str, Any]], None], warm: bool,
            mark: Callable[[str], None], steady_step_s: float | None = None, compiler: Compiler | None = None) -> None:
    """Measure the workbench's trial into `row`; raises TrialFailed on failure. `mark` is told when the references
    (and stream) are ready, and when the "eager" and "compiled" parts end. A warm run subtracts `steady_step_s`
    (the cold process's steady step) from its first call, if given; `compiler` replaces `compile_model`."""
    need = DeviceNeed(wb.device)
    if warm:
        if wb.trial.workload is not None:
            BatchStream(wb)  # feeds the stream's first batch
        measure_warm(wb, row, steady_step_s)
        row["compiled_need_reserved_gib"] = need.as_row()["mem_need_reserved_gib"]  # the compiled setting alone
        mark("compiled")
        return
    with need.excluded():  # the references' float64 copies are the check's memory, not the setting's
        feed = make_feed(wb)
    if isinstance(feed, BatchStream):
        row.update(feed.stream_row())
    mark("reference")
    with gpu_util.sampling(wb.device, wb.trial.measure.gpu_util) as gpu:
        ctx = Context(wb, feed, row, emit, need, BusyWindows(), gpu, compiler)
        eager = measure_eager(ctx)
        mark("eager")
        emit(row)
        if wb.trial.mode == "eager":
            measure_eager_only(ctx, eager)
        else:
            row.update(eager_alone(row))
            measure_compiled(ctx, eager)
            mark("compiled")
    row.update(need.as_row(), host_busy_windows_pct=ctx.busy.busy_pct)
