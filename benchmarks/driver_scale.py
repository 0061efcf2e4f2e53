"""The sweep driver alone at cluster scale: N synthetic trials through the real runner and sweep state.

    python -m benchmarks.driver_scale [--trials 2000] [--slots 8] [--device cuda|cpu] [--out DIR]
        [--tune-logs LIST] [--json FILE] [--tracemalloc]

Everything a sweep does on the driver runs for real (spec expansion, the results directory's claim,
a local Ray with `--slots` logical CPUs and as many logical GPUs, Tune and the searcher, durable
rows, compaction); only the measuring is replaced, through `run_sweep(..., _measure=...)`, by a
trainable that returns a synthetic row at once. So what it reports is the driver's own cost: the
sweep's wall time (Ray's start apart), the Ray worker processes and trial actors started (and how
many lived under a second), the driver's CPU seconds and resident memory (at the start, after 100
rows, before the last row, peak), and whether every row the driver holds is on disk while it runs
and in the compacted file at the end. `--tracemalloc` names the source lines whose Python
allocations grew most between the first 100 rows and the end."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import psutil
import yaml

from sweeper.results.store import part_files, read_results
from sweeper.run.options import TUNE_LOGS
from sweeper.run.options import tune_logs as tune_logs_option
from sweeper.run.state import SweepState
from sweeper.spec.sweep_spec import load_spec
from sweeper.spec.trials import expand

REPO = Path(__file__).resolve().parent.parent

log = logging.getLogger("driver_scale")
WARM_ROWS = 100


def synthetic_row(payload: dict[str, Any], max_retries: int = 1) -> dict[str, Any]:
    """Stands in for isolate.run_trial in the Ray worker: a plausible measured row, at once."""
    batch = payload["trial"]["batch_size"]
    return {"status": "ok", "error": None, "attempts": 1, "throughput_items_s": 1000.0 + batch,
            "speedup_vs_eager": 1.0, "latency_p50_ms": 1.0, "peak_mem_gib": 0.1,
            "trial_wall_s": 0.0, "phase_s_json": json.dumps({"imports": 0.0}), "device_type": "cpu"}


def spec_text(n_trials: int, slots: int, device: str = "cuda") -> dict[str, Any]:
    """On "cuda" the local Ray pretends to have `slots` GPUs and each trial asks for one, as on a GPU
    cluster (Ray's resources bound how many run); on "cpu", `max_concurrent_trials` does, as in a CPU
    sweep (Tune then puts its concurrency limiter around the searcher)."""
    resources = ({"device": "cuda", "gpus_per_trial": 1, "cpus_per_trial": 1} if device == "cuda"
                 else {"device": "cpu", "cpus_per_trial": 1, "max_concurrent_trials": slots})
    return {"name": "driver_scale", "models": [{"name": "bert-tiny"}],
            "axes": {"mode": ["eager"], "batch_size": list(range(1, n_trials + 1)), "seq_len": [16]},
            "measure": {"backend": "eager", "warm_compile": False}, "resources": resources}


def trial_actors() -> dict[str, int]:
    """Tune's trial actors this Ray session created, and how many of them lived under a second:
    Tune asks for an actor for every trial it stages and, when a finished trial's actor is free
    first, hands the trial that one and stops the new one (instant trials finish before a new
    actor has started). Read from the GCS's actor table (Ray's private state API)."""
    from ray._private import state as ray_state

    table = [a for a in ray_state.state.actor_table(None).values() if a.get("ActorClassName") == "ImplicitFunc"]
    lived_ms = [a.get("EndTime", 0) - a.get("StartTime", 0) for a in table if a.get("EndTime")]
    return {"trial_actors": len(table), "trial_actors_under_1s": sum(ms < 1000 for ms in lived_ms)}


def worker_processes() -> int:
    """Ray worker processes started in this Ray session so far (each leaves a core-worker log)."""
    import ray

    logs = Path(ray._private.worker._global_node.get_session_dir_path()) / "logs"
    return sum(1 for p in logs.glob("python-core-worker-*.log"))


class Watch(threading.Thread):
    """Samples the driver's resident memory, and that every row it holds is on disk."""

    def __init__(self, state: SweepState, total: int):
        super().__init__(daemon=True)
        self.state, self.total, self.stop, self.proc = state, total, threading.Event(), psutil.Process()
        self.rss_last_row = 0
        self.rss0 = self.peak = self.proc.memory_info().rss
        self.checks = self.not_durable = 0
        self.rss_warm: int | None = None
        """After the first WARM_ROWS rows: Tune's loggers import their libraries with the first trial."""
        self.snapshot_warm: tracemalloc.Snapshot | None = None

    def run(self) -> None:
        tick = 0
        while not self.stop.wait(0.25):
            rss = self.proc.memory_info().rss
            self.peak = max(self.peak, rss)
            if self.rss_warm is None and len(self.state.by_trial) >= WARM_ROWS:
                self.rss_warm = rss
                self.snapshot_warm = tracemalloc.take_snapshot() if tracemalloc.is_tracing() else None
            if len(self.state.by_trial) < self.total:
                self.rss_last_row = rss  # the last sample before every row was in
            tick += 1
            if tick % 4 == 0:
                held = set(self.state.by_trial)  # rows recorded so far (each written before it is held)
                on_disk = {p.stem.split("-", 1)[1] for p in part_files(self.state.dir)}
                self.checks += 1
                self.not_durable += len(held - on_disk)  # nothing is compacted before the sweep ends


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--slots", type=int, default=8, help="trials at once (the local Ray's logical CPUs)")
    ap.add_argument("--out", type=Path, help="results directory (default: a new temporary one)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--tracemalloc", action="store_true", help="name the lines whose allocations grew most")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cuda: `--slots` logical GPUs, one per trial (a GPU cluster); cpu: max_concurrent_trials")
    ap.add_argument("--tune-logs", type=tune_logs_option, default=TUNE_LOGS, metavar="LIST",
                    help="Tune's own records, as `sweeper run --tune-logs` (default: all)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("sweeper").setLevel(logging.WARNING)  # 2,000 progress lines would time the terminal
    out = args.out or Path(tempfile.mkdtemp(prefix="driver-scale-")) / "out"
    spec_path = out.parent / "driver_scale.yaml"
    spec_path.parent.mkdir(parents=True, exist_ok=True)
    spec_path.write_text(yaml.safe_dump(spec_text(args.trials, args.slots, args.device)))
    figures = run(spec_path, out, args.slots, args.tracemalloc, args.device, args.tune_logs)
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if figures["rows_in_results"] == args.trials and figures["rows_not_durable"] == 0 else 1


def growth(before: tracemalloc.Snapshot | None, top: int = 12) -> list[str]:
    """The source lines whose live Python allocations grew most since `before`."""
    if before is None:
        return []
    stats = tracemalloc.take_snapshot().compare_to(before, "lineno")
    return [f"{s.size_diff / 2**20:+.1f} MiB {s.count_diff:+d} blocks {s.traceback[0]}" for s in stats[:top]]


def run(spec_path: Path, out: Path, slots: int, trace_memory: bool = False, device: str = "cuda",
        tune_logs: tuple[str, ...] = TUNE_LOGS, start_ray: Any = None) -> dict[str, Any]:
    """`start_ray` (benchmarks/driver_scale_nodes.py): starts and attaches to a Ray of its own instead
    of one local node with `slots` CPUs (and GPUs)."""
    import ray

    from sweeper.run import ray_tune as runner

    spec = load_spec(spec_path)
    trials, _ = expand(spec)
    state = SweepState.open(spec, out, resume=False)
    state.claim()
    t_ray = time.monotonic()
    if start_ray is not None:
        start_ray()
    else:
        ray.init(num_cpus=slots, num_gpus=slots if device == "cuda" else 0, include_dashboard=False,
                 logging_level=logging.WARNING, log_to_driver=False)
    runner.connect(None)  # already initialized: keeps the runner's own settings (signals, loggers)
    ray_start_s = time.monotonic() - t_ray
    if trace_memory:
        tracemalloc.start()
    watch = Watch(state, len(trials))
    watch.start()
    cpu0 = sum(watch.proc.cpu_times()[:2])
    t0 = time.monotonic()
    state.save_manifest()
    missing = runner.run_sweep(state, trials, device, tune_logs=tune_logs, _measure=synthetic_row)
    sweep_s = time.monotonic() - t0
    workers, actors = worker_processes(), trial_actors()
    driver_cpu_s = sum(watch.proc.cpu_times()[:2]) - cpu0
    watch.stop.set()
    watch.join()
    rss_end = watch.proc.memory_info().rss
    grew = growth(watch.snapshot_warm)
    t1 = time.monotonic()
    state.close()
    compact_s = time.monotonic() - t1
    ray.shutdown()
    return {"trials": len(trials), "slots": slots, "device": device, "tune_logs": ",".join(tune_logs) or "none",
            "ray_worker_processes": workers, **actors,
            "ray_start_s": round(ray_start_s, 1),
            "sweep_s": round(sweep_s, 1), "driver_cpu_s": round(driver_cpu_s, 1), "compact_s": round(compact_s, 2),
            "trials_per_s": round(len(trials) / sweep_s, 1), "missing": len(missing),
            "driver_rss_start_mib": round(watch.rss0 / 2**20), "driver_rss_peak_mib": round(watch.peak / 2**20),
            "driver_rss_growth_mib": round((watch.peak - watch.rss0) / 2**20),
            f"driver_rss_after_{WARM_ROWS}_rows_mib": round((watch.rss_warm or 0) / 2**20),
            f"driver_rss_growth_after_{WARM_ROWS}_rows_mib":
                round((watch.peak - (watch.rss_warm or watch.peak)) / 2**20),
            "driver_rss_before_last_row_mib": round(watch.rss_last_row / 2**20),
            "driver_rss_end_of_sweep_mib": round(rss_end / 2**20), "tracemalloc_growth": grew,
            "durability_checks": watch.checks, "rows_not_durable": watch.not_durable,
            "rows_in_results": len(read_results([out])), "cpu_count": os.cpu_count()}


if __name__ == "__main__":
    sys.exit(main())
