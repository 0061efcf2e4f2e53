"""Ray for a sweep: attach to or start Ray by Ray's own address rules, run each trial as a
Ray Tune trial (one GPU each by default, anywhere in the cluster), and gather rows on the driver.
With run/search.py (what Tune sees of a trial, and which trial runs next), the only Ray code.

Rows travel back as Tune results, so no shared file system is needed; the driver writes
each one durably to Parquet the moment it arrives. A trial's large files (Mega-Cache artifact,
compile trace) do not: the worker hands them to a small actor on the driver's node, which writes
them beside the results before the row is reported (run.artifacts). Tune keeps its own records
too (flat metrics and parameters, JSON, CSV and TensorBoard logs) under RESULTS/tune or `--storage`.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("TUNE_MAX_PENDING_TRIALS_PG", "64")
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # with verbose=0: no Tune tables, our progress lines only
# Tune would catch Ctrl-C, end the run as if it had finished and return: let it reach the CLI instead,
# which says how to resume and exits 130 (SIGTERM takes the same path, see `connect`).
os.environ.setdefault("TUNE_DISABLE_SIGINT_HANDLER", "1")
os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"  # Tune's own records are the ones --tune-logs names

import ray
from ray import tune
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from sweeper.run import artifacts, placement, search
from sweeper.run.address import CONNECT_ENV, attach, check_client, connect_limit_s, error_summary, probe
from sweeper.run.collector import Collector, collect_client_results, per_trial, place, trial_name
from sweeper.run.cpus import cpus_per_trial
from sweeper.run.isolate import trial_payloads
from sweeper.run.options import CALLBACKS, TUNE_LOGS, check_options, import_tensorboardx_without_torch, storage_uri
from sweeper.run.progress import Progress, kind
from sweeper.run.state import SweepError, SweepState
from sweeper.spec.sweep_spec import SweepSpec
from sweeper.spec.trials import Trial

log = logging.getLogger(__name__)


def connect(address: str | None) -> None:
    """Ray's own rules: no address is plain `ray.init()` (RAY_ADDRESS, else the `ray start`
    cluster running on this machine, else a new local Ray without dashboard); `local` is always
    a new private Ray; `auto`, HOST:PORT and ray://HOST:PORT attach to a cluster. An address
    with nothing behind it is a SweepError naming it; a silent one ends it (connect_limit_s)."""
    target = address or os.environ.get("RAY_ADDRESS") or None
    check_client(target)
    limit_s = connect_limit_s()
    if ray.is_initialized():
        return
    for name in ("ray.tune", "ray.train", "ray.air"):
        logging.getLogger(name).setLevel(logging.ERROR)
    if target not in (None, "auto", "local"):
        probe(target)
    common: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False,
                              "configure_logging": True, "include_dashboard": False}
    watchdog = threading.Timer(limit_s, _give_up, args=(target, limit_s))
    watchdog.daemon = True
    if target not in (None, "local"):
        watchdog.start()
    if (target or "").startswith("ray://"):
        _bound_client_disconnect()
    try:
        attach(lambda: ray.init(address=address, **common), target)
    except ConnectionError as e:
        raise SweepError(f"cannot attach to Ray at {target}: {error_summary(str(e))}") from None
    finally:
        watchdog.cancel()
    signal.signal(signal.SIGTERM, _interrupt)  # ray.init installed sys.exit; stop like Ctrl-C instead


CLIENT_CLOSE_S = 5.0
"""How long a failed Ray Client attach waits for its log thread before the next attempt."""


def _bound_client_disconnect() -> None:
    """A Ray Client attach whose server died starting fails, then its disconnect joins the client's
    log thread with no limit; that thread waits on the head's log stream, which tries the dead
    server's channel 5 times for RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S each (2.5 min by
    default) before it ends. The thread is a daemon: wait for it CLIENT_CLOSE_S at most, so that
    `attach` can try again within the connect limit."""
    from ray.util.client.logsclient import LogstreamClient

    def close(self: LogstreamClient) -> None:
        self.request_queue.put(None)
        if self.log_thread is not None:
            self.log_thread.join(CLIENT_CLOSE_S)

    LogstreamClient.close = close  # type: ignore[method-assign]


def _give_up(address: str, limit_s: float) -> None:
    """Ray's connect blocks in native code, where no signal handler runs: end the process."""
    log.error("sweeper: error: Ray at %s did not answer within %.0f s (a busy machine or a far cluster may "
              "need longer: set %s=SECONDS)", address, limit_s, CONNECT_ENV)
    logging.shutdown()
    os._exit(2)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def placement_lines(address: str | None, trials: list[Trial]) -> list[str]:
    """`sweeper validate --address`: the cluster's GPU types, their nodes, and each one's trials."""
    connect(address)
    nodes = placement.alive(ray.nodes())
    found = placement.plan(trials, nodes)
    gpus = sum(n.get("Resources", {}).get("GPU", 0) for n in nodes)
    return [f"cluster: {len(nodes)} alive nodes, {gpus:g} GPUs, accelerator types: "
            f"{', '.join(sorted(found.nodes_by_type)) or 'none'}", *found.lines()]


def resolve_device(spec: SweepSpec) -> str:
    gpus = ray.cluster_resources().get("GPU", 0)
    wanted = spec.resources.device
    if wanted == "cuda" and gpus == 0:
        raise SweepError("resources.device is 'cuda' but the Ray cluster has no GPUs")
    return "cuda" if wanted == "cuda" or (wanted == "auto" and gpus > 0) else "cpu"

_SHARED: dict[str, dict[str, Any]] = {}
"""In a Ray worker: what every trial of a sweep shares, by its object's id, fetched once per process."""


def _shared(handle: list[Any]) -> dict[str, Any]:
    """The sweep's shared object (trial payloads, retries, the artifact sink). Tune's
    `with_parameters` fetches and unpickles its objects again for every trial an actor runs, so it
    carries only this one-element list holding the object's reference; a reused actor fetches the
    object itself once (a cluster sweep's payloads are megabytes, its trials thousands)."""
    ref = handle[0]
    key = ref.hex()
    if key not in _SHARED:
        _SHARED.clear()  # a worker runs one sweep's trials at a time
        _SHARED[key] = ray.get(ref)
    return _SHARED[key]


def _trainable(config: dict[str, Any], shared: list[Any]) -> None:
    """Runs in a Ray worker: measure in fresh subprocesses, have the sink write the row's large
    files (when there is one), report flat metrics and the row."""
    from sweeper.run.isolate import run_trial

    tid, s = config["trial_id"], _shared(shared)
    sink, measure = s["sink"], s["measure"]
    row = (measure or run_trial)(json.loads(s["payloads"][tid]), max_retries=s["max_retries"])
    row["node_ip"] = ray.util.get_node_ip_address()
    row["node_id"] = ray.get_runtime_context().get_node_id()  # IPs repeat when nodes share a host
    if sink is not None:
        artifacts.send(row, tid, lambda relative, data: ray.get(sink.write.remote(relative, data)))
    tune.report({**search.metrics_of(row), "row_json": json.dumps(row, default=str)})


def _storage(state: SweepState, storage: str | None) -> str:
    """Where Tune keeps its records: RESULTS/tune, or a URI any pyarrow file system serves."""
    if storage is None:
        return str((state.dir / "tune").resolve())
    return storage_uri(storage)


def record_callbacks(names: tuple[str, ...]) -> list[tune.Callback]:
    """Tune's own per-trial records by name (options.TUNE_LOGS). Each costs the driver per trial:
    TensorBoard's writer starts two threads and a pipe for every trial it opens."""
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    found: list[tune.Callback] = [JsonLoggerCallback()] if "json" in names else []
    found += [CSVLoggerCallback()] if "csv" in names else []
    if "tensorboard" in names:
        import_tensorboardx_without_torch()
        try:
            from ray.tune.logger import TBXLoggerCallback

            found.append(TBXLoggerCallback())
        except ImportError:
            log.warning("no TensorBoard records: tensorboardX is not installed (pip install tensorboardX)")
    return found


def logger_callbacks(names: list[str], spec: SweepSpec) -> list[tune.Callback]:
    """Tune logger callbacks by name (wandb, mlflow), each only where its package is installed."""
    found: list[tune.Callback] = []
    for name in names:
        _, module, cls = CALLBACKS[name]
        check_options(None, [name])
        callback = getattr(importlib.import_module(module), cls)
        found.append(callback(project=spec.name) if name == "wandb" else callback(experiment_name=spec.name))
    return found


def _settings(state: SweepState, trials: list[Trial]) -> search.SettingSearch:
    known = {r["trial_id"]: {"params": search.params_of(r), "metrics": search.metrics_of(r)} for r in state.rows}
    return search.make_search(state.spec.search, {t.trial_id: search.params_of(t.to_dict()) for t in trials},
                              known)


def run_sweep(state: SweepState, trials: list[Trial], device: str, storage: str | None = None,
              callbacks: list[str] | None = None, tune_logs: tuple[str, ...] = TUNE_LOGS, *,
              no_wait: bool = False, _measure: Callable[..., dict[str, Any]] | None = None) -> list[str]:
    """Run `trials` (or the spec's search over them), record every trial that runs in `state`, and
    return the ids of trials started but left without a row (through Ray Client, rows come from
    Tune's results at the end). `tune_logs`: Tune's own records (options.TUNE_LOGS). `no_wait`: see
    collector.place. `_measure` (benchmarks/driver_scale.py only) stands in for isolate.run_trial."""
    nodes = ray.nodes()
    if not (trials := place(state, trials, nodes, no_wait)):
        return []
    r = state.spec.resources
    cpus, pinned = cpus_per_trial(r.cpus_per_trial, r.gpu_share, device, ray.nodes())
    resources = {"cpu": cpus, "gpu": r.gpu_share if device == "cuda" else 0}
    concurrent = r.max_concurrent_trials or (None if device == "cuda" else 1)  # CPU trials: one at a time
    gpus = int(ray.cluster_resources().get("GPU", 0) / r.gpu_share) if device == "cuda" else 1
    searcher = _settings(state, trials)
    planned = len(searcher.first) + searcher.budget
    progress = Progress(total=planned, slots=concurrent or max(1, gpus), kinds={t.trial_id: kind(t) for t in trials})
    progress.announce(resources, concurrent, ray.cluster_resources(), ray.available_resources())
    collector = Collector(state, {t.trial_id: t for t in trials}, progress, resources, placement.NodeWatch.of(nodes))
    client = ray.util.client.ray.is_connected()
    payloads = trial_payloads(trials, device, cpus if pinned else None, r)
    with _sink(state, client) as sink:
        shared = ray.put({"payloads": payloads, "max_retries": r.max_retries, "measure": _measure, "sink": sink})
        trainable = tune.with_parameters(_trainable, shared=[shared])
        grid = tune.Tuner(
            tune.with_resources(trainable, per_trial(resources, trials)),
            tune_config=tune.TuneConfig(search_alg=searcher, num_samples=planned, max_concurrent_trials=concurrent,
                                        reuse_actors=True, trial_name_creator=trial_name,
                                        trial_dirname_creator=trial_name),
            run_config=tune.RunConfig(name=f"run-{datetime.now(UTC):%Y%m%d-%H%M%S}",
                                      storage_path=None if client and storage is None else _storage(state, storage),
                                      verbose=0, callbacks=[*([] if client else [collector]),
                                                            *record_callbacks(tune_logs),
                                                            *logger_callbacks(callbacks or [], state.spec)],
                                      failure_config=tune.FailureConfig(max_failures=r.max_retries)),
        ).fit()
    return _without_row(collector, collect_client_results(collector, grid) if client else searcher.suggested)


def _without_row(collector: Collector, started: list[str]) -> list[str]:
    """Trials Tune started and ended without a result or an error."""
    missing = [tid for tid in started if tid not in collector.done]
    for tid in missing:
        log.warning("no result for trial %s (%s)", tid, collector.trials[tid].label)
    return missing


@contextmanager
def _sink(state: SweepState, client: bool) -> Iterator[Any]:
    """The actor that writes trials' large files into the results directory, on this node, for
    the sweep's length; none through Ray Client (the driver is on no node of the cluster)."""
    if client:
        yield None
        return
    here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
    sink = ray.remote(num_cpus=0)(artifacts.Sink).options(scheduling_strategy=here).remote(str(state.dir.resolve()))
    try:
        yield sink
    finally:
        ray.kill(sink)

