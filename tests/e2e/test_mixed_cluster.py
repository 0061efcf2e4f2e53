"""A mixed cluster on this one machine: real `ray start` nodes whose GPU types are fake
`accelerator_type:<NAME>` resources (a head that runs no trial, two T1 nodes, one T2 node, one CPU
each), one cluster for the whole module. `sweeper run --address` runs as a user would run it.

- a two-type sweep puts every trial on a node of its type (and `validate --address` said so first);
- the raylet of the node running a trial is SIGKILLed while the trial waits on a gate file (so the
  kill lands mid-trial by construction): the finished row stays, the trial finishes on the other T1
  node, its row names the lost attempt and node, and the driver says the node left;
- a type the cluster lacks: `--no-wait` ends its trials as `unplaced` (exit 4); `--resume` waits,
  and a node of that type added meanwhile runs them.

Isolated from any other Ray: its own temp dir, ports and auth token; torn down by the ids of the
processes started here.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import psutil
import pytest

from tests.helpers import IMPORT_PATH, free_port, stop_ray_nodes, tiny_spec, wait_for, write_spec

pytestmark = pytest.mark.slow

WORKERS = {"w1": "T1", "w2": "T2", "w3": "T1"}  # node name -> its fake GPU type
WAIT_S = 240  # bounds every wait: only a hang reaches it
PREFIX = "accelerator_type:"


@dataclass
class Cluster:
    address: str
    env: dict[str, str]
    temp_dir: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    node_ids: dict[str, str] = field(default_factory=dict)  # node name -> Ray node id
    killed: set[str] = field(default_factory=set)

    def start(self, name: str, gpu_type: str | None = None) -> None:
        """`ray start --block` in a session of its own, one CPU (none on the head)."""
        head = not self.procs
        resources = {f"node_{name}": 1, **({f"{PREFIX}{gpu_type}": 1} if gpu_type else {})}
        where = (["--head", f"--port={self.address.rsplit(':', 1)[1]}", "--include-dashboard=false"] if head
                 else [f"--address={self.address}"])
        log_path = self.temp_dir / f"{name}.log"
        with open(log_path, "w") as log:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-c", "from ray.scripts.scripts import main; main()", "start", "--block", *where,
                 f"--num-cpus={0 if head else 1}", "--num-gpus=0", f"--resources={json.dumps(resources)}",
                 f"--temp-dir={self.temp_dir}", f"--dashboard-agent-listen-port={free_port()}",
                 f"--object-store-memory={100 * 2**20}", "--disable-usage-stats"],
                env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.temp_dir)
        wait_for(f"ray start {name}", lambda: "Ray runtime started" in log_path.read_text(), self.procs[name],
                  log_path)
        self.node_ids.update(self._ids(len(self.procs) - len(self.killed)))

    def _ids(self, alive: int) -> dict[str, str]:
        script = ("import json, sys, time, ray\nray.init(address=sys.argv[1], log_to_driver=False, "
                  "logging_level='ERROR')\nwhile len([n for n in ray.nodes() if n['Alive']]) < int(sys.argv[2]):\n"
                  "    time.sleep(0.5)\nprint(json.dumps({k[5:]: n['NodeID'] for n in ray.nodes() if n['Alive'] "
                  "for k in n['Resources'] if k.startswith('node_')}))")
        out = subprocess.run([sys.executable, "-c", script, self.address, str(alive)], env=self.env,
                             capture_output=True, text=True, timeout=WAIT_S)
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    def raylet(self, name: str) -> psutil.Process:
        found = [p for p in psutil.Process(self.procs[name].pid).children(recursive=True) if p.name() == "raylet"]
        assert len(found) == 1, found
        return found[0]

    def kill_raylet(self, name: str) -> None:
        self.raylet(name).kill()  # SIGKILL
        self.killed.add(name)

    def node_of(self, pid: int) -> str:
        """The node whose raylet started the process `pid` (a Ray worker)."""
        for name in self.procs:
            with contextlib.suppress(AssertionError, psutil.NoSuchProcess):
                if pid in {p.pid for p in self.raylet(name).children(recursive=True)}:
                    return name
        raise AssertionError(f"process {pid} is on no node of this cluster")

    def stop(self) -> None:
        """SIGTERM each `ray start --block` (workers first), then SIGKILL what they started."""
        stop_ray_nodes(list(self.procs.values()))


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    temp_dir = Path(tempfile.mkdtemp(prefix="sweeper-mix-"))  # short: Ray's socket paths
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    # A killed raylet is noticed by the GCS's health checks: within seconds, not Ray's default half minute.
    env.update(RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32),
               RAY_health_check_period_ms="1000", RAY_health_check_timeout_ms="1000",
               RAY_health_check_failure_threshold="3",
               PYTHONPATH=os.pathsep.join(IMPORT_PATH))
    c = Cluster(f"127.0.0.1:{free_port()}", env, temp_dir)
    try:
        c.start("head")
        for name, gpu_type in WORKERS.items():
            c.start(name, gpu_type)
        yield c
    finally:
        c.stop()
        shutil.rmtree(temp_dir, ignore_errors=True)


def _spec(work: Path, name: str, models: list[dict], types: list[str], batch_sizes: list[int]) -> Path:
    spec = tiny_spec(name, models=[{**m, "input": {"kind": "tensor", "shape": [8]}} for m in models],
                     axes={"mode": ["eager"], "batch_size": batch_sizes, "accelerator_type": types},
                     measure={"backend": "eager"}, resources={"cpus_per_trial": 1, "max_concurrent_trials": 3})
    return write_spec(work, spec)


def _sweep(cluster: Cluster, work: Path, spec: Path, *flags: str) -> tuple[subprocess.Popen, Path]:
    log = work / f"driver{len(list(work.glob('driver*.log')))}.log"
    with open(log, "w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "sweeper", "run", str(spec), "--address", cluster.address,
                                 "--results", str(work / "results"), "--no-report", "--tune-logs", "none", *flags],
                                env=cluster.env, cwd=work, stdout=sink, stderr=subprocess.STDOUT)
    return proc, log


def _finish(proc: subprocess.Popen, log: Path) -> int:
    try:
        return proc.wait(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"the sweep hung:\n{log.read_text()[-4000:]}")


def _rows(work: Path, cluster: Cluster) -> pd.DataFrame:
    from sweeper.results.store import read_results

    df = read_results([work / "results"])
    names = {v: k for k, v in cluster.node_ids.items()}
    return df.assign(node=df["node_id"].map(names))


def _part_rows(work: Path) -> int:
    from sweeper.results.store import part_files

    return len(part_files(work / "results")) if (work / "results").exists() else 0


def test_two_types_every_trial_on_a_node_of_its_type(cluster: Cluster, tmp_path: Path) -> None:
    spec = _spec(tmp_path, "two_types", [{"name": "quick", "factory": "cluster_models:make_quick"}],
                 ["T1", "T2"], [1, 2])
    told = subprocess.run([sys.executable, "-m", "sweeper", "validate", str(spec), "--address", cluster.address],
                          env=cluster.env, cwd=tmp_path, capture_output=True, text=True, timeout=WAIT_S)
    assert told.returncode == 0, told.stderr[-3000:]
    assert "accelerator types: T1, T2" in told.stdout, told.stdout
    assert "accelerator_type T1: 2 trials; 2 nodes, 0 GPUs" in told.stdout, told.stdout
    assert "accelerator_type T2: 2 trials; 1 node, 0 GPUs" in told.stdout, told.stdout
    proc, log = _sweep(cluster, tmp_path, spec)
    assert _finish(proc, log) == 0, log.read_text()[-4000:]
    df = _rows(tmp_path, cluster)
    print(df[["model", "batch_size", "accelerator_type", "node", "status"]].to_string())
    assert len(df) == 4 and df["status"].eq("ok").all(), df[["status", "error"]].to_string()
    assert (df["node"].map(WORKERS) == df["accelerator_type"]).all()
    assert sorted(df["accelerator_type"]) == ["T1", "T1", "T2", "T2"]


def test_a_node_killed_mid_trial_loses_no_row_and_the_trial_finishes_elsewhere(cluster: Cluster,
                                                                                tmp_path: Path) -> None:
    marks, gate = tmp_path / "marks", tmp_path / "gate"
    spec = _spec(tmp_path, "killed", [{"name": "quick", "factory": "cluster_models:make_quick"},
                                      {"name": "held", "factory": "cluster_models:make_held",
                                       "kwargs": {"marks_dir": str(marks), "gate": str(gate)}}], ["T1"], [1])
    proc, log = _sweep(cluster, tmp_path, spec)
    try:
        wait_for("finished row", lambda: _part_rows(tmp_path) == 1, proc, log)
        wait_for("held trial measuring", lambda: marks.exists() and any(marks.iterdir()), proc, log)
        mark = next(marks.iterdir())
        held_pid = int(mark.name)
        victim = cluster.node_of(int(mark.read_text()))  # its worker's node
        assert WORKERS[victim] == "T1", victim
        cluster.kill_raylet(victim)
        wait_for("lost attempt line", lambda: "lost attempt 1 of held" in log.read_text(), proc, log)
        gate.touch()
        assert _finish(proc, log) == 0, log.read_text()[-4000:]
    finally:
        gate.touch()
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(held_pid).kill()  # an orphan, should its worker's death have missed it
    df = _rows(tmp_path, cluster).set_index("model")
    print(df[["accelerator_type", "node", "status", "attempts", "lost_attempts", "lost_nodes"]].to_string())
    assert df["status"].eq("ok").all() and len(df) == 2, df[["status", "error"]].to_string()
    survivor = next(n for n, t in WORKERS.items() if t == "T1" and n != victim)
    assert df.loc["held", "node"] == survivor
    assert df.loc["held", "lost_attempts"] == 1 and df.loc["held", "lost_nodes"] == cluster.node_ids[victim]
    assert pd.isna(df.loc["quick", "lost_attempts"])
    text = log.read_text()
    print("\n".join(line for line in text.splitlines() if "lost attempt" in line or "the cluster" in line))
    assert f"node {cluster.node_ids[victim][:12]}" in text and "left the cluster" in text, text[-3000:]


def test_a_missing_type_ends_unplaced_or_waits_for_a_node_that_joins(cluster: Cluster, tmp_path: Path) -> None:
    spec = _spec(tmp_path, "joined", [{"name": "quick", "factory": "cluster_models:make_quick"}], ["T2", "T3"], [1])
    proc, log = _sweep(cluster, tmp_path, spec, "--no-wait")
    assert _finish(proc, log) == 4, log.read_text()[-4000:]
    first = _rows(tmp_path, cluster).set_index("accelerator_type")
    assert first.loc["T2", "status"] == "ok" and first.loc["T3", "status"] == "unplaced", first["status"]
    assert "no alive node of accelerator_type T3" in first.loc["T3", "error"]
    assert "--resume" in log.read_text().strip().splitlines()[-1]
    proc, log = _sweep(cluster, tmp_path, spec, "--resume")
    wait_for("waiting line", lambda: "no node of accelerator_type T3: those trials wait" in log.read_text(),
              proc, log)
    cluster.start("w4", "T3")
    assert _finish(proc, log) == 0, log.read_text()[-4000:]
    df = _rows(tmp_path, cluster).set_index("accelerator_type")
    print(df[["node", "status"]].to_string())
    print("\n".join(line for line in log.read_text().splitlines() if "T3" in line or "the cluster" in line))
    assert df.loc["T3", "status"] == "ok" and df.loc["T3", "node"] == "w4"
    assert df.loc["T2", "finished_at"] == first.loc["T2", "finished_at"]  # kept, not run again
    assert f"node {cluster.node_ids['w4'][:12]}" in log.read_text() and "joined the cluster" in log.read_text()
