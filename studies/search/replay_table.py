"""A generated 520-setting study of one model, shaped by the committed H200 rows, for
search_replay.py: 2 phases x 2 precisions x 10 batch sizes x (eager + 4 compile modes x 3 dynamic).

Taken from the real resnet50 rows (studies/gpu_smoke/results, inference, batch 8 and 64):
eager throughput and memory per precision against batch size (a power law and a line through the
two measured batches), the default and reduce-overhead speedups per precision at both batches
(interpolated in log batch, so the cudagraph gain shrinks as batch grows), their peak memory and
cold compile times (mean and spread). Assumed, because no committed row measured them: max-autotune
compiles 6x longer than default (the ratio sweeper.results.synthetic uses) for 5% more speed over
reduce-overhead (no-cudagraphs: over default); dynamic=True costs 10% throughput and 20% more
compile; training runs at a third of the throughput with 3x the memory, keeps the square root of
each speedup and compiles 2.2x longer; 2% of max-autotune trials fail to compile.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REAL = Path(__file__).resolve().parents[2] / "studies" / "gpu_smoke" / "results" / "results.parquet"
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
MODES = ["eager", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]


def _shape(real: pd.DataFrame) -> dict[str, Any]:
    """Per precision: the measured resnet50 numbers at batch 8 and 64 that the table extends."""
    r = real[(real.model == "resnet50") & (real.status == "ok")]
    out: dict[str, Any] = {"compile_s": r.compile_s.dropna().to_numpy()}
    for prec, g in r.groupby("precision"):
        by = {(m, int(b)): row for (m, b), row in g.set_index(["mode", "batch_size"]).iterrows()}
        out[prec] = {b: {m: by[m, b] for m in ("eager", "default", "reduce-overhead")} for b in (8, 64)}
    return out


def _interp(v8: float, v64: float, batch: int) -> float:
    """Log-linear in log batch through the values at 8 and 64, held within [0.5x, 2x] of the ends."""
    t = math.log(batch / 8) / math.log(8)
    v = math.exp(math.log(v8) + t * (math.log(v64) - math.log(v8)))
    lo, hi = min(v8, v64), max(v8, v64)
    return min(max(v, lo / 2), hi * 2)


def _setting(shape: dict, rng: np.random.Generator, phase: str, prec: str, batch: int, mode: str,
             dynamic: bool | None) -> dict[str, Any]:
    p = shape[prec]
    e8, e64 = p[8]["eager"], p[64]["eager"]
    eager_tp = e8.throughput_items_s * (batch / 8) ** math.log(e64.throughput_items_s / e8.throughput_items_s, 8)
    eager_mem = e8.peak_mem_gib + (e64.peak_mem_gib - e8.peak_mem_gib) / 56 * (batch - 8)
    base = {"eager": "eager", "default": "default", "reduce-overhead": "reduce-overhead",
            "max-autotune": "reduce-overhead", "max-autotune-no-cudagraphs": "default"}[mode]
    speedup = _interp(p[8][base].speedup_vs_eager, p[64][base].speedup_vs_eager, batch)
    mem_ratio = _interp(p[8][base].peak_mem_gib / e8.peak_mem_gib, p[64][base].peak_mem_gib / e64.peak_mem_gib, batch)
    compile_s = float(rng.choice(shape["compile_s"])) if mode != "eager" else None
    if mode.startswith("max-autotune"):
        speedup, compile_s = speedup * 1.05, compile_s * 6
    if dynamic:
        speedup, compile_s = speedup * 0.9, compile_s * 1.2
    if phase == "train":
        eager_tp, eager_mem, speedup = eager_tp / 3, eager_mem * 3, math.sqrt(speedup)
        compile_s = compile_s * 2.2 if compile_s else None
    noise = float(rng.lognormal(0, 0.05)) if mode != "eager" else 1.0
    failed = mode == "max-autotune" and rng.random() < 0.02
    tp = eager_tp * speedup * noise
    return {"model": "resnet50", "task": "vision", "mode": mode, "dynamic": dynamic, "batch_size": batch,
            "seq_len": None, "phase": phase, "precision": prec, "status": "compile_error" if failed else "ok",
            "throughput_items_s": None if failed else tp, "speedup_vs_eager": None if failed else tp / eager_tp,
            "compile_s": None if failed else compile_s,
            "peak_mem_gib": None if failed else max(0.05, eager_mem * mem_ratio) if mode != "eager" else eager_mem}


def generated_table(seed: int = 0, real: Path = REAL) -> pd.DataFrame:
    """The 520 settings, in grid order (phase, precision, batch, mode, dynamic), with trial ids."""
    shape, rng = _shape(pd.read_parquet(real)), np.random.default_rng(seed)
    rows = []
    for phase in ("infer", "train"):
        for prec in ("fp32", "bf16"):
            for batch in BATCHES:
                for mode in MODES:
                    for dynamic in ([None] if mode == "eager" else [None, False, True]):
                        rows.append(_setting(shape, rng, phase, prec, batch, mode, dynamic))
    df = pd.DataFrame(rows)
    df.insert(0, "trial_id", [f"g{i:04d}" for i in range(len(df))])
    return df
