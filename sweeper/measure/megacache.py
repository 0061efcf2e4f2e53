"""A trial's Mega-Cache artifact: everything its compiles put in the caches (inductor's FX
graphs, AOTAutograd entries, autotuning results), serialized by `torch.compiler.save_cache_artifacts`
after the cold compile, and loaded into an empty cache by `torch.compiler.load_cache_artifacts`
before a warm start in another process: what a deployment that ships the artifact pays."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from sweeper.results.files import atomic_write_bytes


def save(path: Path | None) -> dict[str, Any]:
    """Write this process's artifact to `path` (none when it compiled nothing cacheable, or
    when `path` is None)."""
    if path is None:
        return {}
    saved = torch.compiler.save_cache_artifacts()
    if saved is None or not saved[0]:
        return {"megacache_bytes": 0}
    atomic_write_bytes(path, saved[0])
    return {"megacache_bytes": len(saved[0])}


def load(path: Path | None) -> dict[str, Any]:
    """Load the artifact at `path` into this process's (empty) caches, timed (nothing for None)."""
    if path is None:
        return {}
    data = path.read_bytes()
    t0 = time.perf_counter()
    torch.compiler.load_cache_artifacts(data)
    return {"megacache_load_s": time.perf_counter() - t0}
