"""A real multi-node Ray cluster on this one machine: a head and two worker nodes, each its
own raylet with one CPU. `sweeper run --address` (a subprocess, as a user would run it)
spreads the trials over the nodes, every row comes back to the driver, and no two trials
ever share a node's CPU.

The cluster is isolated from the test session's own local Ray (`ray_local`): its own temp
dir, its own ports and its own auth token, and it is torn down by the ids of the processes
started here (never `ray stop`, which would stop every Ray on the machine).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers import FACTORIES, free_port, ray_cluster_env, stop_ray_nodes, tiny_spec, write_spec

pytestmark = pytest.mark.slow

NODES = {"node_head": ["--head"], "node_w1": [], "node_w2": []}  # name -> extra `ray start` flags
START_TIMEOUT_S = 60
SWEEP_TIMEOUT_S = 180
BARRIER_S = 120
"""How long a measuring process waits for a second one to be measuring beside it: catches a
scheduler that runs one trial at a time only (the test then fails on its timestamps)."""


@dataclass
class Cluster:
    address: str
    env: dict[str, str]
    node_names: dict[str, str]  # Ray node id -> node_head / node_w1 / node_w2
    node_ips: set[str]  # what the nodes registered: one host, so one IP


def _start_node(name: str, extra: list[str], address: str, temp_dir: Path, env: dict[str, str],
                started: list[subprocess.Popen]) -> None:
    """`ray start --block` in a session of its own: SIGTERM to it shuts its node down."""
    ray_cli = [sys.executable, "-c", "from ray.scripts.scripts import main; main()"]
    port = address.rsplit(":", 1)[1]
    where = ([f"--port={port}", "--include-dashboard=false", "--dashboard-host=127.0.0.1"]
             if "--head" in extra else [f"--address={address}"])
    with open(temp_dir / f"{name}.log", "w") as log:
        proc = subprocess.Popen(
            [*ray_cli, "start", "--block", *extra, *where, "--num-cpus=1", "--num-gpus=0",
             f"--resources={json.dumps({name: 1})}", f"--temp-dir={temp_dir}",
             f"--dashboard-agent-listen-port={free_port()}",  # default 52365 would collide on one host
             f"--object-store-memory={100 * 2**20}", "--disable-usage-stats"],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=temp_dir)
    started.append(proc)
    deadline = time.monotonic() + START_TIMEOUT_S
    while "Ray runtime started" not in (temp_dir / f"{name}.log").read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"ray start for {name} failed:\n{(temp_dir / f'{name}.log').read_text()[-3000:]}")
        time.sleep(0.2)


_LIST_NODES = """
import json, sys, time, ray
ray.init(address=sys.argv[1], log_to_driver=False, logging_level="ERROR")
deadline = time.monotonic() + 60
alive = [n for n in ray.nodes() if n["Alive"]]
while len(alive) < int(sys.argv[2]) and time.monotonic() < deadline:
    time.sleep(0.5)
    alive = [n for n in ray.nodes() if n["Alive"]]
print(json.dumps({n["NodeID"]: [n["NodeManagerAddress"], *(k for k in n["Resources"] if k.startswith("node_"))]
                  for n in alive}))
"""


def _nodes(address: str, env: dict[str, str]) -> dict[str, list[str]]:
    """Ray node id -> [its IP, its node_* resource], once all the nodes are alive."""
    out = subprocess.run([sys.executable, "-c", _LIST_NODES, address, str(len(NODES))], env=env,
                         capture_output=True, text=True, timeout=START_TIMEOUT_S + 30)
    assert out.returncode == 0, out.stderr[-3000:]
    nodes = json.loads(out.stdout.strip().splitlines()[-1])
    assert sorted(name for _, *names in nodes.values() for name in names) == sorted(NODES), nodes
    return nodes


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    # Short and outside pytest's tmp_path: Ray puts Unix sockets under it (108-byte path limit).
    temp_dir = Path(tempfile.mkdtemp(prefix="sweeper-mn-"))
    env = ray_cluster_env()
    address = f"127.0.0.1:{free_port()}"
    started: list[subprocess.Popen] = []
    try:
        for name, extra in NODES.items():
            _start_node(name, extra, address, temp_dir, env, started)
        nodes = _nodes(address, env)
        yield Cluster(address, env, {k: name for k, (_, name) in nodes.items()}, {ip for ip, _ in nodes.values()})
    finally:
        stop_ray_nodes(started)
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def swept(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """Four trials (eager and aot_eager), three at a time, one CPU each: only spreading over
    the nodes fits them. The model holds each of the first two measuring processes until both are
    measuring (`make_barrier`), so two run at one time wherever Ray places them at once, and they
    run one after another, late, only where it does not."""
    work = tmp_path_factory.mktemp("multinode")
    barrier = {"factory": "faulty_models:make_barrier", "input": {"kind": "tensor", "shape": [8]},
               "kwargs": {"tickets_dir": str(work / "tickets"), "parties": 2, "timeout_s": BARRIER_S}}
    spec = tiny_spec("multinode", models=[{"name": "a", **barrier}, {"name": "b", **barrier}],
                     axes={"mode": ["eager", "default"], "dynamic": [False], "batch_size": [2]},
                     resources={"device": "cpu", "cpus_per_trial": 1, "max_concurrent_trials": 3})
    path = write_spec(work, spec)
    cmd = [sys.executable, "-m", "sweeper", "run", str(path), "--address", cluster.address,
           "--results", str(work / "results"), "--no-report"]
    env = {**cluster.env, "PYTHONPATH": os.pathsep.join([cluster.env["PYTHONPATH"], str(FACTORIES)])}
    out = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True, timeout=SWEEP_TIMEOUT_S)
    assert out.returncode == 0, f"stdout:\n{out.stdout[-3000:]}\nstderr:\n{out.stderr[-5000:]}"
    from sweeper.results.store import read_results

    df = read_results([work / "results"])
    df["node"] = df["node_id"].map(cluster.node_names)
    print(df[["model", "batch_size", "status", "node", "node_id", "started_at", "finished_at"]].to_string())
    return df


def test_every_row_reaches_the_driver_from_several_nodes(swept: pd.DataFrame, cluster: Cluster) -> None:
    assert len(swept) == 4
    assert (swept["status"] == "ok").all(), swept[["model", "status", "error"]].to_string()
    assert swept["node_id"].isin(list(cluster.node_names)).all(), swept["node_id"].tolist()
    assert swept["node_id"].nunique() > 1, "all trials ran on one node"
    # One host, one IP: only node_id tells the nodes apart.
    assert swept["hostname"].eq(socket.gethostname()).all()
    assert len(cluster.node_ips) == 1 and swept["node_ip"].isin(cluster.node_ips).all(), cluster.node_ips
    env = swept[["sweeper_version", "torch_version", "python_version", "device_name"]]
    assert env.notna().all().all(), env.to_string()
    assert swept["device_type"].eq("cpu").all() and swept["gpu_uuid"].isna().all()


def test_trials_never_share_a_node_slot(swept: pd.DataFrame) -> None:
    """cpus_per_trial=1 on one-CPU nodes: trials on one node run one after another."""
    for _, rows in swept.sort_values("started_at").groupby("node_id"):
        starts, ends = rows["started_at"].tolist(), rows["finished_at"].tolist()
        assert all(s >= e for s, e in zip(starts[1:], ends[:-1], strict=True)), rows.to_string()
    first_end = swept["finished_at"].min()  # the barrier holds the first two until both measure
    assert (swept["started_at"] < first_end).sum() > 1, "no two trials ran at the same time"
