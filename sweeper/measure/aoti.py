"""The aoti path: torch.export and an AOTInductor package built in one process, loaded in another.

`build` exports the model on the trial's batch (a refusal is `export_error`, torch's reason in the
error) and packages it with the trial's inductor configs. `loader` is the pipeline's compiler in
the fresh measuring process: the load sequence a deployment should follow, in order. CUDA is up
first (the workbench made its context and put model and batch on the device); the package is
loaded onto that device by index, never the default; the inputs are checked against the shapes,
dtypes and device the package was built for, since a package fed anything else may crash the
process instead of raising. The pipeline then times it as any compiled module, against eager.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import torch
import torch._inductor
from torch import nn

from sweeper.measure import AOTI_BUILD_COLUMNS, aoti_inputs_file, aoti_stage_file, cxx_runtime, gpu_lock
from sweeper.measure.failures import TrialFailed, classify, describe
from sweeper.measure.inductor_options import aoti_configs
from sweeper.measure.timing import sync
from sweeper.measure.workbench import Workbench

log = logging.getLogger(__name__)


def signature(wb: Workbench) -> list[list[Any]]:
    """What the package is built for: each tensor input's shape, dtype and device type, in order."""
    values = [*wb.batch.args, *(wb.batch.kwargs[k] for k in sorted(wb.batch.kwargs))]
    return [[list(v.shape), str(v.dtype), v.device.type] for v in values if isinstance(v, torch.Tensor)]


def _mark(package: Path, stage: str) -> None:
    """Leave where the load process is (`aoti_runs.STAGES`) beside the package, with torch's versions:
    a process that dies of a signal cannot say it, so its parent reads it there."""
    mark = {"stage": stage, "torch": torch.__version__, "cuda": torch.version.cuda}
    aoti_stage_file(package).write_text(json.dumps(mark))


def build(wb: Workbench, row: dict[str, Any], package: Path) -> None:
    """Export and package the trial's model at `package`; the row gets the seconds and the size."""
    args, kwargs = wb.batch.args, wb.batch.kwargs
    t0 = time.perf_counter()
    try:
        with torch.no_grad(), wb._autocast():
            exported = torch.export.export(wb.model, args, kwargs or None)
    except Exception as e:
        raise TrialFailed("export_error", f"torch.export refused the model: {describe(e)}") from e
    row["aoti_export_s"] = time.perf_counter() - t0
    row.update(_choose_cxx())
    t0 = time.perf_counter()
    try:
        torch._inductor.aoti_compile_and_package(exported, package_path=str(package),
                                                 inductor_configs=aoti_configs(wb.trial))
    except Exception as e:
        raise classify(e, "compile") from e
    row.update(aoti_package_s=time.perf_counter() - t0, aoti_package_bytes=package.stat().st_size)
    row["compile_s"] = row["aoti_export_s"] + row["aoti_package_s"]
    built_for = {"inputs": signature(wb), "device": str(wb.device), "cxx": row["aoti_cxx"]}
    aoti_inputs_file(package).write_text(json.dumps(built_for))


def _choose_cxx() -> dict[str, Any]:
    """Build with a compiler whose shared libraries load libstdc++ (`cxx_runtime.choose`)."""
    current = _cxx()
    if current is None:
        return {"aoti_cxx": None, "aoti_cxx_replaced": None}
    cxx, replaced = cxx_runtime.choose(current)
    if replaced is not None:
        torch._inductor.config.cpp.cxx = (cxx,)
        named = " (named by CXX)" if os.environ.get("CXX") else ""
        log.warning("aoti build: %s%s links libstdc++ into shared libraries; building with %s", replaced, named, cxx)
    return {"aoti_cxx": cxx, "aoti_cxx_replaced": replaced}


def _cxx() -> str | None:
    """The C++ compiler inductor called to build the package (None where this torch does not say)."""
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler

        return str(get_cpp_compiler())
    except (ImportError, AttributeError, RuntimeError, OSError):
        return None


class LoadedPackage(nn.Module):
    """A loaded AOTInductor package as a module the pipeline can step (it holds its own weights)."""

    def __init__(self, runner: Any):
        super().__init__()
        self.runner = runner

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.runner(*args, **kwargs)


def cpu_isa_check_s() -> float | None:
    """Seconds of inductor's check of the CPU's vector instructions, which `aoti_load_package` runs
    after loading (to compare with the package's build): in a process with an empty inductor cache
    it compiles test programs (seconds), later ones in that cache load them. Run before the timed
    load, so `aoti_load_s` is the loader's own time. None where this torch has no such check."""
    try:
        from torch._inductor.cpu_vec_isa import pick_vec_isa
    except ImportError:
        return None
    t0 = time.perf_counter()
    try:
        pick_vec_isa()
    except Exception as e:  # aoti_load_package would meet it too, with less said
        raise TrialFailed("runtime_error", f"inductor's CPU check (run by aoti_load_package): {describe(e)}") from e
    return time.perf_counter() - t0


def loader(package: Path, row: dict[str, Any]):
    """The compiler of a load process: check the inputs, run inductor's CPU check (timed:
    `aoti_isa_check_s`), load the package onto the trial's device (timed: `aoti_load_s`), and
    return it as a module."""

    def load(wb: Workbench) -> nn.Module:
        check_inputs(wb, package)
        row["aoti_isa_check_s"] = cpu_isa_check_s()  # CPU work: outside the GPU's exclusive hold
        index = (wb.device.index if wb.device.index is not None else torch.cuda.current_device()) \
            if wb.device.type == "cuda" else -1
        with gpu_lock.timing():  # a timed figure: no neighbour's GPU work beside it
            t0 = time.perf_counter()
            _mark(package, "load")
            try:
                runner = torch._inductor.aoti_load_package(str(package), device_index=index)
            except Exception as e:
                raise TrialFailed("runtime_error", f"aoti_load_package: {describe(e)}") from e
            sync(wb.device)
            row["aoti_load_s"] = time.perf_counter() - t0
        _mark(package, "loaded")
        return LoadedPackage(runner)

    return load


def check_inputs(wb: Workbench, package: Path) -> None:
    """Refuse, with a named error, inputs that differ from those the package was built for."""
    built = json.loads(aoti_inputs_file(package).read_text())
    here = signature(wb)
    if built["inputs"] != here:
        raise TrialFailed("runtime_error", f"inputs {here} differ from those the package was built for "
                          f"{built['inputs']}: an AOTInductor package takes only those")
    if torch.device(built["device"]).type != wb.device.type:
        raise TrialFailed("runtime_error", f"package built for {built['device']}, loaded on {wb.device}")


def finish_row(row: dict[str, Any], build: dict[str, Any], items: float) -> None:
    """The load process's row with the build's figures: compile_s is the build (export + package),
    and break-even counts it against the steady gain."""
    row.update({k: build.get(k) for k in AOTI_BUILD_COLUMNS})
    tp, eager_tp = row.get("throughput_items_s"), row.get("eager_throughput_items_s")
    if tp and eager_tp and items and row.get("compile_s") is not None:
        gain = items / eager_tp - items / tp
        row["break_even_iters"] = row["compile_s"] / gain if gain > 0 else float("inf")
