"""The plain training loop of issue #38, as a new user would write it, in parts the variants of
`train_step_check.py` reuse: a CPU probe, a timed window, alternated eager/compiled windows, and
the plain model, batch, optimizer and step.

The plain loop: the model built under the device (`with torch.device(...)`), random inputs and
labels, `torch.set_float32_matmul_precision`, every `p.grad = None`, the forward (bf16: under
autocast) and cross-entropy on the float logits, backward, `AdamW(lr=1e-4).step()`;
`torch.compile(model)`; eager and compiled windows of a few steps alternated, timed with CUDA
events (on the CPU: the host clock), a CPU probe timed before each window.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from sweeper import zoo
from sweeper.zoo.bundle import Batch, output_tensor

REPO = Path(__file__).resolve().parent.parent

CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")
"""Modes whose compiled steps replay CUDA graphs: each compiled step begins with a step marker."""


def cpu_probe_ms(ops: int) -> float:
    """Milliseconds of `ops` tiny CPU tensor ops (`t.add(1)` on 4 elements): the host's CPU speed
    now, as a launch-bound step feels it (one thread, the dispatcher, small allocations)."""
    t = torch.zeros(4)
    t0 = time.perf_counter()
    for _ in range(ops):
        t.add(1)
    return (time.perf_counter() - t0) * 1e3


def window_ms(step: Callable[[], object], device: torch.device, iters: int) -> float:
    """Milliseconds per step over `iters` back-to-back steps, the device idle at the start; on CUDA
    from two events around the window (one synchronization, at its end)."""
    if device.type != "cuda":
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        return (time.perf_counter() - t0) * 1e3 / iters
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iters


def _noop(arm: str) -> None:
    pass


@dataclass
class Arms:
    """What the alternated windows time: an eager and a compiled step, and hooks the variants run
    around each window, outside it (told the arm: "eager" or "compiled")."""

    eager: Callable[[], object]
    compiled: Callable[[], object]
    before: Callable[[str], None] = _noop
    after: Callable[[str], None] = _noop


@dataclass
class Timings:
    """Per-step milliseconds of each window of each arm, and the probe before each window."""

    eager_ms: list[float] = field(default_factory=list)
    compiled_ms: list[float] = field(default_factory=list)
    probe_ms: list[float] = field(default_factory=list)
    """One per window, in the order the windows ran (eager, compiled, eager, ...)."""

    def as_dict(self) -> dict[str, Any]:
        eager, compiled = statistics.median(self.eager_ms), statistics.median(self.compiled_ms)
        return {"eager_ms_median": eager, "compiled_ms_median": compiled, "speedup": eager / compiled,
                "probe_ms_median": statistics.median(self.probe_ms) if self.probe_ms else None,
                "eager_ms": self.eager_ms, "compiled_ms": self.compiled_ms, "probe_ms": self.probe_ms}


def time_pairs(arms: Arms, device: torch.device, pairs: int, iters: int, probe_ops: int) -> Timings:
    """`pairs` pairs of windows of `iters` steps, eager then compiled, each after a CPU probe."""
    out = Timings()
    for _ in range(pairs):
        for name, step, laps in (("eager", arms.eager, out.eager_ms), ("compiled", arms.compiled, out.compiled_ms)):
            out.probe_ms.append(cpu_probe_ms(probe_ops))
            arms.before(name)
            laps.append(window_ms(step, device, iters))
            arms.after(name)
    return out


def warm_up(arms: Arms, iters: int) -> None:
    """The compiling first call is the compiled arm's first step; then `iters` steps of each arm."""
    for _ in range(max(1, iters)):
        arms.compiled()
    for _ in range(iters):
        arms.eager()


@dataclass
class Plain:
    """The plain loop's objects: the model, its batch on the device, AdamW(lr=1e-4)."""

    model: nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    labels: torch.Tensor | None
    optimizer: torch.optim.Optimizer | None
    loss: Callable[[Any, Batch], torch.Tensor]
    batch: Batch


def build_plain(model_name: str, batch_size: int, train: bool, device: torch.device,
                matmul_precision: str, seq_len: int | None = None) -> Plain:
    """The zoo model (for vision: the torchvision constructor, random weights) built under `device`,
    one random batch moved there, AdamW(lr=1e-4) when training."""
    torch.manual_seed(0)
    torch.set_float32_matmul_precision(matmul_precision)
    builder = zoo.REGISTRY[model_name].builder
    module, _, fn = builder.partition(":")
    with device:
        bundle = getattr(__import__(module, fromlist=[fn]), fn)()
    model = bundle.model.to(device).train(train)
    batch = bundle.make_batch(batch_size, seq_len, torch.Generator().manual_seed(0))
    on = batch.to(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4) if train else None
    return Plain(model, on.args, on.kwargs, on.labels, opt, bundle.loss, on)


def plain_loss(out: Any, plain: Plain) -> torch.Tensor:
    """Cross-entropy on the float logits (the issue's loss); a model that returns no logits tensor
    with labels (an LM, say) is scored by its zoo loss."""
    if isinstance(out, torch.Tensor) and plain.labels is not None and out.dim() == 2:
        return nn.functional.cross_entropy(out.float(), plain.labels)
    return plain.loss(out, plain.batch)


def plain_step(plain: Plain, module: nn.Module, bf16: bool, mark_step: bool,
               optimizer: torch.optim.Optimizer | None = None) -> Callable[[], object]:
    """One step of `module` (the model, or its compiled wrapper) the plain way; `optimizer`
    replaces the plain one (a variant that restored the tool's state brings its own)."""
    opt = optimizer or plain.optimizer
    cast = (lambda: torch.autocast(plain.args[0].device.type, dtype=torch.bfloat16)) if bf16 else contextlib.nullcontext

    def train_step() -> None:
        if mark_step:
            torch.compiler.cudagraph_mark_step_begin()
        for p in plain.model.parameters():
            p.grad = None
        with cast():
            out = module(*plain.args, **plain.kwargs)
            loss = plain_loss(out, plain)
        loss.backward()
        opt.step()

    def infer_step() -> object:
        if mark_step:
            torch.compiler.cudagraph_mark_step_begin()
        with torch.no_grad(), cast():
            return output_tensor(module(*plain.args, **plain.kwargs))

    return train_step if opt is not None else infer_step


def compile_kwargs(mode: str, backend: str, dynamic: bool | None = None) -> dict[str, Any]:
    """torch.compile's arguments: the issue's `torch.compile(model)` is mode default, dynamic None."""
    kwargs: dict[str, Any] = {"backend": backend, "dynamic": dynamic}
    if backend == "inductor":
        kwargs["mode"] = mode
    return kwargs


def compile_counts() -> dict[str, int]:
    """What dynamo did in this process: graphs, graph breaks (a different compiled graph shows here)."""
    from torch._dynamo.utils import counters

    return {"graphs": int(counters["stats"]["unique_graphs"]),
            "graph_breaks": int(sum(counters["graph_break"].values()))}
