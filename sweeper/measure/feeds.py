"""What a trial feeds its model, as small strategies of the one measurement pipeline.

`FixedBatch`: one batch; a timed window is a calibrated number of back-to-back steps, and the
first compiled call compiles. `BatchStream`: a stream of batches of varying shapes; a timed
window is one pass over the stream, and the first pass compiles every shape it meets (its
seconds are the stream's end-to-end cost). The pipeline (`sweeper.measure.pipeline`) times,
alternates, checks and reports the same way for both.
"""

from __future__ import annotations

import logging
import math
import statistics
from typing import Any

import torch
from torch import nn

from sweeper.measure import accuracy, gpu_lock, input_stream
from sweeper.measure.input_stream import Stream
from sweeper.measure.memory import DeviceNeed, MemoryTracker
from sweeper.measure.timing import Window, WindowStats, calibrate, fixed_window, timed_call
from sweeper.measure.workbench import Workbench
from sweeper.zoo.bundle import output_tensor

log = logging.getLogger(__name__)


def check(wb: Workbench, batch: Any, compiled_out: list[torch.Tensor], eager_out: list[torch.Tensor],
          ref: accuracy.Reference) -> accuracy.Verdict:
    t = wb.trial
    tol = t.measure.accuracy_tol or accuracy.default_tolerance(t.precision, t.measure.matmul_precision)
    return accuracy.judge(ref, eager_out, compiled_out, tol, t.precision)


class FixedBatch:
    """One batch of fixed shape. A compiled trial's eager and float64 references are taken before
    anything runs (training changes the weights), and kept on the host so they weigh on no peak;
    an eager trial compares nothing and takes none."""

    kind = "fixed"

    def __init__(self, wb: Workbench):
        self.wb = wb
        self.eager_ref: list[torch.Tensor] = []
        self.fp64: accuracy.Reference | None = None
        if wb.trial.mode != "eager":
            self.eager_ref = [t.cpu() for t in wb.capture(wb.model)]
            self.fp64 = accuracy.fp64_reference(wb.model, wb.batch, wb.device, self._capture64)

    def _capture64(self, model64: nn.Module, batch64: Any) -> list[torch.Tensor]:
        return self.wb.capture(model64, batch64, autocast=False)

    @property
    def windows(self) -> int:
        return self.wb.trial.measure.windows

    def items_per_iter(self) -> float:
        return self.wb.batch.items

    def tokens_per_iter(self) -> float | None:
        return self.wb.batch.tokens

    def warm_up(self, module: nn.Module, row: dict[str, Any], prefix: str) -> int:
        """Warm-up steps; returns the steps per window that meet both floors."""
        m = self.wb.trial.measure
        return calibrate(lambda: self.wb.step(module), self.wb.device, m.warmup_iters, m.min_window_iters,
                         m.min_window_s)

    def window(self, module: nn.Module, iters: int) -> Window:
        return fixed_window(lambda: self.wb.step(module), self.wb.device, iters)

    def first_compiled(self, compiled: nn.Module, row: dict[str, Any], mem: MemoryTracker,
                       need: DeviceNeed) -> tuple[accuracy.Verdict, float]:
        """The compiling call (row gets first_call_s), then the accuracy check; returns the verdict
        and the peak memory of the call, the check's own memory left out (of the need too). The
        references stay on the host; the check brings them to the device a chunk at a time."""
        with gpu_lock.released_while_compiling(self.wb.trial.mode):
            secs, got = timed_call(lambda: self.wb.first(compiled), self.wb.device)
        row["first_call_s"] = secs
        peak = mem.peak_gib()
        with need.excluded():
            verdict = check(self.wb, self.wb.batch, got, self.eager_ref, self.fp64)
            del got
        mem.reset()
        return verdict, peak

    def timing_row(self, prefix: str, stats: WindowStats) -> dict[str, Any]:
        row = {f"{prefix}throughput_items_s": stats.throughput(self.items_per_iter()),
               f"{prefix}latency_p50_ms": stats.percentile_ms(50)}
        if not prefix:
            tokens = self.tokens_per_iter()
            row.update(throughput_tokens_s=stats.throughput(tokens) if tokens else None)
        return row

    def compile_row(self, row: dict[str, Any], stats: WindowStats, eager: WindowStats) -> None:
        row["compile_s"] = max(0.0, row["first_call_s"] - stats.median_iter_s)
        gain = eager.median_iter_s - stats.median_iter_s
        row["break_even_iters"] = row["compile_s"] / gain if gain > 0 else math.inf


class BatchStream:
    """A stream of batches; one window is one pass. Compiled outputs are checked on the real
    positions of the first batch of each distinct shape, against eager and float64 runs of that
    batch made at the check (inference only: the weights do not change)."""

    kind = "stream"

    def __init__(self, wb: Workbench):
        self.wb = wb
        self.stream: Stream = input_stream.build_stream(wb.trial, wb.bundle, wb.device)
        wb.batch = self.stream.batches[0].batch
        self.first_pass: dict[str, list[float]] = {}

    @property
    def windows(self) -> int:
        return self.wb.trial.workload.steady_passes

    def items_per_iter(self) -> float:
        return self.stream.items / len(self.stream.batches)

    def tokens_per_iter(self) -> float | None:
        tokens = self.stream.real_tokens
        return tokens / len(self.stream.batches) if tokens is not None else None

    def _pass(self, module: nn.Module, after=None) -> list[float]:
        times = []
        for sb in self.stream.batches:
            self.wb.batch = sb.batch
            secs, out = timed_call(lambda: self.wb.step(module), self.wb.device)
            times.append(secs)
            if after is not None:
                after(sb, out)  # outside the timed call
        self.wb.batch = self.stream.batches[0].batch
        return times

    def warm_up(self, module: nn.Module, row: dict[str, Any], prefix: str) -> int:
        """Eager: its first pass is its warm-up and its end-to-end stream time. Compiled: the
        first pass (in `first_compiled`) already met every shape."""
        if module is self.wb.model and f"{prefix}stream_s" not in row:
            with gpu_lock.timing():  # a timed figure (the eager stream's end to end)
                self.first_pass[prefix] = self._pass(module)
            row[f"{prefix}stream_s"] = sum(self.first_pass[prefix])
        return len(self.stream.batches)

    def window(self, module: nn.Module, iters: int) -> Window:
        return lambda: self._pass(module)

    def first_compiled(self, compiled: nn.Module, row: dict[str, Any], mem: MemoryTracker,
                       need: DeviceNeed) -> tuple[accuracy.Verdict, float]:
        """The compiling first pass, checking the first batch of each new shape after its step;
        the checks' own memory is kept out of the returned peak (saved before, reset after) and
        out of the need."""
        seen: set[input_stream.Shape] = set()
        verdicts: list[accuracy.Verdict] = []
        peak = 0.0

        def after(sb: input_stream.StreamBatch, out: Any) -> None:
            nonlocal peak
            if sb.shape not in seen:
                seen.add(sb.shape)
                peak = max(peak, mem.peak_gib())
                with need.excluded():
                    verdicts.append(self._check(sb, out))
                mem.reset()

        with gpu_lock.released_while_compiling(self.wb.trial.mode):  # the pass compiles each new shape (and checks it)
            self.first_pass[""] = self._pass(compiled, after)
        row.update(first_call_s=self.first_pass[""][0], stream_s=sum(self.first_pass[""]),
                   accuracy_shapes=len(seen))
        return accuracy.worst(verdicts), max(peak, mem.peak_gib())

    def _check(self, sb: input_stream.StreamBatch, out: Any) -> accuracy.Verdict:
        real = [input_stream.real_positions(output_tensor(out).detach().float(), sb.batch)]
        eager = [input_stream.real_positions(self.wb.capture(self.wb.model, sb.batch)[0], sb.batch)]
        ref = accuracy.fp64_reference(self.wb.model, sb.batch, self.wb.device,
                                      lambda m, b: self.wb.capture(m, b, autocast=False))
        ref.tensors = [input_stream.real_positions(t, sb.batch) for t in ref.tensors]
        return check(self.wb, sb.batch, real, eager, ref)

    def timing_row(self, prefix: str, stats: WindowStats) -> dict[str, Any]:
        tokens = self.tokens_per_iter()
        row = {f"{prefix}throughput_items_s": stats.throughput(self.items_per_iter()),
               f"{prefix}real_tokens_per_s": stats.throughput(tokens) if tokens is not None else None,
               f"{prefix}latency_p50_ms": stats.percentile_ms(50)}
        if not prefix:
            row["throughput_tokens_s"] = row["real_tokens_per_s"]
        return row

    def _overhead_s(self, prefix: str, stats: WindowStats) -> float:
        """First pass minus the steady time of the same batches: compiling and first-touch costs."""
        n = len(self.stream.batches)
        per_batch = [stats.iter_s[i::n] for i in range(n)]
        return max(0.0, sum(self.first_pass[prefix]) - sum(statistics.median(ts) for ts in per_batch))

    def compile_row(self, row: dict[str, Any], stats: WindowStats, eager: WindowStats) -> None:
        n = len(self.stream.batches)
        overhead = self._overhead_s("", stats)
        row["compile_s"] = max(0.0, self.first_pass[""][0] - statistics.median(stats.iter_s[0::n]))
        row["stream_compile_s"] = overhead
        row["compile_s_per_shape"] = overhead / self.stream.n_shapes
        gain = eager.median_iter_s - stats.median_iter_s  # steady seconds saved per batch
        extra = max(0.0, overhead - self._overhead_s("eager_", eager))
        row["stream_break_even_batches"] = extra / gain if gain > 0 else math.inf
        row["break_even_iters"] = row["stream_break_even_batches"]
        row["stream_speedup_vs_eager"] = row["eager_stream_s"] / row["stream_s"]

    def stream_row(self) -> dict[str, Any]:
        s = self.stream
        return {"stream_batches": len(s.batches), "stream_shapes": s.n_shapes, "pad_waste": s.pad_waste}
