"""Measuring processes forked from a worker's fork server are as fresh as new interpreters: each
has its own process (pid, session, process group), its trial's CPUs and thread counts, its own
inductor/Triton cache directory and empty dynamo counters, and it imports nothing heavy again.
Faults in a forked child (crash, segfault, hang) become rows: tests/e2e/test_faults.py runs its sweep
on the fork server, the spec's default."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from sweeper.run import isolate
from sweeper.spec.sweep_spec import parse_spec
from sweeper.spec.trials import expand
from tests.helpers import IMPORT_PATH, REPO, tiny_spec

pytestmark = pytest.mark.slow  # starts a fork server (imports torch, torchvision, transformers) and compiles


def _probe_trials(facts_dir: Path, backend: str, sleep_s: float = 0.0) -> list:
    spec = tiny_spec("fork", models=[{"name": "probe", "factory": "fork_probe:make_probe",
                                      "kwargs": {"facts_dir": str(facts_dir), "sleep_s": sleep_s},
                                      "input": {"kind": "tensor", "shape": [8]}}],
                     axes={"mode": ["default"], "dynamic": [False], "batch_size": [2]},
                     measure={"backend": backend, "warm_compile": backend == "inductor"})
    return expand(parse_spec(spec))[0]


def _payload(trial, process_start: str = "forkserver") -> dict:
    return {"trial": trial.to_dict(), "device": "cpu", "process_start": process_start,
            "import_path": list(IMPORT_PATH), "pin_cpus": 1}


def _facts(facts_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(facts_dir.glob("*.json"), key=lambda p: p.stat().st_mtime)]


def _in_a_thread(fn, *args, **kwargs):
    """Run `fn` in a thread that ends with it, as Tune runs each trial."""
    out: list = []
    thread = threading.Thread(target=lambda: out.append(fn(*args, **kwargs)))
    thread.start()
    thread.join()
    return out[0]


def test_forked_children_are_fresh_and_their_own(tmp_path):
    facts_dir = tmp_path / "facts"
    facts_dir.mkdir()
    rows = [_in_a_thread(isolate.run_trial, _payload(t), max_retries=0)  # as Tune runs each trial
            for t in _probe_trials(facts_dir, "inductor") + _probe_trials(facts_dir, "aot_eager")]
    for row in rows:
        assert row["status"] == "ok", row["error"]
        assert row["graphs"] == 1  # dynamo counted this process's compile only
    assert json.loads(rows[-1]["phase_s_json"])["imports"] < 1.0  # forked from a started server: nothing to import
    facts = _facts(facts_dir)
    assert len(facts) == 4  # inductor: cold, warm, Mega-Cache warm start; aot_eager: cold
    servers = {f["ppid"] for f in facts}
    assert len(servers) == 1 and all(f["forked"] for f in facts)  # one server forked them all, and
    # it outlived the threads that asked it (a parent-death signal follows the starting thread)
    assert len({f["pid"] for f in facts}) == 4 and servers.isdisjoint(f["pid"] for f in facts)
    for f in facts:
        assert f["pgid"] == f["sid"] == f["pid"]  # own session and process group: a timeout kill reaches it all
        assert f["dynamo_counters"] == {} and not f["cuda_initialized"]  # nothing inherited
        assert f["inductor_imported"] and f["compile_pools"] == 0  # inductor's code imported, no workers
        assert len(f["cpus"]) == 1 and f["torch_threads"] == 1 and f["compile_threads"] == 1  # the trial's share
        assert Path(f["cache_dir"]).name == "inductor" and "sweeper-" in f["cache_dir"]
        assert f["triton_cache_dir"] == str(Path(f["cache_dir"]).parent / "triton")
    cold, warm, mega, other = facts
    assert cold["cache_dir"] == warm["cache_dir"]  # the warm run reuses its trial's cache ...
    assert len({cold["cache_dir"], mega["cache_dir"], other["cache_dir"]}) == 3  # ... and only it
    assert 0 < rows[0]["warm_compile_s"] < rows[0]["compile_s"]  # ... and inductor really used that directory


def test_the_plain_subprocess_switch_still_starts_interpreters(tmp_path):
    facts_dir = tmp_path / "facts"
    facts_dir.mkdir()
    (trial,) = _probe_trials(facts_dir, "aot_eager")
    row = isolate.run_trial(_payload(trial, "subprocess"), max_retries=0)
    assert row["status"] == "ok", row["error"]
    (fact,) = _facts(facts_dir)
    assert not fact["forked"] and fact["ppid"] == os.getpid() and fact["pgid"] == fact["pid"]


def test_a_fork_server_killed_under_a_trial_is_a_crashed_row_and_is_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv("SWEEPER_TEST_OWN_FORKSERVER", str(tmp_path))  # not the one other tests share
    facts_dir = tmp_path / "facts"
    facts_dir.mkdir()
    (trial,) = _probe_trials(facts_dir, "aot_eager", sleep_s=120)
    rows: list[dict] = []
    runner = threading.Thread(target=lambda: rows.append(isolate.run_trial(_payload(trial), max_retries=0)))
    runner.start()
    deadline = time.monotonic() + 300
    while not _facts(facts_dir):  # the child is building its model
        assert runner.is_alive() and time.monotonic() < deadline
        time.sleep(0.1)
    (child,) = _facts(facts_dir)
    psutil.Process(child["ppid"]).kill()  # the server
    runner.join(timeout=600)  # catches a hang only
    assert rows and rows[0]["status"] == "crashed" and "fork server ended" in rows[0]["error"], rows
    psutil.wait_procs([psutil.Process(child["pid"])] if psutil.pid_exists(child["pid"]) else [], timeout=300)
    assert not psutil.pid_exists(child["pid"])  # the child died with its server
    (quick,) = _probe_trials(facts_dir, "aot_eager")
    assert isolate.run_trial(_payload(quick), max_retries=0)["status"] == "ok"  # on a new server
    assert _facts(facts_dir)[-1]["ppid"] != child["ppid"]


_WORKER = """
import json, sys
from sweeper.run import isolate
print(json.dumps(isolate.run_trial(json.loads(sys.argv[1]), max_retries=0)), flush=True)
"""


def _worker(payload: dict, env: dict) -> subprocess.Popen:
    """Another worker process running one trial, as a Ray worker would."""
    return subprocess.Popen([sys.executable, "-c", _WORKER, json.dumps(payload)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, text=True)


def _wait_for_facts(facts_dir: Path, count: int, proc: subprocess.Popen) -> list[dict]:
    deadline = time.monotonic() + 300
    while len(_facts(facts_dir)) < count:  # the child is building its model
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    return _facts(facts_dir)


def test_workers_share_the_hosts_server_and_a_worker_that_dies_takes_its_child_along(tmp_path, monkeypatch):
    """A server outlives the worker that started it and serves the next one (as the workers of a
    host and later sweeps would); killing a worker kills its measuring process, not the server."""
    monkeypatch.setenv("SWEEPER_TEST_OWN_FORKSERVER", str(tmp_path))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(IMPORT_PATH)}
    facts_dir = tmp_path / "facts"
    facts_dir.mkdir()
    (quick,) = _probe_trials(facts_dir, "aot_eager")
    first = _worker(_payload(quick), env)
    assert json.loads(first.communicate(timeout=600)[0])["status"] == "ok"
    (slow,) = _probe_trials(facts_dir, "aot_eager", sleep_s=120)
    second = _worker(_payload(slow), env)
    one, two = _wait_for_facts(facts_dir, 2, second)
    assert one["ppid"] == two["ppid"] and one["pid"] != two["pid"]  # the first worker's server, after it ended
    second.kill()  # the worker dies while its child measures
    second.wait()
    psutil.wait_procs([psutil.Process(two["pid"])] if psutil.pid_exists(two["pid"]) else [], timeout=60)
    assert not psutil.pid_exists(two["pid"])  # the child went with it
    assert psutil.pid_exists(two["ppid"])  # the server stays for the next caller
    third = _worker(_payload(quick), env)
    assert json.loads(third.communicate(timeout=600)[0])["status"] == "ok"
    assert _facts(facts_dir)[-1]["ppid"] == one["ppid"]


def test_an_idle_server_retires(tmp_path, monkeypatch):
    monkeypatch.setenv("SWEEPER_TEST_OWN_FORKSERVER", str(tmp_path))
    monkeypatch.setenv("SWEEPER_FORKSERVER_IDLE_S", "1")
    facts_dir = tmp_path / "facts"
    facts_dir.mkdir()
    (quick,) = _probe_trials(facts_dir, "aot_eager")
    assert _in_a_thread(isolate.run_trial, _payload(quick), max_retries=0)["status"] == "ok"
    (fact,) = _facts(facts_dir)
    server = psutil.Process(fact["ppid"])
    sock = Path(server.cmdline()[-2])
    assert sock.suffix == ".sock" and sock.exists()
    gone, alive = psutil.wait_procs([server], timeout=120)
    assert gone and not alive and not sock.exists()  # no caller for a second: the server left, and its socket


_GUARD_PROBE = """
import os, sys
os.environ.pop("PYTORCH_NVML_BASED_CUDA_CHECK", None)
from sweeper.measure import forkserver as fs
import torch

watch = fs._GuardWatch()
before = fs.fork_guard_set()
def users_plugin():
    return torch.cuda.is_available()  # torch's default check asks the CUDA runtime: sets the guard
users_plugin()
watch.stop()
print(before, fs.fork_guard_set(), watch.first)
"""


def test_the_cuda_fork_guard_is_seen_and_its_caller_named():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _GUARD_PROBE], capture_output=True, text=True, check=True,
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}).stdout.split(maxsplit=2)
    assert out[:2] == ["False", "True"]  # usable before, not after: a forked child would refuse CUDA
    assert "users_plugin" in out[2]  # the message names who asked


def _poisoned_site(tmp_path: Path) -> Path:
    """A user's environment that sets torch's CUDA fork guard when Python starts (a sitecustomize)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import torch\ntorch.cuda.is_available()\n")
    return site


@pytest.mark.parametrize("needs_cuda", [True, False])
def test_a_fork_guard_set_before_the_server_imports(tmp_path, monkeypatch, needs_cuda):
    """Children that are to use CUDA: the server says why it cannot fork them and exits, and the
    trial runs in new interpreters, correctly. CPU children: the guard does not concern them."""
    from sweeper.measure.forkserver import NEEDS_CUDA_ENV
    from sweeper.run import forkserver_client

    facts_dir = tmp_path / "facts"
    facts_dir.mkdir()
    if needs_cuda:  # as isolate sets it for a CUDA trial; the trial itself measures on this CPU
        monkeypatch.setenv(NEEDS_CUDA_ENV, "1")
    (trial,) = _probe_trials(facts_dir, "aot_eager")
    payload = _payload(trial)
    payload["import_path"].append(str(_poisoned_site(tmp_path)))
    rows = [_in_a_thread(isolate.run_trial, payload, max_retries=0) for _ in range(2)]
    assert [r["status"] for r in rows] == ["ok", "ok"], [r["error"] for r in rows]
    facts = _facts(facts_dir)
    assert len(facts) == 2
    refused = [why for path, why in forkserver_client._unusable.values() if str(tmp_path) in path]
    if needs_cuda:
        assert not any(f["forked"] for f in facts)
        assert all(f["ppid"] == os.getpid() for f in facts)  # started by this worker, one interpreter each
        assert len(refused) == 1 and "fork guard" in refused[0] and "before the server's own imports" in refused[0]
    else:
        assert all(f["forked"] for f in facts) and len({f["ppid"] for f in facts}) == 1 and not refused
