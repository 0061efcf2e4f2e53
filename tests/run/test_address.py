"""Ray's address rules, as a Ray user meets them: `sweeper run` with no --address joins the
cluster RAY_ADDRESS names (a real `ray start --head` on this machine, with its dashboard), so
`ray job submit -- sweeper run SPEC` runs its trials on that cluster; `--address local` is a
private Ray even then; a Ray Client address (ray://) brings the rows back, through a client
server that died as it started too; an address with nothing behind it fails in one line; and
SIGTERM at any moment ends the driver, keeping the rows written and leaving no process behind.

The cluster has its own temp dir, ports and auth token, and is torn down by the ids of the
processes started here (never `ray stop`, which would stop every Ray on the machine).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import psutil
import pytest

from tests.helpers import REPO, free_port, ray_cluster_env, stop_ray_nodes, tiny_spec, write_spec

SWEEP_TIMEOUT_S = 600
HANG_S = 300
"""Limits that catch a hang only: generous, since a loaded 2-core machine is slow, not broken."""
SPEC = tiny_spec("addr", axes={"mode": ["eager"], "batch_size": [1, 2], "seq_len": [16]},
                 resources={"device": "cpu", "max_concurrent_trials": 1})
_NODE_ID = "import ray; ray.init(log_to_driver=False, logging_level='ERROR'); " \
           "print(ray.get_runtime_context().get_node_id())"


@dataclass
class Head:
    gcs: str
    dashboard: str
    client: str  # ray://HOST:PORT of its Ray Client server
    env: dict[str, str]  # RAY_ADDRESS and this cluster's token
    node_id: str
    temp_dir: Path

    def client_server_logs(self) -> str:
        """The tail of each Ray Client server's error log on the head (what a failed attach left)."""
        logs = sorted(self.temp_dir.glob("session_*/logs/ray_client_server*.*"))
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}" for p in logs)


@contextmanager
def started_head(**extra_env: str) -> Iterator[Head]:
    """A real `ray start --head` with its dashboard and Ray Client server; `extra_env` is added to
    the head's environment."""
    temp_dir = Path(tempfile.mkdtemp(prefix="sweeper-ad-"))  # short: Ray's Unix sockets live under it
    # the head's Ray Client proxy waits this long for a client's own server to answer (Ray's default, 30 s,
    # is reached on a loaded 2-core machine); a server that died is found after as long, then tried again
    env = {**ray_cluster_env(), "RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S": "90", **extra_env}
    gcs, dashboard = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    client = f"ray://127.0.0.1:{free_port()}"
    cmd = [sys.executable, "-c", "from ray.scripts.scripts import main; main()", "start", "--head", "--block",
           f"--port={gcs.rsplit(':', 1)[1]}", "--include-dashboard=true", "--dashboard-host=127.0.0.1",
           f"--dashboard-port={dashboard.rsplit(':', 1)[1]}", f"--dashboard-agent-listen-port={free_port()}",
           "--num-cpus=2", "--num-gpus=0", f"--temp-dir={temp_dir}", f"--object-store-memory={100 * 2**20}",
           "--disable-usage-stats", f"--ray-client-server-port={client.rsplit(':', 1)[1]}"]
    log = open(temp_dir / "head.log", "w")  # noqa: SIM115 - the head writes to it for the whole test
    started = [subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                cwd=temp_dir)]
    try:
        deadline = time.monotonic() + HANG_S
        while "Ray runtime started" not in (temp_dir / "head.log").read_text():
            if started[0].poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"ray start failed:\n{(temp_dir / 'head.log').read_text()[-3000:]}")
            time.sleep(0.3)
        env = {**env, "RAY_ADDRESS": gcs}
        out = subprocess.run([sys.executable, "-c", _NODE_ID], env=env, capture_output=True, text=True, timeout=HANG_S)
        assert out.returncode == 0, out.stderr[-3000:]
        yield Head(gcs, f"http://{dashboard}", client, env, out.stdout.split()[-1], temp_dir)
    finally:
        stop_ray_nodes(started)
        log.close()
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def head() -> Iterator[Head]:
    with started_head() as h:
        yield h


def _sweep_cmd(work: Path, *flags: str) -> list[str]:
    spec = write_spec(work, SPEC)
    return [sys.executable, "-m", "sweeper", "run", str(spec), "--results", str(work / "out"), "--no-report", *flags]


def _sweep(env: dict[str, str], work: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(_sweep_cmd(work, *flags), env=env, cwd=work, capture_output=True, text=True,
                          timeout=SWEEP_TIMEOUT_S)


def _node_ids(work: Path) -> set[str]:
    df = pd.read_parquet(work / "out" / "results.parquet")
    assert len(df) == 2 and (df.status == "ok").all(), df[["status", "error"]]
    return set(df.node_id)


@pytest.mark.slow
def test_ray_job_submit_runs_the_sweep_on_the_cluster(head, tmp_path):
    spec = write_spec(tmp_path, SPEC)
    ray_cli = [sys.executable, "-c", "from ray.scripts.scripts import main; main()"]
    cmd = [*ray_cli, "job", "submit", "--address", head.dashboard, "--", sys.executable, "-m", "sweeper", "run",
           str(spec), "--results", str(tmp_path / "out"), "--no-report"]
    env = {k: v for k, v in head.env.items() if k != "RAY_ADDRESS"}  # the job's own driver gets it from Ray
    out = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=SWEEP_TIMEOUT_S)
    assert out.returncode == 0 and "succeeded" in out.stdout, (out.stdout[-3000:], out.stderr[-3000:])
    assert _node_ids(tmp_path) == {head.node_id}


@pytest.fixture(scope="module")
def refused(tmp_path_factory) -> dict[str, tuple[str, Path, subprocess.CompletedProcess]]:
    """`sweeper run` given an address with nothing behind it, by --address and by RAY_ADDRESS: both
    started at once, as each waits out address.PROBE_S. Where -> (address, work dir, the command)."""
    started = {}
    for where in ("--address", "RAY_ADDRESS"):
        work, address = tmp_path_factory.mktemp("refused"), f"127.0.0.1:{free_port()}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        flags = ["--address", address] if where == "--address" else []
        if where == "RAY_ADDRESS":
            env["RAY_ADDRESS"] = address
        cmd = _sweep_cmd(work, *flags)
        with open(work / "stdout", "w") as out, open(work / "stderr", "w") as err:
            started[where] = (address, work, cmd, subprocess.Popen(cmd, env=env, cwd=work, stdout=out, stderr=err))
    done = {}
    try:
        for where, (address, work, cmd, proc) in started.items():
            proc.wait(timeout=SWEEP_TIMEOUT_S)
            done[where] = (address, work, subprocess.CompletedProcess(
                cmd, proc.returncode, (work / "stdout").read_text(), (work / "stderr").read_text()))
    finally:
        for *_, proc in started.values():
            if proc.poll() is None:  # a hang: the wait above failed
                proc.kill()
                proc.wait()
    return done


@pytest.mark.slow
@pytest.mark.parametrize("where", ["--address", "RAY_ADDRESS"])
def test_an_address_with_no_cluster_fails_in_one_line(refused, where):
    """Refused within address.PROBE_S of the first refused connection; how long the command takes
    on top of that (interpreter, imports) depends on the machine's load, so no clock decides it."""
    address, work, out = refused[where]
    assert out.returncode == 2, out.stderr[-3000:]
    assert out.stderr.strip().splitlines() == [f"sweeper: error: no Ray cluster at {address} (Connection refused); "
                                               "start one with `ray start --head`, or leave out --address for a "
                                               "local Ray"]
    assert not list((work / "out").iterdir())  # checked writable before Ray, nothing written


def _ours(trial_ids: list[str]) -> list[psutil.Process]:
    """Live processes measuring one of these trials (their command line names the trial's work dir)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        line = " ".join(p.info["cmdline"] or [])
        if "sweeper.measure" in line and any(f"sweeper-{t}-" in line for t in trial_ids):
            found.append(p)
    return found


def _rows(results_dir: Path) -> int:
    """Rows on disk so far (the compacted file and the part files)."""
    from sweeper.results.store import read_results

    try:
        return len(read_results([results_dir]))
    except ValueError:  # nothing written yet
        return 0


@pytest.mark.slow
@pytest.mark.parametrize("where", ["local", "cluster"])
def test_sigterm_mid_sweep_keeps_the_rows_and_leaves_no_process(head, tmp_path, where):
    """With RAY_ADDRESS naming the head, no --address runs the trials on that cluster and `--address
    local` on a private Ray; SIGTERM mid-sweep then ends the driver, keeps the rows written and
    leaves no process behind."""
    from sweeper.spec.sweep_spec import parse_spec
    from sweeper.spec.trials import expand

    # New interpreters, whose command lines name their trials (a forked measuring process keeps its
    # fork server's); that a measuring process dies with its worker and its fork server: test_forkserver.py.
    spec = tiny_spec("term", axes={"mode": ["eager"], "batch_size": [1, 2, 3, 4, 5, 6], "seq_len": [16]},
                     measure={"min_window_s": 0.6}, resources={"device": "cpu", "max_concurrent_trials": 1,
                                                              "process_start": "subprocess"})
    ids = [t.trial_id for t in expand(parse_spec(spec))[0]]
    cmd = [sys.executable, "-m", "sweeper", "run", str(write_spec(tmp_path, spec)), "--results",
           str(tmp_path / "out"), "--no-report", *(["--address", "local"] if where == "local" else [])]
    driver = subprocess.Popen(cmd, env=head.env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True)
    results, deadline = tmp_path / "out" / "results.parquet", time.monotonic() + SWEEP_TIMEOUT_S
    while not (_rows(tmp_path / "out") and _ours(ids)):  # one row written and the next trial measuring
        assert driver.poll() is None and time.monotonic() < deadline, driver.communicate()
        time.sleep(0.2)
    tree = psutil.Process(driver.pid).children(recursive=True)
    driver.send_signal(signal.SIGTERM)
    _, err = driver.communicate(timeout=HANG_S)
    assert driver.returncode == 130, err[-3000:]
    assert "sweeper: interrupted; " in err and " trials are saved in " in err
    resume = f"python -m sweeper run {tmp_path / 'spec.yaml'} --results {tmp_path / 'out'} --resume"
    assert f"to finish the sweep: {resume}" in err
    _, alive = psutil.wait_procs([*tree, *_ours(ids)], timeout=HANG_S)
    assert not alive, [(p.pid, p.name()) for p in alive]
    df = pd.read_parquet(results)
    assert len(df) >= 1 and (df.status == "ok").all() and set(df.trial_id) <= set(ids)
    if where == "cluster":  # no --address: the cluster RAY_ADDRESS names
        assert set(df.node_id) == {head.node_id}
    else:  # --address local: a private Ray even with RAY_ADDRESS set
        assert head.node_id not in set(df.node_id)


def test_the_connect_limit_is_read_from_the_environment(monkeypatch):
    from sweeper.run import address
    from sweeper.run.state import SweepError

    monkeypatch.delenv(address.CONNECT_ENV, raising=False)
    assert address.connect_limit_s() == address.CONNECT_S
    monkeypatch.setenv(address.CONNECT_ENV, "300")
    assert address.connect_limit_s() == 300.0
    for bad in ("soon", "0", "-5", "nan"):
        monkeypatch.setenv(address.CONNECT_ENV, bad)
        with pytest.raises(SweepError, match=f"^{address.CONNECT_ENV}='{bad}': not a positive number of seconds$"):
            address.connect_limit_s()


@pytest.mark.slow
def test_a_cluster_that_never_answers_ends_the_command_in_one_line_naming_the_setting(tmp_path):
    """Something accepts TCP connections at the address but never speaks Ray: the connect limit
    (here set short through the environment) ends the command with exit 2 and one line."""
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
                   SWEEPER_RAY_CONNECT_S="3")
        out = _sweep(env, tmp_path, "--address", address)
    assert out.returncode == 2, out.stderr[-3000:]
    lines = [line for line in out.stderr.splitlines() if "sweeper: error:" in line]
    assert len(lines) == 1 and lines[0].endswith(
        f"sweeper: error: Ray at {address} did not answer within 3 s (a busy machine or a far cluster may need "
        "longer: set SWEEPER_RAY_CONNECT_S=SECONDS)"), out.stderr[-3000:]


def test_a_client_server_that_died_starting_is_tried_again_and_nothing_else_is():
    """Ray Client's own failure text when the head's per-client server process died starting up
    (seen on a loaded head) is retried; any other connect error is not."""
    from sweeper.run import address

    calls: list[int] = []

    def flaky() -> None:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionAbortedError("Initialization failure from server:\nTraceback ... RuntimeError: "
                                         "Starting Ray client server failed. See ray_client_server_23000.err")

    address.attach(flaky, "ray://127.0.0.1:10001")
    assert len(calls) == 3
    calls.clear()
    with pytest.raises(ConnectionAbortedError):
        address.attach(flaky, "127.0.0.1:6379")  # not Ray Client: its first error stands
    assert len(calls) == 1

    def backend() -> None:
        calls.append(1)
        if len(calls) < 2:
            raise ConnectionAbortedError("Initialization failure from server:\nTraceback ... RuntimeError: "
                                         "Proxy failed to Connect to backend! Check `ray_client_server.err`")

    calls.clear()
    address.attach(backend, "ray://127.0.0.1:10001")
    assert len(calls) == 2

    def gone_while_starting() -> None:  # the text a loaded head sent (the shim exited under the proxy)
        calls.append(1)
        if len(calls) < 2:
            raise ConnectionAbortedError(
                "Initialization failure from server:\nTraceback (most recent call last):\n"
                '  File ".../ray/util/client/server/proxier.py", line 765, in Datapath\n'
                "    if not self.proxy_manager.start_specific_server(\n"
                '  File ".../ray/util/client/server/proxier.py", line 396, in start_specific_server\n'
                "    cmd = psutil_proc.cmdline()\npsutil.NoSuchProcess: process no longer exists (pid=4242)")

    calls.clear()
    address.attach(gone_while_starting, "ray://127.0.0.1:10001")
    assert len(calls) == 2

    def refused() -> None:
        raise ConnectionError("ray client connection timeout")

    with pytest.raises(ConnectionError, match="timeout"):
        address.attach(refused, "ray://127.0.0.1:10001")


def test_an_attach_error_is_one_line_with_the_exception_a_traceback_ends_with():
    from sweeper.run import address

    text = ("Initialization failure from server:\nTraceback (most recent call last):\n"
            + '  File "x.py", line 1, in f\n    g()\n' * 40 + "psutil.NoSuchProcess: process no longer exists")
    summary = address.error_summary(text)
    assert summary == "Initialization failure from server: ... psutil.NoSuchProcess: process no longer exists"
    assert address.error_summary("ray client   connection\ttimeout") == "ray client connection timeout"
    assert len(address.error_summary("x" * 1000)) == 400


DIE_ONCE = """import os, pathlib
if b"specific-server" in pathlib.Path("/proc/self/cmdline").read_bytes():
    try:
        os.close(os.open(os.environ["SWEEPER_TEST_DIE_ONCE"], os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        pass
    else:
        os._exit(3)  # the first per-client server dies as it starts
"""


@pytest.mark.slow
def test_a_ray_client_address_brings_the_rows_back_through_a_client_server_that_died_starting(tmp_path):
    """A sweep given the head's ray:// address, with fault injection on the real head: the first
    server its Ray Client proxy starts for a client exits as it starts, as one did on a loaded 2-core
    machine. The proxy reports it ("Proxy failed
    to Connect to backend") once its channel check gives up (20 s here); the sweep tries again
    within its connect limit, finishes, and its rows come back from the head's node."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(DIE_ONCE)
    marker = tmp_path / "died"
    path = os.pathsep.join([str(site), ray_cluster_env()["PYTHONPATH"]])
    # the proxy finds the server dead after this many seconds (the sweep's connect limit is 120 s)
    with started_head(PYTHONPATH=path, SWEEPER_TEST_DIE_ONCE=str(marker),
                      RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S="20") as h:
        env = {k: v for k, v in h.env.items() if k != "RAY_ADDRESS"}
        out = _sweep(env, tmp_path, "--address", h.client)
        logs = h.client_server_logs()
    assert marker.exists(), logs  # the fault was injected
    assert out.returncode == 0, f"{out.stderr[-6000:]}\n{logs}"
    assert "could not start a client server (a busy head); trying again" in out.stderr
    assert "[2/2] ok" in out.stderr, out.stderr[-3000:]
    assert _node_ids(tmp_path) == {h.node_id}  # the rows came back through the client
