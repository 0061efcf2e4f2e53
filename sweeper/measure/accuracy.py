"""Accuracy the way PyTorch's benchmark harness judges it: against a float64 reference.

Deep graphs (training gradients above all) differ from eager legitimately: TF32 and bf16
kernels, another reduction order. So the first call also runs in float64 (a float64 copy of the
model and batch, no autocast), and a compiled result passes when its error against that reference
is within a small multiple of eager's own, plus a floor:

    compiled_err <= multiplier * eager_err + floor

(multiplier 2, 3 in bf16; floor = tolerance / 10: ``torch._dynamo.utils.same`` with ``fp64_ref``).
Where float64 cannot run, the check falls back to compiled vs eager within the tolerance, and the
row says so (``accuracy_reference``). The reference is kept on the host and compared a chunk at a
time on the compared tensor's device, so the check needs only a few chunk-sized temporaries there."""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from sweeper.zoo.bundle import Batch

log = logging.getLogger(__name__)

FP64_DEVICE, FP64_CPU, EAGER_ONLY = "fp64_device", "fp64_cpu", "eager"
"""Values of `accuracy_reference`: where the float64 reference ran, or that none could."""


def default_tolerance(precision: str, matmul_precision: str) -> float:
    """Relative-norm tolerance: bf16 and TF32 kernels legitimately differ from eager's order."""
    if precision == "bf16":
        return 5e-2
    return 1e-4 if matmul_precision == "highest" else 1e-2


def multiplier(precision: str) -> float:
    """How many times eager's own error a compiled result may have (the harness's 2, 3 in bf16)."""
    return 3.0 if precision == "bf16" else 2.0


CHUNK_ELEMENTS = 2**24
"""Elements compared at a time: 128 MiB per float64 temporary, whatever the size of the output."""


def compare(ref: list[torch.Tensor], got: list[torch.Tensor], chunk: int = CHUNK_ELEMENTS) -> tuple[float, float]:
    """(max abs error, max over tensors of ||got - ref|| / ||ref||), in float64 on each `got`
    tensor's device, `chunk` elements at a time: `ref` may stay on the host, and no full-size
    float64 copy is made. (inf, inf) when shapes differ or `got` is not finite."""
    max_abs, rel = 0.0, 0.0
    for r, g in zip(ref, got, strict=True):
        sums = _error_sums(r.detach().reshape(-1), g.detach().reshape(-1), chunk) if r.shape == g.shape else None
        if sums is None:
            return float("inf"), float("inf")
        tensor_max, diff_sq, ref_sq = sums
        diff_norm, denom = math.sqrt(diff_sq), math.sqrt(ref_sq)
        max_abs = max(max_abs, tensor_max)
        rel = max(rel, diff_norm / denom if denom > 0 else diff_norm)
    return max_abs, rel


def _error_sums(ref: torch.Tensor, got: torch.Tensor, chunk: int) -> tuple[float, float, float] | None:
    """(max |got - ref|, ||got - ref||^2, ||ref||^2) of two flat tensors, or None when `got` is not
    finite. A NaN in `ref` makes the max NaN, as torch.max of the whole difference would."""
    max_abs, diff_sq, ref_sq = 0.0, 0.0, 0.0
    for start in range(0, got.numel(), chunk):
        diff = got[start:start + chunk].to(torch.float64, copy=True)  # subtracted in place below
        if not bool(torch.isfinite(diff).all()):
            return None
        r64 = ref[start:start + chunk].to(device=diff.device, dtype=torch.float64)
        ref_sq += float(torch.dot(r64, r64))
        diff.sub_(r64)
        del r64
        diff_sq += float(torch.dot(diff, diff))
        m = float(torch.linalg.vector_norm(diff, float("inf")))
        max_abs = m if math.isnan(m) or m > max_abs else max_abs
    return max_abs, diff_sq, ref_sq


def _to64(x: Any, device: torch.device) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(device=device, dtype=torch.float64 if x.is_floating_point() else x.dtype)
    return x


def batch_fp64(batch: Batch, device: torch.device) -> Batch:
    """The batch on `device` with every floating tensor in float64 (ids, masks, labels unchanged)."""
    return Batch(tuple(_to64(a, device) for a in batch.args), {k: _to64(v, device) for k, v in batch.kwargs.items()},
                 batch.items, batch.tokens, _to64(batch.labels, device))


Capture = Callable[[nn.Module, Batch], list[torch.Tensor]]
"""Runs the first call of a module on a batch without autocast and returns what accuracy compares
(the output, and in training the flattened gradients)."""


@dataclass
class Reference:
    tensors: list[torch.Tensor]
    """float64 outputs (and gradients), on the host; empty when no float64 run was possible."""
    source: str
    """FP64_DEVICE, FP64_CPU or EAGER_ONLY."""
    note: str | None = None
    """Why the float64 reference is missing or not on the device."""


def fp64_reference(model: nn.Module, batch: Batch, device: torch.device, capture: Capture) -> Reference:
    """Run `capture` on a float64 copy of `model` and `batch`, on `device`, else on the CPU. The
    reference is kept on the host: the device holds neither it nor the copies once it is made."""
    notes = []
    for where, source in ((device, FP64_DEVICE), (torch.device("cpu"), FP64_CPU)):
        if source == FP64_CPU and device.type == "cpu":
            break
        try:
            model64 = copy.deepcopy(model).to(device=where, dtype=torch.float64)
            tensors = [t.cpu() for t in capture(model64, batch_fp64(batch, where))]
            return Reference(tensors, source, "; ".join(notes) or None)
        except (RuntimeError, NotImplementedError, TypeError) as e:  # OOM, or no float64 kernel
            notes.append(f"float64 on {where.type} failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            log.warning("accuracy reference: %s", notes[-1])
        finally:
            model64 = None
            if where.type == "cuda":
                torch.cuda.empty_cache()
    return Reference([], EAGER_ONLY, "; ".join(notes) or None)


@dataclass
class Verdict:
    """Accuracy columns of one row."""

    max_abs_err: float
    rel_err: float
    """Compiled vs eager (relative norm), kept for comparison with older rows."""
    eager_err_vs_fp64: float | None
    compiled_err_vs_fp64: float | None
    accuracy_tol: float
    """The allowed compiled error: multiplier x eager's + floor (fp64), or the tolerance vs eager."""
    accuracy_ok: bool
    accuracy_reference: str
    accuracy_note: str | None

    def as_row(self) -> dict[str, Any]:
        return dict(vars(self))


def judge(ref: Reference, eager: list[torch.Tensor], compiled: list[torch.Tensor], tolerance: float,
          precision: str) -> Verdict:
    """Pass or fail a compiled result by the harness's rule (see the module docstring)."""
    max_abs, rel = compare(eager, compiled)
    if not ref.tensors:
        return Verdict(max_abs, rel, None, None, tolerance, rel <= tolerance, ref.source, ref.note)
    _, eager_err = compare(ref.tensors, eager)
    _, compiled_err = compare(ref.tensors, compiled)
    allowed = multiplier(precision) * eager_err + tolerance / 10
    return Verdict(max_abs, rel, eager_err, compiled_err, allowed, compiled_err <= allowed, ref.source, ref.note)


def worst(verdicts: list[Verdict]) -> Verdict:
    """One verdict for several checks (a stream's shapes): the one closest to failing, or past it;
    the errors against eager are the largest seen."""
    def margin(v: Verdict) -> float:
        err = v.compiled_err_vs_fp64 if v.compiled_err_vs_fp64 is not None else v.rel_err
        return err / v.accuracy_tol if v.accuracy_tol > 0 else float("inf")

    w = max(verdicts, key=margin)
    return Verdict(**{**w.as_row(), "max_abs_err": max(v.max_abs_err for v in verdicts),
                      "rel_err": max(v.rel_err for v in verdicts), "accuracy_ok": all(v.accuracy_ok for v in verdicts)})
