"""Everything one trial runs on: the model on its device, one batch, the step functions, and
the eager reference outputs that compiled results are checked against."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from sweeper import zoo
from sweeper.measure.timing import sync
from sweeper.spec.trials import Trial
from sweeper.zoo.bundle import Batch, Bundle, mse_loss, output_tensor, xent_loss

CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")
"""Modes whose compiled graphs are replayed as CUDA graphs."""


def _import(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def _plain_module_bundle(model: nn.Module, spec: dict[str, Any]) -> Bundle:
    """Inputs for a user's plain nn.Module, from the spec's `input` section."""
    if spec is None:
        raise ValueError("the factory returned an nn.Module: give the model an 'input' section")
    num_classes = spec.get("num_classes")

    def make(batch_size: int, seq_len: int | None, gen: torch.Generator) -> Batch:
        if spec["kind"] == "image":
            x = torch.randn(batch_size, spec["channels"], spec["size"], spec["size"], generator=gen)
        elif spec["kind"] == "tokens":
            x = torch.randint(0, spec["vocab_size"], (batch_size, seq_len or 128), generator=gen)
        else:
            x = torch.randn(batch_size, *spec["shape"], generator=gen)
        labels = torch.randint(0, num_classes, (batch_size,), generator=gen) if num_classes else None
        tokens = batch_size * (seq_len or 128) if spec["kind"] == "tokens" else None
        return Batch(args=(x,), items=batch_size, tokens=tokens, labels=labels)

    return Bundle(model, make, xent_loss if num_classes else mse_loss)


def build_bundle(trial: Trial) -> Bundle:
    m = trial.model
    if m.get("factory"):
        built = _import(m["factory"])(**m.get("kwargs", {}))
        if isinstance(built, Bundle):
            return built
        if not isinstance(built, nn.Module):
            raise TypeError(f"factory {m['factory']} returned {type(built).__name__}, not an nn.Module or Bundle")
        return _plain_module_bundle(built, m.get("input"))
    return _import(zoo.REGISTRY[m["name"]].builder)(**m.get("kwargs", {}))


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
    optimizer: torch.optim.Optimizer | None = None
    reference: list[torch.Tensor] = field(default_factory=list)
    first_outputs: list[torch.Tensor] = field(default_factory=list)
    _initial: dict[str, torch.Tensor] | None = None

    @property
    def train(self) -> bool:
        return self.trial.phase == "train"

    @property
    def items_per_iter(self) -> int:
        return self.batch.items

    @property
    def tokens_per_iter(self) -> int | None:
        return self.batch.tokens

    def _autocast(self):
        if self.trial.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def forward(self, module: nn.Module) -> Any:
        with self._autocast():
            return module(*self.batch.args, **self.batch.kwargs)

    def fwd_bwd(self, module: nn.Module) -> Any:
        assert self.optimizer is not None
        self.optimizer.zero_grad(set_to_none=True)
        with self._autocast():
            out = module(*self.batch.args, **self.batch.kwargs)
            loss = self.bundle.loss(out, self.batch)
        loss.backward()
        return out

    def _mark_step(self, module: nn.Module) -> None:
        if module is not self.model and self.trial.mode in CUDAGRAPH_MODES:
            torch.compiler.cudagraph_mark_step_begin()

    def step(self, module: nn.Module) -> Any:
        """One timed iteration: a no-grad forward, or forward + backward + optimizer step."""
        self._mark_step(module)
        if not self.train:
            with torch.no_grad():
                return self.forward(module)
        out = self.fwd_bwd(module)
        self.optimizer.step()
        return out

    def _capture(self, out: Any) -> list[torch.Tensor]:
        got = [output_tensor(out).detach().to(torch.float32, copy=True)]
        if self.train:
            grads = [p.grad.detach().flatten().float() for p in self.model.parameters() if p.grad is not None]
            got.append(torch.cat(grads) if grads else torch.zeros(0, device=self.device))
        return got

    def first(self, module: nn.Module) -> None:
        """The first call of `module` (where compiling happens), keeping outputs for accuracy."""
        self._mark_step(module)
        if not self.train:
            with torch.no_grad():
                self.first_outputs = self._capture(self.forward(module))
            return
        self.first_outputs = self._capture(self.fwd_bwd(module))
        self.optimizer.step()

    def restore_initial_state(self) -> None:
        """Back to the weights the eager reference saw, with a fresh optimizer."""
        if self._initial is not None:
            self.model.load_state_dict(self._initial)
            self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4)


def build_workbench(trial: Trial, device: torch.device, mark: Callable[[str], None] = lambda _: None) -> Workbench:
    """Model and batch on `device`, and the eager reference; `mark` is told when each part
    ends: "cuda_init" (CUDA devices only), "build", "reference"."""
    m = trial.measure
    torch.manual_seed(m["seed"])
    torch.set_float32_matmul_precision(m["matmul_precision"])
    if device.type == "cuda":
        torch.cuda.init()
        torch.empty(1, device=device)  # the context exists once something is allocated
        mark("cuda_init")
    bundle = build_bundle(trial)
    model = bundle.model.to(device)
    gen = torch.Generator().manual_seed(m["seed"])
    batch = bundle.make_batch(trial.batch_size, trial.seq_len, gen).to(device)
    wb = Workbench(trial, device, model, bundle, batch)
    sync(device)
    mark("build")
    if wb.train:
        model.train()
        zero_dropout(model)
        wb._initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
        wb.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        wb.reference = wb._capture(wb.fwd_bwd(model))
        wb.optimizer.zero_grad(set_to_none=True)
    else:
        model.eval()
        with torch.no_grad():
            wb.reference = wb._capture(wb.forward(model))
    sync(device)
    mark("reference")
    return wb
