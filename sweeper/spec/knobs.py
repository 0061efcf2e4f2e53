"""The inductor options people tune by hand, for `sweeper knobs` and as a start for `axes.options`.

Each entry names the option as torch.compile's `options=` takes it, what it changes, and what it
usually costs; `sweeper knobs` marks the ones the installed torch does not know.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Knob:
    key: str
    example: Any
    what: str


COMMON: tuple[Knob, ...] = (
    Knob("coordinate_descent_tuning", True, "tune each Triton kernel's launch config by coordinate descent "
         "(on in max-autotune); costs compile time, gains little on GEMM-bound models"),
    Knob("max_autotune", True, "benchmark GEMM/conv templates against the library kernels (the max-autotune modes)"),
    Knob("max_autotune_gemm_backends", "ATEN,TRITON", "which GEMM backends max_autotune may pick "
         "(ATEN, TRITON, CUTLASS, CPP, CK)"),
    Knob("epilogue_fusion", False, "fuse pointwise ops into the epilogue of a template GEMM"),
    Knob("combo_kernels", True, "combine independent small kernels into one launch (launch-bound graphs)"),
    Knob("shape_padding", False, "pad matmul dims to aligned sizes (on by default)"),
    Knob("freezing", True, "inference: fold weights into the graph as constants (constant folding, "
         "layout choices); the module's parameters may no longer change"),
    Knob("graph_partition", True, "partition the graph around ops CUDA graphs cannot capture, so the rest "
         "still replays as CUDA graphs (reduce-overhead)"),
    Knob("triton.cudagraphs", True, "wrap the compiled graph in CUDA graphs (what reduce-overhead turns on)"),
    Knob("aggressive_fusion", True, "fuse nodes even without shared memory reads"),
    Knob("benchmark_kernel", True, "benchmark fusion choices instead of trusting the heuristics"),
    Knob("layout_optimization", False, "channels-last layouts for convolutions (on by default)"),
    Knob("triton.unique_kernel_names", True, "readable kernel names in traces (no speed effect)"),
)
"""A starting list, not all of inductor's options: `torch._inductor.config` holds the rest."""
