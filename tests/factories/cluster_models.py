"""Test-only model factories for the multi-node tests: specs name them as `cluster_models:make_xxx`."""

from __future__ import annotations

import os
import time
from pathlib import Path

from torch import nn


def make_quick(features: int = 8) -> nn.Module:
    return nn.Linear(features, features)


def make_held(marks_dir: str, gate: str, features: int = 8) -> nn.Module:
    """Each measuring process that builds it leaves a file named by its pid in `marks_dir`, holding
    its Ray worker's pid, then waits until the file `gate` exists: a test knows which process (so
    which node) holds the trial, and acts while it is measuring by construction."""
    Path(marks_dir).mkdir(parents=True, exist_ok=True)
    staged = Path(marks_dir).parent / f".mark-{os.getpid()}"
    staged.write_text(os.environ["SWEEPER_WORKER_PID"])
    staged.replace(Path(marks_dir) / str(os.getpid()))  # whole when seen
    while not Path(gate).exists():
        time.sleep(0.05)
    return nn.Linear(features, features)
