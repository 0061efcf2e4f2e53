"""The worker's side of the fork server (measure/forkserver.py): find the host's server for a
measuring process's environment, start it if there is none, and have it fork the process.

Servers are found by a Unix socket named after their environment (the measuring process's, less
what differs per trial or per worker), in a directory of this user's: every worker of the host
whose trials share that environment, in this sweep or the next, uses the same server, and the
first to need it starts it (under a lock, so concurrent trials start one). A server retires after
IDLE_ENV seconds without a caller. `fork` returns a `Child`, whose `wait` is what
`subprocess.Popen(...).wait(timeout)` would be; the caller kills the child's process group on a
timeout, exactly as for a plain subprocess. Closing a `Child` before its end kills it: a worker that
dies takes its measuring process with it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import select
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sweeper.measure import SPAWN_TIME_ENV, WORKER_PID_ENV

log = logging.getLogger(__name__)
START_TIMEOUT_S = 300.0
"""How long the server may take to import torch and friends (minutes on a loaded small host)."""
IDLE_ENV = "SWEEPER_FORKSERVER_IDLE_S"
"""Seconds a server waits for its next caller before it exits (default 60)."""
PER_TRIAL_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_COMPILE_THREADS", "OMP_NUM_THREADS",
                 "TORCH_TRACE", SPAWN_TIME_ENV, WORKER_PID_ENV)
"""What differs between a trial's measuring processes: left out of the fork server's own environment."""
PER_WORKER_ENV = ("CUDA_VISIBLE_DEVICES",)
PER_WORKER_PREFIXES = ("RAY_", "TUNE_")
"""What differs between workers of one host (their GPU, their Ray job and node, Tune's trial):
left out of the server's environment, so that they share it. A child gets all of it back, and
reads CUDA_VISIBLE_DEVICES when it initializes CUDA, which the server never does."""


class ForkServerDied(RuntimeError):
    """The fork server ended while starting or serving a child."""


class ForkServerUnusable(RuntimeError):
    """The fork server started but cannot fork measuring processes (it says why): start them as new
    interpreters instead."""


def server_env(env: dict[str, str]) -> dict[str, str]:
    """The environment a server for children with `env` runs in (what its key is made of)."""
    return {k: v for k, v in env.items()
            if k not in PER_TRIAL_ENV and k not in PER_WORKER_ENV and not k.startswith(PER_WORKER_PREFIXES)}


def socket_path(env: dict[str, str]) -> Path:
    """Where the server for this server environment listens (one per interpreter and environment)."""
    key = hashlib.sha256(json.dumps([sys.executable, sorted(env.items())]).encode()).hexdigest()[:20]
    base = Path(tempfile.gettempdir())
    if len(str(base)) > 60:  # a Unix socket's path holds at most 107 bytes
        base = Path("/tmp")
    folder = base / f"sweeper-forkservers-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder / f"{key}.sock"


class _Lines:
    """JSON lines from a socket or a pipe, one at a time, with a time limit."""

    def __init__(self, source: Any):
        self.source, self._buffer = source, b""

    def next(self, timeout_s: float | None) -> dict[str, Any] | None:
        """The next message ({} when the other end closed first; None when `timeout_s` passed)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not select.select([self.source], [], [], left)[0]:
                return None
            try:
                chunk = os.read(self.source.fileno(), 65536)
            except OSError:
                chunk = b""
            if not chunk:
                return {}
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)


class Child:
    """One measuring process forked by a server, and the connection its end comes back on."""

    def __init__(self, lines: _Lines, pid: int):
        self.lines, self.pid = lines, pid

    def wait(self, timeout_s: float | None) -> int | None:
        """The child's return code (negative: killed by that signal), or None on timeout."""
        message = self.lines.next(timeout_s)
        if message is None:
            return None
        if not message:
            raise ForkServerDied(f"the fork server ended while measuring process {self.pid} ran")
        return int(message["returncode"])

    def close(self) -> None:
        self.lines.source.close()

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_unusable: dict[Path, tuple[str, str]] = {}
"""Servers that said they cannot fork (socket -> (PYTHONPATH, why)), asked once per worker."""


def fork(argv: list[str], env: dict[str, str], stderr: Path, cpus: list[int] | None) -> Child:
    """Fork a measuring process running `python -m sweeper.measure ARGV` with the environment `env`
    from the host's server for it (`server_env`)."""
    request = json.dumps({"argv": argv, "env": env, "stderr": str(stderr), "cpus": cpus, "cwd": os.getcwd()}) + "\n"
    env = server_env(env)
    path = socket_path(env)
    if path in _unusable:
        raise ForkServerUnusable(_unusable[path][1])
    for attempt in (1, 2):
        conn = _connect(path) or _start(path, env)
        with contextlib.suppress(OSError):
            conn.sendall(request.encode())
        lines = _Lines(conn)
        message = lines.next(START_TIMEOUT_S)
        if message:
            return Child(lines, int(message["pid"]))
        conn.close()
        if message is None:
            raise ForkServerDied(f"the fork server did not fork within {START_TIMEOUT_S:g} s")
        if attempt == 2:  # the first hang-up may be a server retiring as it was called
            raise ForkServerDied("the fork server ended before it forked the measuring process")
    raise AssertionError("unreachable")


def _connect(path: Path) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
        return conn
    except OSError:
        conn.close()
        return None


def _start(path: Path, env: dict[str, str]) -> socket.socket:
    """Start the server for `env` (or find that another caller just did), and connect to it."""
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one start per socket on this host; the others wait, then connect
        conn = _connect(path)
        if conn is not None:
            return conn
        t0 = time.monotonic()
        idle_s = os.environ.get(IDLE_ENV, "60")
        with open(path.with_suffix(".log"), "w") as err:  # the server's own errors, should it die
            proc = subprocess.Popen([sys.executable, "-m", "sweeper.measure.forkserver", str(path), idle_s],
                                    env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                    start_new_session=True)
        message = _Lines(proc.stdout).next(START_TIMEOUT_S)
        proc.stdout.close()
        proc.wait()  # the starter leaves at once; the server goes on in its child
        if message is None:
            raise ForkServerDied(f"the fork server did not start within {START_TIMEOUT_S:g} s")
        if not message:
            raise ForkServerDied(f"the fork server ended while starting (exit code {proc.returncode})")
        if not message.get("ready"):
            why = message.get("error", "the fork server is not usable")
            _unusable[path] = (env.get("PYTHONPATH", ""), why)
            log.warning("measuring processes start as new interpreters: %s", why)
            raise ForkServerUnusable(why)
        log.info("fork server %s started in %.1f s (imports %.1f s)", message["pid"], time.monotonic() - t0,
                 message["preload_s"])
        conn = _connect(path)
        if conn is None:
            raise ForkServerDied("the fork server started but does not answer")
        return conn

