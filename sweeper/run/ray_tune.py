"""The only module that imports Ray: start or attach to Ray, run each trial as a Ray Tune
trial (one GPU each by default, anywhere in the cluster), and gather rows on the driver.

Rows travel back as Tune results, so no shared file system is needed; the driver writes
each one durably the moment it arrives.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("TUNE_MAX_PENDING_TRIALS_PG", "64")
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # with verbose=0: no Tune tables, our progress lines only

import ray  # noqa: E402
from ray import tune  # noqa: E402

from sweeper.run.isolate import user_import_path  # noqa: E402
from sweeper.run.progress import Progress  # noqa: E402
from sweeper.spec.schema import SweepSpec  # noqa: E402
from sweeper.run.state import SweepError, SweepState  # noqa: E402
from sweeper.spec.trials import Trial  # noqa: E402

log = logging.getLogger(__name__)


def connect(address: str | None) -> None:
    """Attach to `address` (auto, HOST:PORT, ray://HOST:10001) or start a local Ray.

    A local Ray started here has no dashboard and no job API (nothing serves port 8265),
    and it is always a new one: never a `ray start` cluster found on this machine.
    """
    if ray.is_initialized():
        return
    for name in ("ray.tune", "ray.train", "ray.air"):
        logging.getLogger(name).setLevel(logging.ERROR)
    common: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False,
                              "configure_logging": True}
    if address:
        ray.init(address=address, **common)
    else:
        ray.init(address="local", include_dashboard=False, dashboard_host="127.0.0.1", **common)


def resolve_device(spec: SweepSpec) -> str:
    gpus = ray.cluster_resources().get("GPU", 0)
    wanted = spec.resources.device
    if wanted == "cuda" and gpus == 0:
        raise SweepError("resources.device is 'cuda' but the Ray cluster has no GPUs")
    return "cuda" if wanted == "cuda" or (wanted == "auto" and gpus > 0) else "cpu"


def _trainable(config: dict[str, Any]) -> None:
    """Runs in a Ray worker: measure in fresh subprocesses, report the row to the driver."""
    from sweeper.run.isolate import run_trial

    row = run_trial(config["payload"], max_retries=config["max_retries"])
    row["node_ip"] = ray.util.get_node_ip_address()
    row["node_id"] = ray.get_runtime_context().get_node_id()  # IPs repeat when nodes share a host
    tune.report({"row_json": json.dumps(row, default=str)})


class _Collector(tune.Callback):
    """Driver side: each trial's row is written durably as soon as it arrives."""

    def __init__(self, state: SweepState, trials: dict[str, Trial], progress: Progress):
        self.state, self.trials, self.progress = state, trials, progress
        self.done: set[str] = set()
        self.started_at: dict[str, datetime] = {}

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.started_at.setdefault(_trial_name(trial), datetime.now(UTC))  # a Tune retry keeps the first
        self.progress.start(_trial_name(trial))

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        tid = _trial_name(trial)
        if "row_json" in result and tid not in self.done:
            self._record(tid, json.loads(result["row_json"]))

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        tid = _trial_name(trial)
        if tid not in self.done:
            now = datetime.now(UTC)
            started = self.started_at.get(tid, now)
            self._record(tid, {"status": "crashed", "error": _failure_text(trial),
                               "attempts": max(1, getattr(trial, "num_failures", 1)),
                               "started_at": started.isoformat(), "finished_at": now.isoformat(),
                               "trial_wall_s": (now - started).total_seconds()})

    def _record(self, tid: str, measured: dict[str, Any]) -> None:
        self.done.add(tid)
        row = self.state.add(self.trials[tid], measured)
        self.progress.finish(tid, self.trials[tid].label, row)


def _failure_text(trial: Any) -> str:
    """Tune's record of a trial's last failure (a dead worker, a lost node), on one line."""
    head = "the Ray worker running this trial failed or died"
    try:
        text = Path(trial.error_file).read_text(errors="replace")
    except (OSError, TypeError, AttributeError):
        return head
    last = text.rsplit("Failure # ", 1)[-1].partition("\n")[2]  # drop "N (occurred at ...)"
    last = " ".join(last.split())
    return f"{head}: {last[:2000]}" if last else head


def _trial_name(trial: Any) -> str:
    return trial.config["payload"]["trial"]["trial_id"]


def cpus_per_trial(spec: SweepSpec, device: str) -> tuple[int, bool]:
    """CPUs each trial holds, and whether its processes are pinned to them. By default on GPUs:
    each GPU's equal share of its node's CPUs (the smallest share over the GPU nodes)."""
    r = spec.resources
    if r.cpus_per_trial is not None:
        return r.cpus_per_trial, True
    if device != "cuda":
        return 1, False
    shares = [int(n["Resources"]["CPU"] * r.gpus_per_trial // n["Resources"]["GPU"])
              for n in ray.nodes() if n.get("Alive") and n["Resources"].get("GPU") and n["Resources"].get("CPU")]
    return max(1, min(shares, default=1)), True


def run_sweep(state: SweepState, trials: list[Trial], device: str) -> None:
    """Run `trials` (already filtered for resume) and record every one in `state`."""
    r = state.spec.resources
    cpus, pinned = cpus_per_trial(state.spec, device)
    resources = {"cpu": cpus, "gpu": r.gpus_per_trial if device == "cuda" else 0}
    # CPU trials share the host's cores: run them one at a time unless the spec says otherwise.
    concurrent = r.max_concurrent_trials or (None if device == "cuda" else 1)
    gpus = int(ray.cluster_resources().get("GPU", 0) / r.gpus_per_trial) if device == "cuda" else 1
    progress = Progress.of(trials, slots=concurrent or max(1, gpus))
    collector = _Collector(state, {t.trial_id: t for t in trials}, progress)
    import_path = user_import_path()  # where the driver found the spec's factories
    payloads = [{"trial": t.to_dict(), "device": device, "import_path": import_path,
                 "pin_cpus": cpus if pinned else None} for t in trials]
    storage = tempfile.mkdtemp(prefix="sweeper-tune-")
    try:
        tuner = tune.Tuner(
            tune.with_resources(_trainable, resources),
            param_space={"payload": tune.grid_search(payloads), "max_retries": r.max_retries},
            tune_config=tune.TuneConfig(num_samples=1, max_concurrent_trials=concurrent, reuse_actors=True,
                                        trial_name_creator=_trial_name, trial_dirname_creator=_trial_name),
            run_config=tune.RunConfig(name=state.sweep_id, storage_path=storage, verbose=0,
                                      callbacks=[collector],
                                      failure_config=tune.FailureConfig(max_failures=r.max_retries)),
        )
        tuner.fit()
    finally:
        shutil.rmtree(storage, ignore_errors=True)
    missing = [t for t in trials if t.trial_id not in collector.done]
    for t in missing:  # Tune ended without a result or an error for these (e.g. interrupted)
        log.warning("no result for trial %s (%s)", t.trial_id, t.label)
