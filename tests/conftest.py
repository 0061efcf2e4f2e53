"""Shared fixtures: one local Ray per test session, and a helper that runs a real sweep;
`pytest --cpu-hogs cores` runs the suite with every core kept busy beside it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# Inductor trusts /proc/cpuinfo for the CPU's vector ISA instead of proving it by compiling and loading
# a test program per ISA (AVX512-VNNI, AVX512, AVX2): ~5 s of g++ in every process with a fresh cache
# dir (each cold compile, Mega-Cache warm start, AOTI build, exported first call), the same answer each
# time on one machine. The kernels are compiled for real as before; children inherit it (Ray workers,
# fork servers, measuring processes, `ray start` nodes the tests start).
os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "1")
# The host's fork servers started for this session (run/forkserver_client.py) wait five minutes for
# their next caller instead of one (a file may run no sweep for minutes), carry this session's mark
# in their environment (a server of their own: none of the user's is reused or stopped) and are
# stopped when the session ends.
os.environ.setdefault("SWEEPER_FORKSERVER_IDLE_S", "300")
os.environ.setdefault("SWEEPER_TEST_SESSION", str(os.getpid()))
CPU_HOG = "while True: pass  # sweeper-test-cpu-hog"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-hogs", default="0", metavar="N",
                     help="run the tests under load: N processes (or 'cores': one per CPU) spin at 100%% CPU, "
                          "at normal priority, for the whole session")


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the hogs belong to the controller alone
        config._cpu_hogs = []  # type: ignore[attr-defined]
        return
    value = config.getoption("--cpu-hogs")
    count = (os.cpu_count() or 1) if value == "cores" else int(value)
    config._cpu_hogs = [subprocess.Popen([sys.executable, "-c", CPU_HOG], start_new_session=True)  # type: ignore[attr-defined]
                        for _ in range(count)]


MAX_WORKERS = 4
"""`-n auto` (the default, pyproject's addopts) runs one worker per CPU and one more, at most this
many. A worker spends much of its time waiting (on its sweeps' processes, Ray's starts, a hang's
timeout), and the extra one fills those waits; each worker also starts its own local Ray, whose
background work grows with their number. On 2 idle cores the whole suite took 724 s with 3 workers,
820 s with 2 and 920 s with 4."""


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    return max(1, min(len(os.sched_getaffinity(0)) + 1, MAX_WORKERS))


SLOWEST_FIRST = (
    "tests/run/test_address.py", "tests/e2e/test_export_e2e.py", "tests/e2e/test_mixed_cluster.py",
    "tests/measure/test_measure_process.py", "tests/zoo/test_docs_models.py", "tests/e2e/test_faults.py",
    "tests/e2e/test_e2e.py", "tests/measure/test_forkserver.py", "tests/measure/test_aoti.py",
    "tests/zoo/test_any_model.py", "tests/cli/test_cli_surprises.py", "tests/run/test_full_disk.py",
    "tests/benchmarks/test_train_step_check.py", "tests/run/test_resume.py", "tests/e2e/test_multinode.py",
    "tests/run/test_tune_records.py", "tests/run/test_durable_rows.py", "tests/measure/test_generate.py",
    "tests/measure/test_gpu_lock.py", "tests/run/test_slow_reruns.py",
)
"""The test files that take longest (seconds on a 2-core machine, most first), run first: a worker
that finishes one takes the next file, so the short files even out the end instead of one worker
running a long file alone at the end. Files not named run after these, in collection order; a stale
list costs wall time only. (pyproject's --no-loadscope-reorder keeps this order: xdist would otherwise
order files by their number of tests.)"""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(SLOWEST_FIRST)}
    # a stable sort: each file's tests keep their order (and stay together for its module fixtures)
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(SLOWEST_FIRST)))


def pytest_report_header(config: pytest.Config) -> str | None:
    hogs = getattr(config, "_cpu_hogs", [])
    return f"under load: {len(hogs)} CPU hogs (pids {', '.join(str(p.pid) for p in hogs)})" if hogs else None


def pytest_unconfigure(config: pytest.Config) -> None:
    for hog in getattr(config, "_cpu_hogs", []):  # by their own ids: nothing else is touched
        hog.send_signal(signal.SIGKILL)
        hog.wait()
    if not hasattr(config, "workerinput"):
        _stop_session_fork_servers()


def _stop_session_fork_servers() -> None:
    """The fork servers this session's tests started (by the mark in their environment)."""
    import psutil

    mark, servers = os.environ["SWEEPER_TEST_SESSION"], []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if "sweeper.measure.forkserver" in (proc.info["cmdline"] or []) \
                    and proc.environ().get("SWEEPER_TEST_SESSION") == mark:
                proc.terminate()  # the server removes its socket and exits
                servers.append(proc)
        except psutil.Error:
            continue
    for proc in psutil.wait_procs(servers, timeout=10)[1]:
        proc.kill()


@pytest.fixture(scope="session")
def ray_local():
    """A real private local Ray, started once (about 5 s on 2 cores) and shared by every test:
    never a `ray start` cluster that happens to run on this machine."""
    from sweeper.run import ray_tune as runner

    runner.connect("local")
    yield
    import ray

    ray.shutdown()


@pytest.fixture
def no_ray(monkeypatch):
    """Any attempt to start or join Ray fails the test (the runner module is replaced)."""
    import types

    import sweeper.run

    def refuse(*args, **kwargs):
        raise AssertionError("Ray was started")

    fake = types.ModuleType("sweeper.run.ray_tune")
    fake.connect = fake.run_sweep = fake.resolve_device = refuse
    fake.check_options = lambda storage, callbacks: None  # checks flags, starts nothing
    monkeypatch.setitem(sys.modules, "sweeper.run.ray_tune", fake)
    # `from sweeper.run import ray_tune` reads the package attribute first, when an earlier test imported it
    monkeypatch.setattr(sweeper.run, "ray_tune", fake, raising=False)
    return fake


@pytest.fixture
def run_chromium(tmp_path):
    """Run headless Chromium, offline and in its own profile: `run_chromium(*args)`. Skips when
    Chromium is missing, except in CI (CI=true), where a missing Chromium fails the test."""
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None and Path("/usr/bin/chromium").exists():
        found = "/usr/bin/chromium"
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("Chromium is required in CI for the report browser tests")
        pytest.skip("Chromium not installed")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [found, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={tmp_path / 'profile'}", "--proxy-server=127.0.0.1:9",  # no network at all
               "--enable-logging=stderr", "--v=0", "--virtual-time-budget=30000", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    return run
