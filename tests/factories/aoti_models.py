"""Test-only models for the aoti path that fail for real: `aoti_models:make_xxx` in a spec.

`make_branchy`: its forward branches on a tensor's value, which torch.export refuses (a data-dependent
branch, the graph break of an export). `make_crash_on_run`: exports and packages fine, but running it
outside an export dereferences a null pointer: the fresh process that loads the package and runs the
eager baseline beside it dies of a real segmentation fault.
"""

from __future__ import annotations

import ctypes

import torch
from torch import nn


class _Branchy(nn.Module):
    def __init__(self, features: int = 8):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        if y.sum() > 0:  # data-dependent control flow: export cannot trace it
            return y * 2
        return y


class _CrashOnRun(nn.Module):
    def __init__(self, features: int = 8):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.compiler.is_exporting():
            ctypes.string_at(0)  # SIGSEGV
        return self.linear(x)


def make_branchy() -> nn.Module:
    return _Branchy()


def make_crash_on_run() -> nn.Module:
    return _CrashOnRun()
