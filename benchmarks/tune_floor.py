"""What Ray Tune alone costs for the sweep driver_scale.py runs: its floor on this machine.

    python -m benchmarks.tune_floor [--trials 2000] [--slots 8] [--json FILE]

The same N instant trials as `benchmarks/driver_scale.py` (its spec, its payloads: each trial's
JSON as the sweep's workers get it, through `tune.with_parameters`), the same Ray (`--slots`
logical CPUs and GPUs, one GPU per trial, no dashboard), the same Tune settings (a searcher that
suggests one trial at a time, `reuse_actors`, Tune's default loggers under a new directory), but none of
sweeper's driver: no sweep state, no part files, no progress lines, no artifact sink. The trainable
parses its payload and returns a row-sized dict of metrics at once. It prints the wall time and the
driver's resident memory growth (peak over start, sampled every 0.25 s), the figures driver_scale.py
prints for the real runner; the difference between the two is what sweeper's driver adds.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import yaml

from benchmarks.driver_scale import spec_text, worker_processes
from sweeper.run.isolate import trial_payloads
from sweeper.spec.sweep_spec import load_spec
from sweeper.spec.trials import expand

REPO = Path(__file__).resolve().parent.parent


def _trainable(config: dict[str, Any], payloads: dict[str, str]) -> dict[str, Any]:
    trial = json.loads(payloads[config["trial_id"]])["trial"]
    return {"throughput_items_s": 1000.0 + trial["batch_size"], "speedup_vs_eager": 1.0, "status_code": 0}


def _searcher(ids: list[str]) -> Any:
    from ray.tune.search import Searcher

    class OneByOne(Searcher):
        """Suggests the trials in order, then says it is finished."""

        def __init__(self) -> None:
            super().__init__(metric="throughput_items_s", mode="max")
            self.left = list(ids)

        def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
            return {"trial_id": self.left.pop(0)} if self.left else Searcher.FINISHED

        def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
            pass

    return OneByOne()


def run(n_trials: int, slots: int) -> dict[str, Any]:
    import ray
    from ray import tune

    tmp = Path(tempfile.mkdtemp(prefix="tune-floor-"))
    spec_path = tmp / "driver_scale.yaml"
    spec_path.write_text(yaml.safe_dump(spec_text(n_trials, slots)))
    spec = load_spec(spec_path)
    trials, _ = expand(spec)
    payloads = trial_payloads(trials, "cuda", 1, spec.resources)
    ray.init(num_cpus=slots, num_gpus=slots, include_dashboard=False, logging_level=logging.WARNING,
             log_to_driver=False)
    proc, stop = psutil.Process(), threading.Event()
    rss0 = peak = proc.memory_info().rss

    def watch() -> None:
        nonlocal peak
        while not stop.wait(0.25):
            peak = max(peak, proc.memory_info().rss)

    threading.Thread(target=watch, daemon=True).start()
    cpu0 = sum(proc.cpu_times()[:2])
    t0 = time.monotonic()
    grid = tune.Tuner(
        tune.with_resources(tune.with_parameters(_trainable, payloads=payloads), {"cpu": 1, "gpu": 1}),
        tune_config=tune.TuneConfig(search_alg=_searcher([t.trial_id for t in trials]), num_samples=len(trials),
                                    reuse_actors=True),
        run_config=tune.RunConfig(name="floor", storage_path=str(tmp / "tune"), verbose=0),
    ).fit()
    sweep_s = time.monotonic() - t0
    stop.set()
    workers = worker_processes()
    driver_cpu_s = sum(proc.cpu_times()[:2]) - cpu0
    ray.shutdown()
    return {"trials": len(trials), "slots": slots, "ray_worker_processes": workers, "results": len(grid),
            "sweep_s": round(sweep_s, 1), "driver_cpu_s": round(driver_cpu_s, 1),
            "trials_per_s": round(len(trials) / sweep_s, 1), "driver_rss_start_mib": round(rss0 / 2**20),
            "driver_rss_peak_mib": round(peak / 2**20), "driver_rss_growth_mib": round((peak - rss0) / 2**20)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    figures = run(args.trials, args.slots)
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if figures["results"] == args.trials else 1


if __name__ == "__main__":
    sys.exit(main())
