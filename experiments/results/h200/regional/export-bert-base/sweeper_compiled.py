"""torch.compile for bert-base as sweeper measured it (trial 8a4bb13de45b): reduce-overhead, dynamic=False, batch 64, seq 128.

    from sweeper_compiled import compile_model
    model = compile_model(model)  # loads megacache.bin, then compiles as measured

Written by `sweeper export`; needs only torch. The artifact holds the compiled code of the
measured shapes, precision and phase (see README.md); anything else compiles as usual.
"""

from __future__ import annotations

import json
import platform
import time
from importlib import metadata
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent
ARTIFACT = HERE / "megacache.bin"
BUILT_FOR = json.loads((HERE / "versions.json").read_text())["built_for"]
COMPILE_KWARGS = {'mode': 'reduce-overhead', 'dynamic': False}
SCOPE = 'whole'
BLOCKS = ()
MATMUL_PRECISION = 'high'
_TRITON = ("triton", "pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu")


_LABELS = {"torch_threads": "intra-op threads (CPU code is built for the count)"}


class ArtifactMismatch(RuntimeError):
    """The artifact was built for another torch, Triton, CUDA or device than this process has."""


def this_process() -> dict:
    device_type = BUILT_FOR["device_type"]
    return {"torch_version": torch.__version__, "triton_version": _triton(), "cuda_version": torch.version.cuda,
            "device_type": device_type, "device_name": _device_name(device_type),
            "torch_threads": torch.get_num_threads()}


def _triton():
    for name in _TRITON:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _device_name(device_type):
    if device_type == "cuda":
        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def check() -> None:
    """Raise ArtifactMismatch unless this process has what the artifact was built for."""
    here = this_process()
    wrong = [key for key in BUILT_FOR if BUILT_FOR[key] is not None and BUILT_FOR[key] != here[key]]
    if wrong:
        what = "; ".join(f"{_LABELS.get(k, k.split('_')[0])} {BUILT_FOR[k]} (here: {here[k]})" for k in wrong)
        threads = (f"call torch.set_num_threads({BUILT_FOR['torch_threads']}) first, " if wrong == ["torch_threads"]
                   else "")
        raise ArtifactMismatch(f"{ARTIFACT.name} was built for {what}: {threads}compile cold with "
                               "compile_model(model, use_artifact=False), or export from a sweep run on this setup")


def load_artifact() -> float:
    """Check, then load the artifact into this process's caches; returns the seconds it took."""
    check()
    t0 = time.perf_counter()
    torch.compiler.load_cache_artifacts(ARTIFACT.read_bytes())
    return time.perf_counter() - t0


def compile_model(model: nn.Module, use_artifact: bool = True) -> nn.Module:
    """The measured setting: the artifact loaded (unless use_artifact=False), then torch.compile
    applied to the whole model, or, for scope regional, to every repeated block in place."""
    torch.set_float32_matmul_precision(MATMUL_PRECISION)  # part of what the compiled code was built under
    if use_artifact:
        load_artifact()
    if SCOPE == "whole":
        return torch.compile(model, **COMPILE_KWARGS)
    blocks = _blocks(model)
    if not blocks:
        raise ValueError(f"no {' or '.join(BLOCKS)} module in {type(model).__name__}: not the model measured")
    for block in blocks:
        block.compile(**COMPILE_KWARGS)
    return model


def _blocks(module: nn.Module) -> list:
    found = []
    for child in module.children():
        found += [child] if type(child).__name__ in BLOCKS else _blocks(child)
    return found
