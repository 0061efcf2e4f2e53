"""One variant of `train_step_check.py` in this (fresh) process: the plain loop, the plain loop with
one of the tool's differences switched on, or the tool's own measuring process.

    python -m benchmarks.train_step_variants --variant NAME --setting SETTING.json --out RESULT.json

Run by `train_step_check.py`, one process per variant, one after the other. Each in-process variant
builds, compiles and times in the plain loop's way (`train_step_loop.time_pairs`) unless timing is
the difference it switches on; `pipeline`, `forkserver` and `sweep` run the tool's own code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from benchmarks import train_step_tool
from benchmarks.train_step_loop import (
    CUDAGRAPH_MODES,
    Arms,
    Plain,
    Timings,
    build_plain,
    compile_counts,
    compile_kwargs,
    cpu_probe_ms,
    plain_step,
    time_pairs,
    warm_up,
)
from sweeper.measure import gpu_util, pipeline
from sweeper.measure.feeds import FixedBatch
from sweeper.measure.health import watch_compiles
from sweeper.measure.memory import DeviceNeed, MemoryTracker
from sweeper.measure.neighbours import BusyWindows
from sweeper.measure.timing import Arm, calibrate, fixed_window, run_interleaved
from sweeper.measure.workbench import Workbench, build_workbench
from sweeper.spec.sweep_spec import parse_spec
from sweeper.spec.trials import Trial, expand


@dataclass
class Setting:
    """What every variant of one comparison shares (written by the driver as JSON)."""

    model: str
    phase: str
    precision: str
    matmul_precision: str
    batch: int
    mode: str
    backend: str
    device: str
    pairs: int
    iters: int
    warmup: int
    probe_ops: int
    measure: dict[str, Any]
    """The tool's measure section for its trial (windows, floors, NVML sampling)."""
    cache_dir: str
    """Root of the inductor and Triton caches the driver gave this process (TORCHINDUCTOR_CACHE_DIR
    is CACHE_DIR/inductor): the tool's processes get the same."""
    timeout_s: float = 600.0

    @property
    def dev(self) -> torch.device:
        return torch.device(self.device)

    @property
    def bf16(self) -> bool:
        return self.precision == "bf16"

    @property
    def mark(self) -> bool:
        return self.mode in CUDAGRAPH_MODES and self.backend == "inductor"

    def spec(self) -> dict[str, Any]:
        """The one-trial sweep spec of this setting."""
        return {"name": "train-step-check", "models": [{"name": self.model}],
                "axes": {"mode": [self.mode], "dynamic": [False], "batch_size": [self.batch], "phase": [self.phase],
                         "precision": [self.precision]},
                "measure": {**self.measure, "matmul_precision": self.matmul_precision, "backend": self.backend,
                            "trial_timeout_s": self.timeout_s},
                "resources": {"device": self.device}}

    def trial(self) -> Trial:
        trials, dropped = expand(parse_spec(self.spec()))
        if not trials:
            raise ValueError(f"the tool runs no such trial: {dropped[0].config}: {dropped[0].reason}")
        return trials[0]


def _timed(arms: Arms, s: Setting) -> dict[str, Any]:
    warm_up(arms, s.warmup)
    return {**time_pairs(arms, s.dev, s.pairs, s.iters, s.probe_ops).as_dict(), **compile_counts()}


def _plain_arms(s: Setting, plain: Plain, dynamic: bool | None = None, **hooks: Callable[[str], None]) -> Arms:
    compiled = torch.compile(plain.model, **compile_kwargs(s.mode, s.backend, dynamic))
    return Arms(plain_step(plain, plain.model, s.bf16, False), plain_step(plain, compiled, s.bf16, s.mark), **hooks)


def _plain(s: Setting) -> Plain:
    return build_plain(s.model, s.batch, s.phase == "train", s.dev, s.matmul_precision)


def _from_workbench(wb: Workbench) -> Plain:
    b = wb.batch
    return Plain(wb.model, b.args, b.kwargs, b.labels, wb.optimizer, wb.bundle.loss, b)


def v_plain(s: Setting) -> dict[str, Any]:
    """The issue's loop (also `affinity`: the same loop in a process the driver pinned as the tool would)."""
    return _timed(_plain_arms(s, _plain(s)), s)


def v_dynamic(s: Setting) -> dict[str, Any]:
    """The plain loop compiled with dynamic=False, as the tool compiles (the issue: dynamic None)."""
    return _timed(_plain_arms(s, _plain(s), dynamic=False), s)


def v_tool_build(s: Setting) -> dict[str, Any]:
    """The tool's model, batch and optimizer (build_workbench: seeds, zero_dropout, train mode), plain step."""
    return _timed(_plain_arms(s, _from_workbench(build_workbench(s.trial(), s.dev))), s)


def _tool_arms(s: Setting, **hooks: Callable[[str], None]) -> tuple[Workbench, torch.nn.Module, Arms]:
    wb = build_workbench(s.trial(), s.dev)
    compiled = pipeline.compile_model(wb)
    return wb, compiled, Arms(lambda: wb.step(wb.model), lambda: wb.step(compiled), **hooks)


def v_tool_step(s: Setting) -> dict[str, Any]:
    """The tool's Workbench.step (its loss, its optimizer, compile_model's torch.compile) in the plain loop."""
    return _timed(_tool_arms(s)[2], s)


def v_tool_timing(s: Setting) -> dict[str, Any]:
    """The tool's step timed the tool's way: calibrate (warm-up, window length from the time floor),
    an event per step, the trial's number of windows (measure.windows) alternated by run_interleaved;
    the probe before each window."""
    wb, compiled, _ = _tool_arms(s)
    m, out = wb.trial.measure, Timings()
    wb.first(compiled)
    iters = {k: calibrate(lambda mod=mod: wb.step(mod), s.dev, m.warmup_iters, m.min_window_iters, m.min_window_s)
             for k, mod in (("compiled", compiled), ("eager", wb.model))}

    def probe() -> None:
        out.probe_ms.append(cpu_probe_ms(s.probe_ops))

    arms = [Arm(fixed_window(lambda mod=mod: wb.step(mod), s.dev, iters[k]), iters[k], probe)
            for k, mod in (("eager", wb.model), ("compiled", compiled))]
    eager, comp = run_interleaved(arms, m.windows)
    out.eager_ms = [w / eager.iters_per_window * 1e3 for w in eager.window_s]
    out.compiled_ms = [w / comp.iters_per_window * 1e3 for w in comp.window_s]
    return {**out.as_dict(), **compile_counts(), "iters_per_window": iters}


def v_sampler(s: Setting) -> dict[str, Any]:
    """The plain loop with the NVML sampler thread running during each window, as in a trial."""
    utils = {"eager": gpu_util.ArmUtil(), "compiled": gpu_util.ArmUtil()}
    with gpu_util.sampling(s.dev) as sampler:
        if sampler is None:
            result = v_plain(s)
            return {**result, "note": f"no NVML sampler on {s.device}: timed without it (this is `plain`)"}
        arms = _plain_arms(s, _plain(s), before=lambda arm: sampler.begin(utils[arm]), after=lambda arm: sampler.end())
        result = _timed(arms, s)
    return {**result, **utils["compiled"].as_row(""), **utils["eager"].as_row("eager_")}


def v_markers(s: Setting) -> dict[str, Any]:
    """The plain loop with the neighbours' marker-file check before and after each window."""
    busy = BusyWindows()
    result = _timed(_plain_arms(s, _plain(s), before=lambda arm: busy.before(), after=lambda arm: busy.after()), s)
    return {**result, "host_busy_windows_pct": busy.busy_pct}


def v_memory(s: Setting) -> dict[str, Any]:
    """The plain loop with the trial's memory tracking around each window (peaks reset, device need sampled)."""
    mem = MemoryTracker(s.dev, DeviceNeed(s.dev))
    return _timed(_plain_arms(s, _plain(s), before=lambda arm: mem.reset(), after=lambda arm: mem.peak_gib()), s)


def v_hooks(s: Setting) -> dict[str, Any]:
    """The plain loop with everything a trial runs around its windows, the pipeline's own watch: marker
    check, memory reset and read (compiled arm), the NVML sampler."""
    with gpu_util.sampling(s.dev, s.measure.get("gpu_util", True)) as sampler:
        need, busy = DeviceNeed(s.dev), BusyWindows()
        watch = {"eager": pipeline._Watch(busy, None, sampler),
                 "compiled": pipeline._Watch(busy, MemoryTracker(s.dev, need), sampler)}
        arms = _plain_arms(s, _plain(s), before=lambda arm: watch[arm].before(), after=lambda arm: watch[arm].after())
        return {**_timed(arms, s), "sampled": sampler is not None}


def v_health(s: Setting) -> dict[str, Any]:
    """The plain loop, compile and windows inside the trial's compile-health watch (its log handler)."""
    with watch_compiles() as health:
        result = _timed(_plain_arms(s, _plain(s)), s)
    return {**result, **health.as_row()}


def v_restored(s: Setting) -> dict[str, Any]:
    """What a trial does before its compiled windows, then the plain step on what it leaves: eager and
    float64 references, eager warm-up and windows, restore_initial_state (weights loaded back, a new
    AdamW), the compiling first call and the accuracy check (FixedBatch.first_compiled)."""
    wb = build_workbench(s.trial(), s.dev)
    need = DeviceNeed(s.dev)
    with need.excluded():
        feed = FixedBatch(wb)
    row: dict[str, Any] = {}
    iters = feed.warm_up(wb.model, row, "eager_")
    run_interleaved([Arm(feed.window(wb.model, iters), iters)], feed.windows)
    wb.restore_initial_state()
    if s.dev.type == "cuda":
        torch.cuda.empty_cache()
    compiled = torch.compile(wb.model, **compile_kwargs(s.mode, s.backend))
    verdict, _ = feed.first_compiled(compiled, row, MemoryTracker(s.dev, need), need)
    plain = _from_workbench(wb)  # the optimizer is the restored one
    arms = Arms(plain_step(plain, wb.model, s.bf16, False), plain_step(plain, compiled, s.bf16, s.mark))
    return {**_timed(arms, s), "accuracy_ok": verdict.accuracy_ok}


VARIANTS: dict[str, Callable[[Setting], dict[str, Any]]] = {
    "plain": v_plain, "dynamic": v_dynamic, "tool_build": v_tool_build, "tool_step": v_tool_step,
    "tool_timing": v_tool_timing, "sampler": v_sampler, "markers": v_markers, "memory": v_memory, "hooks": v_hooks,
    "health": v_health, "restored": v_restored, "affinity": v_plain, "pipeline": train_step_tool.v_pipeline,
    "forkserver": train_step_tool.v_forkserver, "sweep": train_step_tool.v_sweep,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", required=True, choices=sorted(VARIANTS))
    ap.add_argument("--setting", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    s = Setting(**json.loads(args.setting.read_text()))
    t0 = time.monotonic()
    try:
        result = VARIANTS[args.variant](s)
    except Exception as e:
        result = {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:500]}
    process = {"cpu_affinity": sorted(os.sched_getaffinity(0)), "torch_threads": torch.get_num_threads(),
               "variant_s": round(time.monotonic() - t0, 2), "loadavg_1m": os.getloadavg()[0]}
    args.out.write_text(json.dumps({**result, **process}))
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the result is written: skip the teardown (compile workers, CUDA context), as the tool does
