"""Synthetic trial rows that follow results.schema.COLUMNS: for tests, benchmarks and report demos.

The numbers are made up but shaped like real sweeps: one model gains from compiling, one
loses (eager wins), bigger batches use more memory, max-autotune compiles longest, and a
few trials run out of memory, fail to compile or come out inaccurate.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd

from sweeper.results.schema import MODES
from sweeper.results.store import rows_to_table

# model -> (task, eager items/s at batch 1, GiB per item, speedup with default mode)
MODELS: dict[str, tuple[str, float, float, float]] = {
    "resnet50": ("vision", 180.0, 0.05, 1.9),
    "vit_b_16": ("vision", 150.0, 0.08, 0.92),
    "bert_base": ("nlp", 220.0, 0.03, 1.35),
    "gpt2_small": ("nlp", 160.0, 0.04, 1.2),
    "convnext_tiny": ("vision", 200.0, 0.04, 1.5),
    "efficientnet_b0": ("vision", 400.0, 0.02, 1.1),
    "t5_small": ("nlp", 260.0, 0.03, 1.05),
    "mobilenet_v3": ("vision", 900.0, 0.01, 1.7),
}
_MODE_GAIN = {"eager": 1.0, "default": 1.0, "reduce-overhead": 1.08, "max-autotune": 1.15,
              "max-autotune-no-cudagraphs": 1.1}
_MODE_COMPILE_S = {"default": 40.0, "reduce-overhead": 45.0, "max-autotune": 240.0,
                   "max-autotune-no-cudagraphs": 200.0}
_ENVIRONMENT = {"device_type": "cuda", "device_name": "NVIDIA H200", "hostname": "gpu-node-1",
                "torch_version": "2.9.0", "sweeper_version": "0.1.0"}
_ERRORS = {
    "oom": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "compile_error": "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\nRuntimeError: triton",
    "timeout": "trial exceeded its 900 s budget",
}


def make_rows(n_trials: int = 200, seed: int = 0, models: list[str] | None = None) -> list[dict[str, Any]]:
    """`n_trials` rows over a model x phase x precision x mode x dynamic x batch grid.

    The grid repeats with a new sweep id when `n_trials` exceeds it.
    """
    rng = np.random.default_rng(seed)
    names = models or list(MODELS)
    grid = list(itertools.product(names, ["infer", "train"], ["fp32", "bf16"], MODES,
                                  [None, True, False], [1, 8, 32, 64, 128, 256]))
    grid = [g for g in grid if g[3] != "eager" or g[4] is None]
    out: list[dict[str, Any]] = []
    for i in range(n_trials):
        sweep, cell = divmod(i, len(grid))
        out.append(_row(rng, f"sweep-{seed}-{sweep}", *grid[cell]))
    return out


def make_frame(n_trials: int = 200, seed: int = 0, models: list[str] | None = None) -> pd.DataFrame:
    """make_rows as the DataFrame read_results would return (schema types)."""
    return rows_to_table(make_rows(n_trials, seed, models)).to_pandas()


def _row(rng: np.random.Generator, sweep_id: str, model: str, phase: str, precision: str,
         mode: str, dynamic: bool | None, batch: int) -> dict[str, Any]:
    task, base_tp, gib_per_item, gain = MODELS.get(model, ("custom", 100.0, 0.05, 1.2))
    seq_len = 128 if task == "nlp" else None
    config = {"model": model, "mode": mode, "dynamic": dynamic, "batch_size": batch, "phase": phase,
              "precision": precision, "seq_len": seq_len}
    eager_tp = base_tp * batch ** 0.8 * (0.35 if phase == "train" else 1.0) * (1.6 if precision == "bf16" else 1.0)
    eager_mem = 0.5 + gib_per_item * batch * (3.0 if phase == "train" else 1.0)
    compiled = mode != "eager"
    speedup = gain * _MODE_GAIN[mode] * (0.95 if dynamic else 1.0) * rng.normal(1.0, 0.03) if compiled else 1.0
    tp = eager_tp * speedup
    mem = eager_mem * (rng.uniform(0.8, 1.05) if compiled else 1.0)
    compile_s = _MODE_COMPILE_S[mode] * rng.uniform(0.7, 1.3) if compiled else None
    status = _status(rng, mem, compiled)
    ok = status == "ok"
    accurate = bool(rng.random() > 0.03) if compiled and ok else None
    start = datetime(2025, 1, 1, tzinfo=UTC) + timedelta(minutes=int(rng.integers(0, 10_000)))
    return {
        "sweep_id": sweep_id, "trial_id": _trial_id(config, sweep_id), "sweep_name": "synthetic",
        **config, "task": task, "backend": "inductor" if compiled else None,
        "matmul_precision": "high", "config_json": json.dumps(config), "status": status,
        "error": _ERRORS.get(status), "attempts": 1,
        "compile_s": compile_s if ok else None,
        "first_call_s": compile_s + batch / tp if ok and compiled else None,
        "warm_compile_s": compile_s * 0.15 if ok and compiled and rng.random() < 0.7 else None,
        "throughput_items_s": tp if ok else None,
        "throughput_tokens_s": tp * seq_len if ok and seq_len else None,
        "latency_p50_ms": 1000.0 * batch / tp if ok else None,
        "peak_mem_gib": mem if ok else None,
        "peak_mem_compile_gib": mem * 1.2 if ok and compiled else None,
        "eager_throughput_items_s": eager_tp if ok else None,
        "eager_peak_mem_gib": eager_mem if ok else None,
        "speedup_vs_eager": speedup if ok else None,
        "graphs": 1 if compiled else None, "graph_breaks": 0 if compiled else None,
        "recompiles": (1 if dynamic is None else 0) if compiled else None,
        "accuracy_ok": accurate, "rel_err": (1e-4 if accurate else 0.2) if accurate is not None else None,
        "accuracy_tol": 1e-2 if compiled else None,
        **_ENVIRONMENT, "started_at": start, "finished_at": start + timedelta(seconds=(compile_s or 0) + 30),
    }


def _status(rng: np.random.Generator, mem: float, compiled: bool) -> str:
    if mem > 60 and rng.random() < 0.5:
        return "oom"
    roll = rng.random()
    if compiled and roll < 0.03:
        return "compile_error"
    return "timeout" if roll > 0.99 else "ok"


def _trial_id(config: dict[str, Any], sweep_id: str) -> str:
    return hashlib.sha1(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]
