"""Real faults in one real sweep on the session's local Ray (CPU): every trial ends as a row,
the healthy trials still finish, and nothing is left running or held afterwards.

The faults come from tests/factories/faulty_models.py: an allocation that cannot fit (oom), a compile
that raises (compile_error), a forward that raises (runtime_error), a compile that hangs
with a child process (timeout), a process that SIGKILLs itself (crashed after a retry), a
segfault on the first attempt only (ok on the retry), a Ray worker killed under its trial
(crashed, retried by Tune), and a compiled model whose outputs are wrong (inaccurate).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import psutil
import pytest
from faulty_models import HANG_CHILD_MARKER

from sweeper.results.store import read_results
from sweeper.spec.sweep_spec import load_spec
from sweeper.spec.trials import expand
from tests.helpers import REPO, run_cli, tiny_spec, write_spec

pytestmark = pytest.mark.slow

TIMEOUT_S = 60
"""Per-trial limit: far above a healthy trial here (the slowest, `ok`, takes ~8 s on 2 idle cores and
~13 s with a CPU hog per core beside it), so only the hang hits it. The hang is the first trial
started: it holds one of the two slots for this long while the other trials run beside it."""
HANG_S = 300
"""How long the sweep's leftovers may take to go: catches a hang only."""

# model -> (status, text the error must contain, attempts)
EXPECTED: dict[str, tuple[str, str | None, int]] = {
    "ok": ("ok", None, 1),
    "oom": ("oom", "can't allocate memory", 1),
    "compile_error": ("compile_error", "TorchRuntimeError: ", 1),
    "runtime_error": ("runtime_error", "ValueError: injected runtime failure", 1),
    "hang": ("timeout", f"trial exceeded trial_timeout_s={TIMEOUT_S}", 1),
    "sigkill": ("crashed", "process killed by SIGKILL", 2),
    "segfault_once": ("ok", None, 2),
    "dead_worker": ("crashed", "the Ray worker running this trial failed or died", 2),
    "inaccurate": ("inaccurate", "rel_err", 1),
}


def _model(name: str, factory: str, **kwargs) -> dict:
    return {"name": name, "factory": f"faulty_models:{factory}", "kwargs": kwargs,
            "input": {"kind": "tensor", "shape": [8]}}


class Sweep(NamedTuple):
    code: int
    df: pd.DataFrame
    trials: list
    seconds: float
    tmp: Path


@pytest.fixture(scope="module")
def fault_sweep(ray_local, tmp_path_factory) -> Sweep:
    tmp = tmp_path_factory.mktemp("faults")
    (tmp / "hang_pids").mkdir()
    models = [_model("hang", "make_hang", pid_dir=str(tmp / "hang_pids"))]  # first: the others run beside it
    models += [_model(name, f"make_{name}") for name in EXPECTED if name not in ("segfault_once", "hang")]
    models.append(_model("segfault_once", "make_segfault", once_marker=str(tmp / "segfault.done")))
    spec = write_spec(tmp, tiny_spec(
        "faults", models=models, axes={"mode": ["default"], "dynamic": [False], "batch_size": [2]},
        measure={"trial_timeout_s": TIMEOUT_S}, resources={"max_concurrent_trials": 2, "max_retries": 1}))
    t0 = time.monotonic()
    code = run_cli(["run", str(spec), "--results", str(tmp / "out"), "--no-report"])
    seconds = time.monotonic() - t0
    trials, _ = expand(load_spec(spec))
    return Sweep(code, read_results([tmp / "out" / "results.parquet"]), trials, seconds, tmp)


def test_every_trial_is_one_row_and_the_sweep_finishes(fault_sweep):
    assert fault_sweep.code == 0  # every trial has its row, failed or not
    df = fault_sweep.df
    assert df.trial_id.is_unique
    assert sorted(df.trial_id) == sorted(t.trial_id for t in fault_sweep.trials)
    assert len(set(df.sweep_id)) == 1


@pytest.mark.parametrize("model", list(EXPECTED))
def test_fault_is_recorded(fault_sweep, model):
    row = fault_sweep.df.set_index("model").loc[model]
    status, text, attempts = EXPECTED[model]
    assert (row.status, row.attempts) == (status, attempts), row.error
    if text is None:
        assert pd.isna(row.error)
    else:
        assert text in row.error, row.error
    assert not pd.isna(row.finished_at) and row.trial_wall_s > 0


def test_compile_error_names_the_cause(fault_sweep):
    error = fault_sweep.df.set_index("model").loc["compile_error"].error
    assert error.startswith("TorchRuntimeError: ") and "injected compile failure" in error


def test_healthy_trials_measured_despite_neighbours(fault_sweep):
    df = fault_sweep.df
    ok = df[df.status == "ok"]
    assert set(ok.model) == {"ok", "segfault_once"}
    assert ok.throughput_items_s.gt(0).all() and ok.accuracy_ok.all()
    wrong = df.set_index("model").loc["inaccurate"]
    assert not wrong.accuracy_ok and wrong.rel_err > wrong.accuracy_tol
    assert wrong.throughput_items_s > 0  # measured, but never to be recommended


def test_resources_are_given_back(fault_sweep):
    import ray

    deadline = time.monotonic() + HANG_S
    while ray.available_resources().get("CPU") != ray.cluster_resources().get("CPU"):
        assert time.monotonic() < deadline, (ray.available_resources(), ray.cluster_resources())
        time.sleep(0.5)


def test_no_process_left_behind(fault_sweep):
    ids = [t.trial_id for t in fault_sweep.trials]
    deadline = time.monotonic() + HANG_S
    while left := _leftovers(ids, fault_sweep.tmp):
        assert time.monotonic() < deadline, left
        time.sleep(0.5)


def test_hung_compile_killed_with_its_whole_tree(fault_sweep):
    pids = [int(p.name) for p in (fault_sweep.tmp / "hang_pids").iterdir()]
    assert len(pids) == 2  # one child in the trial's process group, one that left it
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, f"{pid} survived the timeout"


def test_trial_work_dirs_removed(fault_sweep):
    leftover = [p for t in fault_sweep.trials if t.model_name != "dead_worker"  # its worker died first
                for p in Path(tempfile.gettempdir()).glob(f"sweeper-{t.trial_id}-*")]
    assert not leftover


def test_results_are_parquet_only(fault_sweep):
    out = fault_sweep.tmp / "out"
    assert sorted(p.name for p in out.iterdir()) == ["results.parquet", "sweep.json", "tune"]  # tune: Tune's own logs
    assert (out / "results.parquet").read_bytes()[:4] == b"PAR1"
    by_value = REPO / "sweeper" / "zoo" / "sources.py"  # a notebook's model class travels as cloudpickle
    sources = "\n".join(p.read_text() for p in (REPO / "sweeper").rglob("*.py") if p != by_value)
    assert not re.search(r"import c?pickle|import cloudpickle|(to|read)_pickle|pickle\.(loads?|dumps?)\(", sources)
    assert set(re.findall(r"\w*pickle\.\w+\(", by_value.read_text())) == {"cloudpickle.loads(", "cloudpickle.dumps("}


def _leftovers(trial_ids: list[str], tmp: Path) -> list[str]:
    """This sweep's processes still running (a hang child names its sweep's folder: an earlier
    session's leftover, a test run cut short, is not this sweep's)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if (HANG_CHILD_MARKER in cmd and str(tmp) in cmd) or ("sweeper.measure" in cmd
                                                                and any(t in cmd for t in trial_ids)):
            found.append(f"{proc.info['pid']}: {cmd}")
    return found


# ---- the local Ray that sweeper starts serves no dashboard --------------------------------

_PROBE = """
import json, socket, psutil
from sweeper.run import ray_tune as runner
runner.connect(None)
me = psutil.Process()
tree = [me, *me.children(recursive=True)]
mine = {p.pid for p in tree}
listen = [[c.laddr.ip, c.laddr.port, c.pid in mine, c.pid] for c in psutil.net_connections("inet")
          if c.status == psutil.CONN_LISTEN]
hosts = ["127.0.0.1", *{a.address for addrs in psutil.net_if_addrs().values() for a in addrs
                        if a.family == socket.AF_INET and not a.address.startswith("127.")}]
reachable = []
for host in hosts:
    with socket.socket() as s:
        s.settimeout(2)
        if s.connect_ex((host, 8265)) == 0:
            reachable.append(host)
print(json.dumps({"listen": listen, "reachable": reachable, "hosts": hosts,
                  "cmdlines": {p.pid: " ".join(p.cmdline()) for p in tree}}))
"""


def test_local_ray_has_no_dashboard():
    ray_tmp = tempfile.mkdtemp(prefix="swd-")  # its own Ray: short path for Ray's sockets
    env = {**os.environ, "RAY_TMPDIR": ray_tmp, "PYTHONPATH": str(REPO)}
    env.pop("RAY_ADDRESS", None)
    try:
        out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=180)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert out.returncode == 0, out.stderr[-3000:]
    probe = json.loads(out.stdout.strip().splitlines()[-1])
    assert any(mine for *_, mine, _ in probe["listen"]), "the probe saw none of its Ray's ports"
    assert not [x for x in probe["listen"] if x[1] == 8265 and x[2]], probe["listen"]
    # Ray keeps a head process without web frontend or modules that serve anything; it must not listen.
    heads = {int(pid) for pid, cmd in probe["cmdlines"].items() if "dashboard/dashboard.py" in cmd}
    for pid in heads:
        assert "--disable-frontend" in probe["cmdlines"][str(pid)], probe["cmdlines"][str(pid)]
    assert not [x for x in probe["listen"] if x[3] in heads], probe["listen"]
    others = {ip for ip, port, mine, _ in probe["listen"] if port == 8265 and not mine}
    assert not probe["reachable"] or others, (probe["reachable"], "port 8265 answers, and nobody else holds it")
