"""The driver with N synthetic trials spread over several Ray nodes against one node holding the
same slots: does a multi-node cluster cost the driver more? Each run starts a local Ray cluster
(`ray.cluster_utils.Cluster`: a head with no GPU, and `--nodes` worker nodes sharing `--slots` fake
GPUs evenly), then runs `benchmarks/driver_scale.py`'s sweep on it: the real runner, searcher and
sweep state, the measuring replaced by an instant synthetic row. With `--types K` the nodes carry
fake GPU types T0..T(K-1) in turn, and the spec runs every setting on each type
(`axes.accelerator_type`), so each trial also asks for its type's resource.

    python -m benchmarks.driver_scale_nodes --trials 2000 --slots 8 --nodes 1 4 --tune-logs none

Prints one JSON object per node count (driver_scale.py's figures, plus nodes and types) and the
ratio of each run's wall time to the first's.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from benchmarks import driver_scale
from sweeper.run.options import TUNE_LOGS
from sweeper.run.options import tune_logs as tune_logs_option


def spec_text(n_trials: int, slots: int, types: int) -> dict[str, Any]:
    spec = driver_scale.spec_text(n_trials if not types else n_trials // types, slots, "cuda")
    if types:
        spec["axes"]["accelerator_type"] = [f"T{i}" for i in range(types)]
    return spec


def start_cluster(nodes: int, slots: int, types: int) -> Any:
    """A head with no GPU and `nodes` workers with `slots / nodes` GPUs and CPUs each; attaches."""
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0})
    per = slots // nodes
    for i in range(nodes):
        marker = {f"accelerator_type:T{i % types}": 1} if types else {}
        cluster.add_node(num_cpus=per, num_gpus=per, resources={f"bench_node_{i}": 1, **marker})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    return cluster


def one(n_trials: int, slots: int, nodes: int, types: int, tune_logs: tuple[str, ...]) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="driver-nodes-"))
    spec_path = work / "driver_scale.yaml"
    spec_path.write_text(yaml.safe_dump(spec_text(n_trials, slots, types)))
    held: list[Any] = []
    figures = driver_scale.run(spec_path, work / "out", slots, device="cuda", tune_logs=tune_logs,
                               start_ray=lambda: held.append(start_cluster(nodes, slots, types)))
    for cluster in held:
        cluster.shutdown()
    return {"nodes": nodes, "types": types, **figures}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--slots", type=int, default=8, help="fake GPUs in all, shared evenly by the nodes")
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 4], help="node counts to run, in order")
    ap.add_argument("--types", type=int, default=0, help="fake GPU types over the nodes (0: none named)")
    ap.add_argument("--tune-logs", type=tune_logs_option, default=TUNE_LOGS, metavar="LIST")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("sweeper").setLevel(logging.WARNING)
    runs = [one(args.trials, args.slots, n, args.types, args.tune_logs) for n in args.nodes]
    for r in runs:
        r["wall_vs_first"] = round(r["sweep_s"] / runs[0]["sweep_s"], 2)
    print(json.dumps(runs, indent=2))
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2) + "\n")
    return 0 if all(r["rows_in_results"] == r["trials"] and r["rows_not_durable"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
