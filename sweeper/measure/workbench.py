"""Everything one trial runs on: the model on its device, one batch, the step functions, and
the eager reference outputs that compiled results are checked against."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from sweeper.measure.memory import cap_memory
from sweeper.measure.timing import sync
from sweeper.results.schema import CUDAGRAPH_MODES
from sweeper.spec.trials import Trial
from sweeper.zoo import sources
from sweeper.zoo.bundle import Batch, Bundle, output_tensor

"""Modes whose compiled graphs are replayed as CUDA graphs."""


def build_bundle(trial: Trial, device: torch.device | None = None) -> Bundle:
    """The trial's model and input maker, from whichever source the spec names, built under `device`
    (sweeper.zoo.sources.build_placed: a factory that cannot build there is built on the host)."""
    return sources.build(trial.model, device)


def zero_dropout(model: nn.Module) -> None:
    """Train trials run without dropout so compiled and eager gradients can be compared."""
    for mod in model.modules():
        if isinstance(mod, nn.modules.dropout._DropoutNd):
            mod.p = 0.0
        for name, val in list(vars(mod).items()):
            if "dropout" in name.lower() and isinstance(val, float):
                setattr(mod, name, 0.0)


@dataclass
class Workbench:
    trial: Trial
    device: torch.device
    model: nn.Module
    bundle: Bundle
    batch: Batch
    """The batch that `step` feeds (a stream swaps it batch by batch)."""
    optimizer: torch.optim.Optimizer | None = None
    built_on: str = "host"
    """Where the model's weights were made (sweeper.zoo.sources.build_placed): device, host, or host: why."""
    blocks: tuple[str, ...] = ()
    """Class names of the blocks a regional trial compiles (measure.regions.plan_regions)."""
    _initial: dict[str, torch.Tensor] | None = None

    @property
    def train(self) -> bool:
        return self.trial.phase == "train"

    def _autocast(self, on: bool = True):
        if on and self.trial.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _mark_step(self, module: nn.Module) -> None:
        if module is not self.model and self.trial.mode in CUDAGRAPH_MODES:
            torch.compiler.cudagraph_mark_step_begin()

    def _fwd_bwd(self, module: nn.Module, batch: Batch, autocast: bool = True) -> Any:
        for p in module.parameters():
            p.grad = None
        with self._autocast(autocast):
            out = module(*batch.args, **batch.kwargs)
            loss = self.bundle.loss(out, batch)
        loss.backward()
        return out

    def step(self, module: nn.Module) -> Any:
        """One timed iteration: a no-grad forward, or forward + backward + optimizer step."""
        self._mark_step(module)
        if not self.train:
            with torch.no_grad(), self._autocast():
                return module(*self.batch.args, **self.batch.kwargs)
        out = self._fwd_bwd(module, self.batch)
        self.optimizer.step()
        return out

    def capture(self, module: nn.Module, batch: Batch | None = None, autocast: bool = True) -> list[torch.Tensor]:
        """One call of `module` (no optimizer step), returning what accuracy compares: the output
        and, in training, the flattened gradients, as copies in float32 or wider."""
        batch = batch if batch is not None else self.batch
        self._mark_step(module)
        if self.train:
            out = self._fwd_bwd(module, batch, autocast)
        else:
            with torch.no_grad(), self._autocast(autocast):
                out = module(*batch.args, **batch.kwargs)
        got = [_widened(output_tensor(out))]
        if self.train:
            grads = [p.grad.detach().flatten() for p in module.parameters() if p.grad is not None]
            got.append(_widened(torch.cat(grads)) if grads else torch.zeros(0, device=got[0].device))
        return got

    def first(self, module: nn.Module) -> list[torch.Tensor]:
        """The first call of `module` (where compiling happens), then its optimizer step."""
        got = self.capture(module)
        if self.train:
            self.optimizer.step()
        return got

    def restore_initial_state(self) -> None:
        """Back to the weights the eager reference saw, with a fresh optimizer."""
        if self._initial is not None:
            self.model.load_state_dict(self._initial)
            self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4)


def _widened(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to(torch.promote_types(t.dtype, torch.float32), copy=True)


def build_workbench(trial: Trial, device: torch.device, mark: Callable[[str], None] = lambda _: None) -> Workbench:
    """Model and batch on `device`, in train or eval mode; `mark` is told when each part ends:
    "cuda_init" (CUDA devices only), "build"."""
    m = trial.measure
    torch.manual_seed(m.seed)
    torch.set_float32_matmul_precision(m.matmul_precision)
    if device.type == "cuda":
        if m.memory_cap_gib is not None:
            cap_memory(device, m.memory_cap_gib)
        torch.cuda.init()
        torch.empty(1, device=device)  # the context exists once something is allocated
        mark("cuda_init")
    bundle, built_on = sources.build_placed(trial.model, device)
    model = bundle.model.to(device)
    if device.type == "cuda":  # what initializing the weights left in the allocator is not the trial's
        sync(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    gen = torch.Generator().manual_seed(m.seed)
    batch = bundle.make_batch(trial.batch_size, trial.seq_len, gen).to(device)
    wb = Workbench(trial, device, model, bundle, batch, built_on=built_on)
    if wb.train:
        model.train()
        zero_dropout(model)
        wb._initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
        wb.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    else:
        model.eval()
    sync(device)
    mark("build")
    return wb
