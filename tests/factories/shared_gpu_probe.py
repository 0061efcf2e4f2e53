"""Test-only: a sweep with `trials_per_gpu: 2` through the real runner, on a private Ray that
declares two GPUs on this CPU-only machine, with the measuring replaced by a probe that records
which GPU Ray gave the trial, when it ran and what its payload said. Each probe stays until four
probes have started (files in a directory count them; at most `BARRIER_S`, which only catches a
runner that never runs four at once), so the first four overlap because the runner ran them
together, whatever the machine's speed.

    python -m tests.factories.shared_gpu_probe RESULTS_DIR
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import ray

from sweeper.run import ray_tune as runner
from sweeper.run.state import SweepState
from sweeper.spec.sweep_spec import parse_spec
from sweeper.spec.trials import expand
from tests.helpers import tiny_spec

BARRIER_S = 300


def probe(payload: dict, max_retries: int = 1) -> dict:
    start = time.time()
    running = Path(os.environ["SHARED_GPU_PROBE_RUNNING"])  # read in the worker, which inherits it
    (running / f"{os.getpid()}-{payload['trial']['trial_id']}").touch()
    deadline = time.monotonic() + BARRIER_S
    while len(list(running.iterdir())) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the others see four too before this one leaves
    facts = {"gpu_ids": [str(g) for g in ray.get_gpu_ids()], "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
             "trials_per_gpu": payload["trials_per_gpu"], "pin_cpus": payload["pin_cpus"],
             "start": start, "end": time.time()}
    return {"status": "ok", "error": None, "throughput_items_s": 1.0, "notes": json.dumps(facts)}


def main() -> int:
    results = Path(sys.argv[1])
    (results.parent / "running").mkdir(parents=True, exist_ok=True)
    os.environ["SHARED_GPU_PROBE_RUNNING"] = str(results.parent / "running")  # Ray's workers inherit it
    spec = parse_spec(tiny_spec("shared", axes={"batch_size": [1, 2, 4, 8]},
                                resources={"device": "cuda", "trials_per_gpu": 2, "max_concurrent_trials": None}))
    trials, _ = expand(spec)
    ray.init(num_cpus=8, num_gpus=2, include_dashboard=False, logging_level="ERROR")
    state = SweepState.open(spec, results, resume=False)
    state.claim()
    state.save_manifest()
    missing = runner.run_sweep(state, trials, "cuda", _measure=probe)
    state.close()
    ray.shutdown()
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
