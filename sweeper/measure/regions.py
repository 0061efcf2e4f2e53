"""What torch.compile compiles for a trial's scope: the whole model, or each of its repeated
blocks in place (regional compilation, as PyTorch's "reducing cold start compilation time with
regional compilation" recipe does it: `block.compile(...)` on every copy, so dynamo compiles the
block's code once and every copy with the same shapes reuses it).

A regional trial alternates eager and compiled windows on one set of weights, so the blocks run
compiled only while the model is called through `Regional`; called directly it stays eager.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from sweeper.spec.trials import Trial
from sweeper.zoo.blocks import find_repeated_block


def find_blocks(model: nn.Module, class_names: tuple[str, ...]) -> list[nn.Module]:
    """The outermost submodules whose class name is one of `class_names`, in module order (a
    block inside a block is compiled with its parent)."""
    found: list[nn.Module] = []

    def walk(module: nn.Module) -> None:
        for child in module.children():
            if type(child).__name__ in class_names:
                found.append(child)
            else:
                walk(child)

    walk(model)
    return found


class Regional(nn.Module):
    """`model` with `blocks` compiled in place, switched on for the length of a call."""

    def __init__(self, model: nn.Module, blocks: list[nn.Module], compile_kwargs: dict[str, Any]):
        super().__init__()
        self.inner = model
        self.compiled_blocks: list[tuple[nn.Module, Any]] = []
        for block in blocks:
            block.compile(**compile_kwargs)
            self.compiled_blocks.append((block, block._compiled_call_impl))
            block._compiled_call_impl = None

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        for block, impl in self.compiled_blocks:
            block._compiled_call_impl = impl
        try:
            return self.inner(*args, **kwargs)
        finally:
            for block, _ in self.compiled_blocks:
                block._compiled_call_impl = None


def compile_scope(model: nn.Module, scope: str, blocks: tuple[str, ...], compile_kwargs: dict[str, Any]) -> nn.Module:
    """`torch.compile(model, ...)` for scope whole; for regional, the model with its blocks compiled."""
    if scope == "whole":
        return torch.compile(model, **compile_kwargs)
    found = find_blocks(model, blocks)
    if not found:
        raise ValueError(f"scope regional: {type(model).__name__} has no module of class {' or '.join(blocks)} "
                         "(check the model's `block`)")
    return Regional(model, found, compile_kwargs)


@dataclass(frozen=True)
class RegionPlan:
    """What a trial compiles and how its block was chosen (the row's `block_choice`)."""

    blocks: tuple[str, ...] = ()
    choice: str | None = None
    """spec, zoo, `found: CLASS, ...` or `none: why`; None for whole-model and eager trials."""

    @property
    def failure(self) -> str | None:
        """Why a regional trial cannot run: no block qualified."""
        if self.choice is None or not self.choice.startswith("none: "):
            return None
        return (f"scope regional: no repeated block found: {self.choice.removeprefix('none: ')}; "
                "name one with the model's `block`")


def plan_regions(trial: Trial, model: nn.Module) -> RegionPlan:
    """The blocks a regional trial compiles: the spec's `block`, the zoo's, or the one found."""
    if trial.scope != "regional" or trial.mode == "eager":
        return RegionPlan()
    if trial.model.blocks:
        return RegionPlan(trial.model.blocks, "spec" if trial.model.block else "zoo")
    found = find_repeated_block(model)
    return RegionPlan((found.class_name,) if found.class_name else (), found.note)


def scope_row(trial: Trial, model: nn.Module, plan: RegionPlan) -> dict[str, Any]:
    """The row's scope, how many modules torch.compile is applied to (none for eager), and for a
    regional trial which classes and how they were chosen."""
    if trial.mode == "eager":
        return {"scope": trial.scope, "compiled_regions": 0}
    if trial.scope == "whole":
        return {"scope": trial.scope, "compiled_regions": 1}
    found = find_blocks(model, plan.blocks) if plan.blocks else []
    classes = sorted({type(b).__name__ for b in found})
    return {"scope": trial.scope, "compiled_regions": len(found), "region_classes": ",".join(classes) or None,
            "block_choice": plan.choice}
