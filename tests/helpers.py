"""Helpers the tests share: the repository root, a tiny spec, a spec file, the CLI in this process."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
FACTORIES = REPO / "tests" / "factories"
"""The test-only model factories a spec names (`faulty_models:make_ok`)."""
IMPORT_PATH = (str(REPO), str(FACTORIES))
"""Where a measuring process or a driver started outside pytest finds the project and the factories."""


def write_spec(tmp_path: Path, spec: dict[str, Any], name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def tiny_spec(name: str = "t", **overrides: Any) -> dict[str, Any]:
    """A fast spec: tiny models, eager + aot_eager plumbing unless overridden."""
    spec: dict[str, Any] = {
        "name": name,
        "models": [{"name": "bert-tiny"}],
        "axes": {"mode": ["eager", "default"], "dynamic": [False], "batch_size": [2], "seq_len": [16]},
        "measure": {"backend": "aot_eager", "warmup_iters": 1, "windows": 5, "min_window_iters": 2,
                    "min_window_s": 0.01, "trial_timeout_s": 300, "warm_compile": False},
        "resources": {"device": "cpu", "max_concurrent_trials": 2},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(spec.get(key), dict):
            spec[key] = {**spec[key], **value}
        else:
            spec[key] = value
    return spec


def run_cli(args: list[str]) -> int:
    """Run `sweeper ...` in this process (so it shares the session's Ray)."""
    from sweeper.cli.app import main

    return main(args)


def _descendants(procs: list[subprocess.Popen]) -> list[psutil.Process]:
    found = []
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            found += psutil.Process(proc.pid).children(recursive=True)
    return found


def stop_ray_nodes(started: list[subprocess.Popen]) -> None:
    """SIGTERM each `ray start --block` (workers first), then SIGKILL whatever they started
    that is still alive: Ray workers run in process groups of their own."""
    spawned = _descendants(started)
    for proc in reversed(started):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in reversed(started):
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    _, alive = psutil.wait_procs(spawned, timeout=10)
    for p in alive:
        p.kill()
    psutil.wait_procs(alive, timeout=10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_cluster_env() -> dict[str, str]:
    """This environment without any pointer to another Ray, plus a token of this cluster's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    return env


def wait_for(what: str, done: Callable[[], bool], proc: subprocess.Popen, log: Path,
              timeout_s: float = 600) -> None:
    """Until `done()`; the timeout only catches a hang (generous: a loaded 2-core machine is slow)."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert proc.poll() is None, f"the sweep ended before {what}:\n{log.read_text()[-3000:]}"
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} after {timeout_s} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


def rows_on_disk(results_dir: Path) -> int:
    """Rows the sweep's directory holds so far (part files and the compacted file)."""
    from sweeper.results.schema import ResultsError
    from sweeper.results.store import read_results

    with contextlib.suppress(ResultsError, FileNotFoundError):
        return len(read_results([results_dir]))
    return 0


def stream_spec(**overrides) -> dict:
    """A tiny spec with one token stream `w` (uniform lengths 8-40, 6 batches) at batch size 2;
    `overrides` merge into its sections."""
    spec = tiny_spec(workloads={"w": {"lengths": {"kind": "uniform", "min_len": 8, "max_len": 40},
                                      "num_batches": 6, "seed": 1, "steady_passes": 2}})
    spec["axes"] = {**spec["axes"], "batch_size": [2]}
    for key, value in overrides.items():
        spec[key] = {**spec.get(key, {}), **value} if isinstance(value, dict) else value
    return spec


AS_FROM_A_TERMINAL = ("import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
                      "runpy.run_module('sweeper', run_name='__main__', alter_sys=True)")
"""`python -m sweeper` with Ctrl-C at Python's default, as a terminal starts it: a test suite run as a
shell's background job (`pytest ... &`) ignores SIGINT, and its children inherit that."""


def start_sweep(spec: Path, out: Path, env: dict[str, str], log: Path, cwd: Path) -> subprocess.Popen:
    """`sweeper run SPEC --results OUT --no-report` in a session of its own (a signal can reach its whole
    group), as from a terminal (`AS_FROM_A_TERMINAL`), its stderr in `log`."""
    with open(log, "w") as sink:
        return subprocess.Popen([sys.executable, "-c", AS_FROM_A_TERMINAL, "run", str(spec), "--results", str(out),
                                 "--no-report"], env=env, stdout=subprocess.DEVNULL, stderr=sink, cwd=cwd,
                                start_new_session=True)


STATIC_LIBSTDCXX = """#!/bin/sh
# g++ that links libstdc++ into every shared object it links, as some hosts' compilers are set up to
for a in "$@"; do [ "$a" = "-shared" ] && exec {gxx} "$@" -static-libstdc++; done
exec {gxx} "$@"
"""


def static_gxx(folder) -> str:
    """A g++ (by that name, in `folder`) that links libstdc++ into shared objects."""
    folder.mkdir(exist_ok=True)
    gxx = folder / "g++"
    gxx.write_text(STATIC_LIBSTDCXX.format(gxx=os.path.realpath(shutil.which("g++"))))
    gxx.chmod(0o755)
    return str(gxx)
