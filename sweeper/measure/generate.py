"""Phase generate: a causal LM's greedy `generate` (prefill of the prompt batch, then `new_tokens`
decoded from a KV cache), eager against compiled in alternated windows of whole calls.

transformers compiles the decode step by itself when the cache is static (on a GPU): the eager arm
turns that off (`disable_compile`) and the row records that no dynamo frame compiled while it ran.
A compiled arm is driven as transformers supports it: with a static cache through its own
`compile_config` (the decode step compiled, the prefill eager); with a dynamic cache by compiling
`model.forward` (not in the CUDA-graph modes: the grid drops those, see `generate_drop_reason`).
Whatever fails is the row's
status and error. Timing per call is `sweeper.measure.decode_timing`; windows, the host-speed
witness and intervals are those of the other phases (`sweeper.measure.matching`, `timing`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from sweeper.measure import accuracy, gpu_lock, matching
from sweeper.measure.decode_timing import CallLog, decode_interval, summary, timed_generate
from sweeper.measure.failures import TrialFailed, classify
from sweeper.measure.health import Health, watch_compiles
from sweeper.measure.memory import DeviceNeed, MemoryTracker
from sweeper.measure.neighbours import BusyWindows, compile_marker
from sweeper.measure.pipeline import EAGER_BASELINE, eager_alone, relative_to_eager
from sweeper.measure.timing import Arm, calibrate, speedup_interval, timed_call
from sweeper.measure.workbench import Workbench

Call = Callable[..., Any]
"""One whole generate call: call(streamer, **extra generate kwargs) -> its output."""


def prepare(wb: Workbench) -> dict[str, Any]:
    """The model ready to generate (bf16: its weights in bf16, as LLM users load it; the cache follows
    the weights' dtype), and the generate keywords every arm shares."""
    t, model = wb.trial, wb.model
    if not hasattr(model, "generate"):
        raise TrialFailed("runtime_error", f"phase generate needs a model with `generate`: {type(model).__name__}")
    if t.precision == "bf16":
        model.to(torch.bfloat16)
    model.config.use_cache = True
    model.generation_config.eos_token_id = None  # random weights: every call decodes all new_tokens
    kw = wb.batch.kwargs
    return {"input_ids": kw["input_ids"], "attention_mask": kw.get("attention_mask"), "do_sample": False,
            "max_new_tokens": t.new_tokens, "min_new_tokens": t.new_tokens, "use_cache": True, "pad_token_id": 0,
            # a dynamic cache is generate's default: named only where every transformers version knows the name
            **({"cache_implementation": "static"} if t.cache == "static" else {})}


def eager_call(wb: Workbench, base: dict[str, Any]) -> Call:
    return lambda streamer=None, **extra: wb.model.generate(**base, disable_compile=True, streamer=streamer, **extra)


def compiled_call(wb: Workbench, base: dict[str, Any]) -> tuple[Call, str]:
    """The compiled arm and how it is compiled: compile_config (static cache) or forward (dynamic)."""
    t, m = wb.trial, wb.trial.measure
    torch._dynamo.reset()
    if m.recompile_limit:
        torch._dynamo.config.recompile_limit = m.recompile_limit
    mode = t.mode if m.backend == "inductor" else None
    if t.cache == "static":
        from transformers import CompileConfig

        cfg = CompileConfig(fullgraph=False, dynamic=t.dynamic, backend=m.backend, mode=mode)
        cfg._compile_all_devices = wb.device.type != "cuda"  # transformers compiles on GPUs only, unless told
        return (lambda streamer=None, **extra: wb.model.generate(**base, compile_config=cfg, streamer=streamer,
                                                                 **extra)), "compile_config"
    forward = torch.compile(wb.model.forward, backend=m.backend, mode=mode, dynamic=t.dynamic)

    def call(streamer=None, **extra: Any) -> Any:
        saved = vars(wb.model).pop("forward", None)
        wb.model.forward = forward
        try:
            return wb.model.generate(**base, disable_compile=True, streamer=streamer, **extra)
        finally:
            del wb.model.forward
            if saved is not None:
                wb.model.forward = saved
    return call, "forward"


def with_logits(call: Call, streamer: Any = None) -> list[torch.Tensor]:
    """The call's [per-step logits (steps, batch, vocab), float32 or wider; new tokens (batch, steps)], on the host."""
    out = call(streamer, output_logits=True, return_dict_in_generate=True)
    logits = torch.stack(out.logits).detach()
    new = out.sequences[:, -len(out.logits):]
    return [logits.to(torch.promote_types(logits.dtype, torch.float32)).cpu(), new.cpu()]


def fp64_reference(wb: Workbench, base: dict[str, Any]) -> accuracy.Reference:
    def capture(model64: torch.nn.Module, batch64: Any) -> list[torch.Tensor]:
        kw = {**base, "input_ids": batch64.kwargs["input_ids"], "attention_mask": batch64.kwargs.get("attention_mask")}
        return with_logits(lambda s=None, **extra: model64.generate(**kw, disable_compile=True, streamer=s, **extra))
    return accuracy.fp64_reference(wb.model, wb.batch, wb.device, capture)


def _first_divergence(*tokens: torch.Tensor) -> int:
    """Steps whose logits were computed from the same prefix in every run: up to the first differing token."""
    steps = tokens[0].shape[1]
    for i in range(steps):
        if any(not torch.equal(t[:, i], tokens[0][:, i]) for t in tokens[1:]):
            return i + 1
    return steps


def judge(wb: Workbench, eager: list[torch.Tensor], compiled: list[torch.Tensor],
          ref: accuracy.Reference) -> dict[str, Any]:
    """Logits of the steps with a common prefix against float64 (as the other phases), and the token match."""
    t = wb.trial
    runs = [eager[1], compiled[1], *([ref.tensors[1]] if ref.tensors else [])]
    k = _first_divergence(*runs)
    cut = accuracy.Reference([ref.tensors[0][:k]] if ref.tensors else [], ref.source, ref.note)
    tol = t.measure.accuracy_tol or accuracy.default_tolerance(t.precision, t.measure.matmul_precision)
    verdict = accuracy.judge(cut, [eager[0][:k]], [compiled[0][:k]], tol, t.precision)
    match = (eager[1] == compiled[1]).float().mean().item()
    return {**verdict.as_row(), "tokens_match_rate": match}


class Arms:
    """The arms' windows of whole calls, watched for compiling neighbours and memory."""

    def __init__(self, wb: Workbench, need: DeviceNeed):
        self.wb, self.busy, self.mem = wb, BusyWindows(), MemoryTracker(wb.device, need)
        self.peak_gib = 0.0

    def calls_per_window(self, call: Call) -> int:
        m, n = self.wb.trial.measure, self.wb.trial.new_tokens
        return calibrate(lambda: timed_generate(call, self.wb.device, n), self.wb.device, m.warmup_iters,
                         m.min_window_iters, m.min_window_s)

    def arm(self, call: Call, calls: int, watch_mem: bool) -> tuple[Arm, CallLog]:
        log = CallLog(self.wb.device, self.wb.trial.new_tokens)

        def before() -> None:
            self.busy.before()
            if watch_mem:
                self.mem.reset()

        def after() -> None:
            self.busy.after()
            if watch_mem:
                self.peak_gib = max(self.peak_gib, self.mem.peak_gib())
        return Arm(log.window(call, calls), calls, before, after), log


def _wait_s(wb: Workbench) -> float:
    return matching.wait_allowance_s(wb.trial.measure.host_wait_s, wb.device.type)


def _target_pct(wb: Workbench) -> float | None:
    return matching.target_se_pct(wb.trial.measure.target_se_pct, wb.device.type)


def _arm_row(m: matching.Matched, k: int, log: CallLog, prefix: str, batch: int, tokens: int) -> dict[str, Any]:
    """One arm's figures over the headline's windows ("": the compiled arm, or an eager trial's own)."""
    stats = m.headline(k)
    row = {**summary(log, m.headline_pairs, batch, prefix), f"{prefix}throughput_items_s": stats.throughput(batch),
           f"{prefix}latency_p50_ms": stats.percentile_ms(50)}
    if prefix:
        return {**row, "eager_spread_pct": stats.spread_pct}
    return {**row, "throughput_tokens_s": stats.throughput(batch * tokens), "latency_p90_ms": stats.percentile_ms(90),
            "latency_p99_ms": stats.percentile_ms(99), "throughput_spread_pct": stats.spread_pct,
            "iters_per_window": stats.iters_per_window}


def measure_eager(wb: Workbench, row: dict[str, Any], arms: Arms, eager: Call) -> None:
    """Eager alone; the dynamo frames compiled meanwhile (none, when transformers' compile is off) go in the row."""
    t = wb.trial
    arms.mem.reset()
    with watch_compiles():
        from torch._dynamo.utils import counters

        try:
            calls = arms.calls_per_window(eager)
            arm, log = arms.arm(eager, calls, watch_mem=False)
            counts = t.mode == "eager"  # else the eager-alone fallback of a compiled trial
            m = matching.run_matched([arm], t.measure.windows, _wait_s(wb) if counts else 0.0,
                                     _target_pct(wb) if counts else None, fast_rounds=_wait_s(wb) > 0)
        except Exception as e:
            raise classify(e, "run") from e
        row["eager_compiled_frames"] = int(counters["frames"]["ok"])
    row.update(m.row(["eager_"]), **_arm_row(m, 0, log, "eager_", t.batch_size, t.new_tokens),
               eager_peak_mem_gib=arms.mem.peak_gib())
    if t.mode == "eager":
        for k in ("witness_ms", "gpu_clock_mhz", "peak_mem_gib", "median_se_pct"):
            row[k] = row[f"eager_{k}"]
        row.update(_arm_row(m, 0, log, "", t.batch_size, t.new_tokens), peak_mem_compile_gib=row["peak_mem_gib"],
                   peak_reserved_gib=arms.mem.peak_reserved_gib(), decode_speedup_vs_eager=1.0,
                   ttft_speedup_vs_eager=1.0, decode_speedup_ci_low=1.0, decode_speedup_ci_high=1.0,
                   tokens_match_rate=1.0, **EAGER_BASELINE)


def measure_compiled(wb: Workbench, row: dict[str, Any], emit: Callable[[dict], None], arms: Arms,
                     eager: Call, base: dict[str, Any]) -> None:
    """Compile (first call timed, accuracy checked), then alternate eager and compiled windows."""
    t = wb.trial
    eager_out = with_logits(eager)
    ref = fp64_reference(wb, base)
    compiled, path = compiled_call(wb, base)
    row["generate_compile_path"] = path
    health = Health()
    arms.mem.reset()
    try:
        with watch_compiles() as health:
            with compile_marker():
                try:
                    row["first_call_s"], got = timed_call(lambda: with_logits(compiled), wb.device)
                except Exception as e:
                    raise classify(e, "compile") from e
            compile_peak = arms.mem.peak_gib()
            row.update(judge(wb, eager_out, got, ref))
            emit(row)
            try:
                arms.mem.reset()
                calls = arms.calls_per_window(compiled)
                arms.peak_gib = arms.mem.peak_gib()  # CUDA-graph pools are filled in the warm-up
                arms.calls_per_window(eager)
                (e_arm, e_log), (c_arm, c_log) = arms.arm(eager, calls, False), arms.arm(compiled, calls, True)
                m = matching.run_matched([e_arm, c_arm], t.measure.windows, _wait_s(wb), _target_pct(wb),
                                         fast_rounds=_wait_s(wb) > 0)
            except Exception as e:
                raise classify(e, "run") from e
    finally:
        row.update(health.as_row(), fell_back_to_eager=health.recompile_limit_hit)
    if path == "compile_config" and not health.graphs:
        row["notes"] = "transformers did not compile the decode step (its compile criteria refused this setting)"
    _compiled_figures(wb, row, m, e_log, c_log, arms, compile_peak)


def _compiled_figures(wb: Workbench, row: dict[str, Any], m: matching.Matched, e_log: CallLog, c_log: CallLog,
                      arms: Arms, compile_peak: float) -> None:
    """The compiled row's headline figures, its compile cost and its ratios to the alternated eager."""
    t = wb.trial
    row.update(m.row(["eager_", ""]), **_arm_row(m, 0, e_log, "eager_", t.batch_size, t.new_tokens),
               **_arm_row(m, 1, c_log, "", t.batch_size, t.new_tokens),
               peak_mem_gib=arms.peak_gib, peak_mem_compile_gib=max(compile_peak, arms.peak_gib),
               peak_reserved_gib=arms.mem.peak_reserved_gib())
    row["compile_s"] = max(0.0, row["first_call_s"] - row["generate_s"])
    gain = row["eager_generate_s"] - row["generate_s"]
    row["break_even_iters"] = row["compile_s"] / gain if gain > 0 else float("inf")
    relative_to_eager(row)
    e_dec, c_dec = row["eager_decode_tokens_per_s"], row["decode_tokens_per_s"]
    row["decode_speedup_vs_eager"] = c_dec / e_dec if e_dec and c_dec else None
    row["ttft_speedup_vs_eager"] = row["eager_ttft_ms"] / row["ttft_ms"]
    low_high = decode_interval(e_log, c_log, m.headline_pairs, t.measure.seed)
    row["decode_speedup_ci_low"], row["decode_speedup_ci_high"] = low_high
    row["speedup_ci_low"], row["speedup_ci_high"] = speedup_interval(m.headline(0), m.headline(1), t.measure.seed)


def measure_warm(wb: Workbench, row: dict[str, Any], base: dict[str, Any], steady_step_s: float | None) -> None:
    compiled, _ = compiled_call(wb, base)
    with compile_marker():
        try:
            first, _ = timed_call(compiled, wb.device)
        except Exception as e:
            raise classify(e, "compile") from e
    if steady_step_s is None:
        with gpu_lock.timing():
            steady_step_s = min(timed_call(compiled, wb.device)[0] for _ in range(3))
    row.update(warm_first_call_s=first, warm_compile_s=max(0.0, first - steady_step_s))


def measure(wb: Workbench, row: dict[str, Any], emit: Callable[[dict[str, Any]], None], warm: bool,
            mark: Callable[[str], None], steady_step_s: float | None = None) -> None:
    """Measure a generate trial into `row` (the pipeline's contract: raises TrialFailed on failure)."""
    t = wb.trial
    row.update(new_tokens=t.new_tokens, cache=t.cache, eager_disable_compile=True)
    base = prepare(wb)
    need = DeviceNeed(wb.device)
    if warm:
        measure_warm(wb, row, base, steady_step_s)
        row["compiled_need_reserved_gib"] = need.as_row()["mem_need_reserved_gib"]
        mark("compiled")
        return
    mark("reference")
    arms = Arms(wb, need)
    eager = eager_call(wb, base)
    measure_eager(wb, row, arms, eager)
    mark("eager")
    emit(row)
    if t.mode != "eager":
        row.update(eager_alone(row))
        measure_compiled(wb, row, emit, arms, eager, base)
        mark("compiled")
    row.update(need.as_row(), host_busy_windows_pct=arms.busy.busy_pct)
