"""The resources section of a spec: what each trial gets of the cluster (device, GPUs, CPUs) and how
many trials run at once. Strict pydantic, no torch or Ray."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator

from sweeper.spec.base import PositiveInt, Strict


class Resources(Strict):
    """What each trial gets of the cluster (device, GPUs, CPUs), and how many trials run at once."""

    device: Literal["auto", "cuda", "cpu"] = "auto"
    """auto: cuda when the cluster has GPUs, else cpu."""
    gpus_per_trial: Annotated[float, Field(gt=0, le=8)] = 1.0
    """Below 1 lets trials share a GPU (their timings then disturb each other)."""
    cpus_per_trial: Annotated[int, Field(gt=0)] | None = None
    """CPUs each trial holds, pinned (whole physical cores, its own on the host): its measuring
    processes and compile workers run there only. None: on GPUs, each GPU's equal share of its
    node's CPUs; on CPU, 1 CPU for Ray's scheduling and no pinning."""
    trials_per_gpu: Annotated[int, Field(ge=1, le=4)] = 1
    """Above 1, that many trials share each GPU (each asks Ray for 1/N of one): one compiles (CPU
    work, on its own CPUs) while another times. No neighbour's GPU work runs inside a trial's timed
    windows: a measuring process holds the GPU's lock for all but its compiling call, alone while
    it times, shared with its neighbours' untimed work otherwise (rows: `gpu_lock_wait_s`)."""
    max_concurrent_trials: PositiveInt | None = None
    """Trials running at once; None: as many as the cluster's resources allow (CPU trials: 1, they
    would share cores)."""
    max_retries: Annotated[int, Field(ge=0, le=5)] = 1
    """Retries for a trial whose worker crashed or lost its node; OOM/compile errors never retry."""
    slow_reruns: Annotated[int, Field(ge=0, le=3)] | None = None
    """Times a compiled trial whose headline ran at the host's slow CPU state (`host_state: slow`) runs
    again, whole, after the sweep's other trials: a slow stretch of a host can last minutes. An ok
    rerun's row replaces the earlier one and names its speedup (`slow_rerun_speedup`); a failed rerun
    leaves it. None: 1 on GPUs, where a launch-bound eager step follows the host's speed and a CUDA-graph
    replay does not; 0 on the CPU, where both arms slow alike. Grid sweeps only (a search picks its own)."""
    process_start: Literal["forkserver", "subprocess"] = "forkserver"
    """How a measuring process starts: forked from the host's fork server (one per environment, shared by the
    host's workers), which imported torch, torchvision and transformers once and never ran anything
    (docs/measurement.md: what stays fresh), or as a new Python interpreter that imports everything itself."""

    @field_validator("gpus_per_trial")
    @classmethod
    def _gpus(cls, v: float, info: ValidationInfo) -> float:
        if v > 1 and not float(v).is_integer():
            raise ValueError(f"above 1 it must be a whole number of GPUs (got {v:g})")
        if v != 1 and info.data.get("device") == "cpu":
            raise ValueError(f"{v:g} GPUs per trial contradicts device 'cpu' (use device 'cuda' or 'auto')")
        return v

    @property
    def gpu_share(self) -> float:
        """GPUs a trial asks Ray for: gpus_per_trial, or 1/N of one when N trials share each GPU."""
        return self.gpus_per_trial / self.trials_per_gpu

    @field_validator("trials_per_gpu")
    @classmethod
    def _shared(cls, v: int, info: ValidationInfo) -> int:
        if v > 1 and info.data.get("device") == "cpu":
            raise ValueError(f"{v} trials per GPU contradicts device 'cpu' (CPU trials run one at a time)")
        if v > 1 and info.data.get("gpus_per_trial", 1.0) != 1:
            raise ValueError(f"{v} trials per GPU needs gpus_per_trial 1 (got {info.data['gpus_per_trial']:g})")
        return v
