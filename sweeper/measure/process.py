"""The measuring process: one trial in this process, no Ray, so one trial can be debugged alone:

    python -m sweeper.measure --trial trial.json --out row.json [--warm] [--save-megacache F | --load-megacache F]

The row is written to --out (JSON, atomically) after every phase, so whatever was measured
before a crash or a kill survives. Run it in a fresh process with TORCHINDUCTOR_CACHE_DIR
pointing at an empty directory to measure a cold compile (the runner does that).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import torch

from sweeper import envinfo
from sweeper.measure import SPAWN_TIME_ENV, aoti, generate, gpu_lock, megacache
from sweeper.measure.epoch import epoch_columns
from sweeper.measure.failures import TrialFailed, classify
from sweeper.measure.inductor_options import options_row, unknown_keys
from sweeper.measure.pipeline import measure
from sweeper.measure.regions import plan_regions, scope_row
from sweeper.measure.workbench import build_workbench
from sweeper.results.files import write_json
from sweeper.results.schema import check_row
from sweeper.spec.trials import Trial

log = logging.getLogger(__name__)
_MEASURES = {"generate": generate.measure}
"""Phases measured by a module of their own; the others by `sweeper.measure.pipeline`."""

def run(payload: dict[str, Any], out: Path, warm: bool = False, save_megacache: Path | None = None,
        load_megacache: Path | None = None, aoti_build: Path | None = None,
        aoti_load: Path | None = None) -> dict[str, Any]:
    """Measure the payload's trial into a row (a Mega-Cache artifact, an aoti package: made or used if asked)."""
    trial = Trial.from_dict(payload["trial"])
    device = torch.device(payload.get("device", "cpu"))
    row: dict[str, Any] = {"status": "running", "error": None, "started_at": datetime.now(UTC).isoformat(),
                           "matmul_precision": trial.measure.matmul_precision, **_cpus(), **options_row(trial)}
    if trial.workload is not None:
        row.update(trial.stream_columns())  # written first, so even a crashed row has them

    def emit(r: dict[str, Any]) -> None:
        made = {k: v for k, v in r.items() if not k.startswith("_")}
        check_row(made)  # the row contract holds where the row is made, not only on the driver
        write_json(out, made)

    started = _process_start()
    mark = _Phases(row, started)
    mark("imports")
    emit(row)
    try:
        row.update(envinfo.device_info(device.type), trials_per_gpu=payload.get("trials_per_gpu", 1))
        gpu_lock.hold(gpu_lock.key_for(device, row["trials_per_gpu"]))  # after CUDA's start: it reads the GPU's UUID
        mark("env")
        wb = _workbench(trial, device, mark, row)
        row["setup_s"] = time.monotonic() - started
        row.update(megacache.load(load_megacache))
        _measure_or_build(wb, row, emit, warm, mark, payload, aoti_build, aoti_load)
        row.update(epoch_columns(trial, row))
        row["status"] = "ok" if row.get("accuracy_ok", True) else "inaccurate"
        row.update(megacache.save(save_megacache))
        if row["status"] == "inaccurate":
            row["error"] = _inaccurate_text(row)
    except TrialFailed as f:
        row.update(status=f.status, error=f.error)
    except Exception as e:
        row.update(status=(failed := classify(e, "run")).status, error=failed.error)
    row.update(_shared_gpu_row(), finished_at=datetime.now(UTC).isoformat())
    emit(row)
    return row


def _measure_or_build(wb, row: dict[str, Any], emit, warm: bool, mark: _Phases, payload: dict[str, Any],
                      aoti_build: Path | None, aoti_load: Path | None) -> None:
    """Measure the trial (a loaded AOTInductor package in place of a compile, with `aoti_load`), or
    only build its package (`aoti_build`); a phase of its own (generate) by its own measure."""
    if wb.trial.phase in _MEASURES:
        _MEASURES[wb.trial.phase](wb, row, emit, warm, mark, payload.get("steady_step_s"))
        return
    if aoti_build is not None:
        aoti.build(wb, row, aoti_build)
        mark("compiled")
        return
    measure(wb, row, emit, warm, mark, payload.get("steady_step_s"),
            aoti.loader(aoti_load, row) if aoti_load is not None else None)
    if aoti_load is not None:
        aoti.finish_row(row, payload.get("aoti_build", {}), wb.batch.items)


def _workbench(trial: Trial, device: torch.device, mark: _Phases, row: dict[str, Any]):
    """The trial's workbench, with the blocks a regional trial compiles planned and put in the row
    (a regional trial whose model has no block that qualifies fails here, before anything is timed)."""
    unknown = unknown_keys(trial)
    if unknown:
        raise TrialFailed("compile_error", f"option set {trial.option_set}: unknown inductor option {unknown[0]!r} "
                          f"(not in this torch's torch._inductor.config, {torch.__version__})")
    wb = build_workbench(trial, device, mark)
    row["model_built_on"] = wb.built_on
    regions = plan_regions(trial, wb.model)
    row.update(scope_row(trial, wb.model, regions))
    if regions.failure:
        raise TrialFailed("compile_error", regions.failure)
    wb.blocks = regions.blocks
    return wb


def _shared_gpu_row() -> dict[str, Any]:
    """The GPU's lock let go, its wait and hold; on a shared GPU the device's memory in use counts
    the neighbour's."""
    lock = gpu_lock.current()
    lock.release()  # the row is measured: the neighbour may have the GPU
    return {**lock.as_row(), **({"device_mem_used_gib": None} if lock.shared_gpu else {})}


def _inaccurate_text(row: dict[str, Any]) -> str:
    if row.get("compiled_err_vs_fp64") is not None:
        return (f"error vs float64 {row['compiled_err_vs_fp64']:.3g} > allowed {row['accuracy_tol']:.3g} "
                f"(eager's own error {row['eager_err_vs_fp64']:.3g}); compiled vs eager rel_err {row['rel_err']:.3g}")
    return f"rel_err {row['rel_err']:.3g} > tolerance {row['accuracy_tol']:.3g} (vs eager: no float64 reference)"


def _cpus() -> dict[str, Any]:
    """The CPUs this process may run on (its trial's share of the host, when pinned), and torch's
    intra-op threads (CPU kernels, and inductor's CPU code, are built for that count)."""
    cpus = sorted(os.sched_getaffinity(0))
    return {"cpu_affinity": envinfo.format_cpus(cpus), "cpu_count": len(cpus), "torch_threads": torch.get_num_threads()}


def _process_start() -> float:
    """When this process was started, on the monotonic clock (system-wide, and never stepped as the
    wall clock can be on a loaded host): the runner's timestamp, else the kernel's (whose boot-time
    base is rounded to whole seconds)."""
    spawned = os.environ.get(SPAWN_TIME_ENV)
    return float(spawned) if spawned else psutil.Process().create_time() - time.time() + time.monotonic()


class _Phases:
    """Marks the end of each phase of the measuring process in the row's `phase_s_json`:
    seconds since the previous mark (the first: since the process started)."""

    def __init__(self, row: dict[str, Any], process_start: float):
        self.row, self.last, self.phases = row, process_start, {}

    def __call__(self, name: str) -> None:
        now = time.monotonic()
        self.phases[name] = round(now - self.last, 4)
        self.last = now
        self.row["phase_s_json"] = json.dumps(self.phases)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sweeper.measure", description=__doc__.splitlines()[0])
    ap.add_argument("--trial", required=True, help="JSON file: {'trial': Trial dict, 'device': 'cuda'|'cpu'}")
    ap.add_argument("--out", required=True, help="where the row (JSON) is written")
    ap.add_argument("--warm", action="store_true", help="measure warm compile only")
    ap.add_argument("--save-megacache", type=Path, help="write the compiled trial's Mega-Cache artifact here")
    ap.add_argument("--load-megacache", type=Path, help="load this Mega-Cache artifact before compiling")
    ap.add_argument("--aoti-build", type=Path, help="path aoti: export and package the model here, measure nothing")
    ap.add_argument("--aoti-load", type=Path, help="path aoti: load this package and measure it against eager")
    args = ap.parse_args(argv)
    logging.basicConfig(level=os.environ.get("SWEEPER_LOG", "WARNING"), stream=sys.stderr)
    payload = json.loads(Path(args.trial).read_text())
    with contextlib.suppress(KeyboardInterrupt):
        row = run(payload, Path(args.out), warm=args.warm, save_megacache=args.save_megacache,
                  load_megacache=args.load_megacache, aoti_build=args.aoti_build, aoti_load=args.aoti_load)
        log.info("trial %s: %s", payload["trial"]["trial_id"], row["status"])
    return 0


def entry() -> None:
    code = main()
    # The row is on disk, written atomically after every phase. Skip the interpreter's teardown
    # (inductor's compile-worker pool shutdown, module finalizers, CUDA context release), which
    # only delays the next trial; the runner kills what is left of this process group.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
