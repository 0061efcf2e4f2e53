"""Where a sweep's trials can run on a mixed cluster, from Ray's node table (`ray.nodes()`): the
GPU types it has (Ray's `accelerator_type:<NAME>` node resources), how many trials each type
gets, which types it lacks, and the lines the driver prints as nodes leave and join.

Pure functions over the node table, so `sweeper validate --address` and the runner read one
answer, and the tests can hand it node tables of their own.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sweeper.spec.trials import Trial

PREFIX = "accelerator_type:"
"""Ray's node resource naming a GPU type: `accelerator_type:H100` on a node of H100s."""
PER_TRIAL = 0.001
"""How much of its type's resource a trial holds: a marker of where it may run (Ray gives each node
1 of it), never the limit of how many run there: the GPUs are."""


def resource(accelerator_type: str) -> str:
    return f"{PREFIX}{accelerator_type}"


def trial_resources(base: dict[str, float], accelerator_type: str | None) -> dict[str, float]:
    """What Tune asks Ray for on behalf of one trial: `base`, plus its GPU type's marker."""
    return base if accelerator_type is None else {**base, resource(accelerator_type): PER_TRIAL}


def node_types(node: dict[str, Any]) -> list[str]:
    return sorted(k.removeprefix(PREFIX) for k in node.get("Resources", {}) if k.startswith(PREFIX))


def alive(nodes: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [n for n in nodes if n.get("Alive")]


@dataclass(frozen=True)
class Placement:
    """A sweep's trials against a cluster's alive nodes."""

    trials_by_type: dict[str, int]
    """GPU type asked for -> its trials (only trials that name a type)."""
    nodes_by_type: dict[str, int]
    """GPU type the cluster has -> alive nodes of it."""
    gpus_by_type: dict[str, float]
    anywhere: int = 0
    """Trials that name no type."""

    @property
    def missing(self) -> list[str]:
        return [t for t in self.trials_by_type if t not in self.nodes_by_type]

    def lines(self) -> list[str]:
        """One line per type, asked for or present: its nodes, GPUs and trials."""
        out = []
        for name in dict.fromkeys([*self.trials_by_type, *sorted(self.nodes_by_type)]):
            nodes, gpus, trials = self.nodes_by_type.get(name, 0), self.gpus_by_type.get(name, 0), \
                self.trials_by_type.get(name, 0)
            where = (f"{nodes} node{'s' * (nodes != 1)}, {gpus:g} GPU{'s' * (gpus != 1)}" if nodes
                     else "no node of this type: its trials wait for one (or end unplaced with --no-wait)")
            out.append(f"  accelerator_type {name}: {trials} trial{'s' * (trials != 1)}; {where}")
        if self.anywhere:
            out.append(f"  {self.anywhere} trials name no accelerator_type: any node with a free slot runs them")
        return out


def plan(trials: Iterable[Trial], nodes: Iterable[dict[str, Any]]) -> Placement:
    asked = Counter(t.accelerator_type for t in trials)
    anywhere = asked.pop(None, 0)
    present: Counter[str] = Counter()
    gpus: Counter[str] = Counter()
    for n in alive(nodes):
        for name in node_types(n):
            present[name] += 1
            gpus[name] += n.get("Resources", {}).get("GPU", 0)
    return Placement(dict(asked), dict(present), dict(gpus), anywhere)


def unplaced_row(trial: Trial, nodes_by_type: dict[str, int]) -> dict[str, Any]:
    """The row of a trial that never ran: its type is not in the cluster (`--no-wait`)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    has = ", ".join(sorted(nodes_by_type)) or "none"
    return {"status": "unplaced", "attempts": 0, "started_at": now, "finished_at": now, "trial_wall_s": 0.0,
            "error": f"no alive node of accelerator_type {trial.accelerator_type} in the Ray cluster "
                     f"(its types: {has}); run again with --resume once the cluster has one"}


def node_text(node: dict[str, Any]) -> str:
    types = ",".join(node_types(node)) or "no accelerator_type"
    return f"{node['NodeID'][:12]} ({node.get('NodeManagerAddress', '?')}, {types})"


@dataclass
class NodeWatch:
    """The cluster's alive nodes as last seen: `update` names the nodes that left or joined since."""

    known: dict[str, dict[str, Any]] = field(default_factory=dict)
    left_at: dict[str, float] = field(default_factory=dict)
    """Node id -> time.time() when this watch saw it gone."""

    @classmethod
    def of(cls, nodes: Iterable[dict[str, Any]]) -> NodeWatch:
        return cls({n["NodeID"]: n for n in alive(nodes)})

    def update(self, nodes: Iterable[dict[str, Any]], now: float | None = None) -> list[str]:
        now = time.time() if now is None else now
        seen = {n["NodeID"]: n for n in alive(nodes)}
        stamp = time.strftime("%H:%M:%S", time.localtime(now))
        lines = [f"node {node_text(n)} left the cluster (seen gone at {stamp}); its running trials go back "
                 "in the queue" for nid, n in self.known.items() if nid not in seen]
        lines += [f"node {node_text(n)} joined the cluster at {stamp}; waiting trials of its type may start"
                  for nid, n in seen.items() if nid not in self.known]
        self.left_at.update({nid: now for nid in self.known if nid not in seen})
        self.known = seen
        return lines
