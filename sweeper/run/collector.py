"""The driver's side of a running sweep on a (mixed) cluster: the Tune callback that writes each
trial's row the moment it arrives, notes attempts lost with their node (and which node), and says
when nodes leave or join; which trials to hand Tune when some ask for a GPU type the cluster lacks
(wait for it, or `unplaced` rows at once); and what each trial asks Ray for.
With run/ray_tune.py and run/search.py, the only Ray modules.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ray
from ray import tune

from sweeper.run import placement
from sweeper.run.progress import Progress
from sweeper.run.state import SweepState
from sweeper.spec.trials import Trial

log = logging.getLogger("sweeper.run.ray_tune")

NODE_POLL_S = 2.0
"""How often the driver reads Ray's node table to say which nodes left or joined."""


class Collector(tune.Callback):
    """Driver side: each trial's row is written durably as soon as it arrives."""

    def __init__(self, state: SweepState, trials: dict[str, Trial], progress: Progress,
                 resources: dict[str, float] | None = None, nodes: placement.NodeWatch | None = None):
        self.state, self.trials, self.progress, self.resources = state, trials, progress, resources or {}
        self.done: set[str] = set()
        self.started_at: dict[str, datetime] = {}
        self.actors: dict[str, str] = {}
        """Trial id -> the Ray actor id of its current attempt."""
        self.lost: dict[str, list[str]] = {}
        """Trial id -> node ids of its attempts lost with their node or worker ("" where unknown)."""
        self.nodes = nodes or placement.NodeWatch()
        self.nodes_seen = time.monotonic()

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        tid = trial_name(trial)
        self.started_at.setdefault(tid, datetime.now(UTC))  # a Tune retry keeps the first
        actor = getattr(getattr(trial, "temporary_state", None), "ray_actor", None)
        if actor is not None:
            self.actors[tid] = actor._actor_id.hex()
        self.progress.start(tid, self.trials[tid].label)

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        """A trial's attempt failed (its node or worker died) and Tune queued it again."""
        tid = trial_name(trial)
        node = _actor_node(self.actors.pop(tid, None))
        self.lost.setdefault(tid, []).append(node)
        self.progress.started.pop(tid, None)
        log.warning("lost attempt %d of %s on node %s: %s; queued again", len(self.lost[tid]),
                    self.trials[tid].label, node[:12] or "(unknown)", _failure_text(trial)[:300])

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        if time.monotonic() - self.nodes_seen >= NODE_POLL_S:
            self.nodes_seen = time.monotonic()
            for line in self.nodes.update(ray.nodes()):
                log.warning("%s", line)
        if self.progress.wait_line_due():  # count the waiting trials only when a line is due: Tune steps often
            self.progress.waiting(sum(t.status == "PENDING" for t in trials), self.resources, ray.available_resources)

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        tid = trial_name(trial)
        if "row_json" in result and tid not in self.done:
            self._record(tid, json.loads(result["row_json"]))

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        tid = trial_name(trial)
        if tid not in self.done:  # Tune's failures count the lost attempts, which _record adds again
            now = datetime.now(UTC)
            started = self.started_at.get(tid, now)
            self._record(tid, {"status": "crashed", "error": _failure_text(trial),
                               "attempts": max(1, getattr(trial, "num_failures", 1) - len(self.lost.get(tid, []))),
                               "started_at": started.isoformat(), "finished_at": now.isoformat(),
                               "trial_wall_s": (now - started).total_seconds()})

    def _record(self, tid: str, measured: dict[str, Any]) -> None:
        self.done.add(tid)
        lost = self.lost.get(tid, [])
        if lost:
            measured = {**measured, "lost_attempts": len(lost), "lost_nodes": ",".join(lost),
                        "attempts": int(measured.get("attempts") or 1) + len(lost)}
        row = self.state.add(self.trials[tid], measured)
        self.progress.finish(tid, self.trials[tid].label, row)


def _actor_node(actor_id: str | None) -> str:
    """The node a (possibly dead) actor was placed on, from the GCS's actor table; "" if unknown."""
    if actor_id is None:
        return ""
    from ray._private import state as ray_state

    try:
        return str(ray_state.state.actor_table(actor_id).get("Address", {}).get("NodeID") or "")
    except Exception:  # a best-effort note in a row, never a reason to stop a sweep
        log.debug("no actor table entry for %s", actor_id, exc_info=True)
        return ""


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


def trial_name(trial: Any) -> str:
    return trial.config["trial_id"]


def place(state: SweepState, trials: list[Trial], nodes: list[dict[str, Any]], no_wait: bool) -> list[Trial]:
    """The trials to hand Tune: those of a GPU type the cluster lacks wait, with a line saying so
    (an autoscaler may add a node of it), or with `no_wait` get an `unplaced` row and are left out."""
    found = placement.plan(trials, nodes)
    if not found.missing:
        return trials
    for line in found.lines():
        log.info("%s", line)
    lacking = set(found.missing)
    if not no_wait:
        log.warning("the cluster has no node of accelerator_type %s: those trials wait for one (an autoscaler "
                    "may add it); --no-wait ends them at once as unplaced rows", ", ".join(found.missing))
        return trials
    for t in trials:
        if t.accelerator_type in lacking:
            row = state.add(t, placement.unplaced_row(t, found.nodes_by_type))
            log.warning("UNPLACED %s: %s", t.label, row["error"])
    return [t for t in trials if t.accelerator_type not in lacking]


def per_trial(resources: dict[str, float], trials: list[Trial]) -> Any:
    """What each trial asks Ray for: the same for all (no accelerator_type), else its type's marker too."""
    if all(t.accelerator_type is None for t in trials):
        return resources
    from ray.tune.execution.placement_groups import resource_dict_to_pg_factory

    types = {t.trial_id: t.accelerator_type for t in trials}
    return lambda config: resource_dict_to_pg_factory(placement.trial_resources(resources, types[config["trial_id"]]))


def collect_client_results(collector: Collector, grid: Any) -> list[str]:
    """Ray Client: record each trial's row from the results Tune sent back; returns the trial ids."""
    seen: list[str] = []
    for result in grid:
        tid = (result.config or {}).get("trial_id")
        if tid is None:
            continue
        seen.append(tid)
        if "row_json" in (result.metrics or {}):
            collector._record(tid, json.loads(result.metrics["row_json"]))
        elif result.error is not None:
            now = datetime.now(UTC).isoformat()
            collector._record(tid, {"status": "crashed", "started_at": now, "finished_at": now,
                                    "error": f"the Ray worker running this trial failed: {result.error}"[:2000]})
    return seen
