"""The worker's side of the fork server (measure/forkserver.py): start it once, ask it for children.

A Ray worker runs its trials one after another (Tune reuses it), so it keeps one fork server,
started with the first trial that asks for one and restarted if it died or if a trial needs
another import path. `ForkServer.run` starts one measuring process there and waits for it with a
time limit, as `subprocess.Popen(...).wait(timeout)` would; the caller kills the child's process
group on a timeout, exactly as for a plain subprocess. The server dies with the worker.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sweeper.measure.forkserver import NEEDS_CUDA_ENV

log = logging.getLogger(__name__)
START_TIMEOUT_S = 300.0
"""How long the server may take to import torch and friends (minutes on a loaded small host)."""


class ForkServerDied(RuntimeError):
    """The fork server ended while starting or serving a child."""


class ForkServerUnusable(RuntimeError):
    """The fork server started but cannot fork measuring processes (it says why): start them as new
    interpreters instead."""


def die_with_parent() -> None:
    """Linux, in a new process before it runs anything: be killed when the thread that started it
    ends (PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class ForkServer:
    """One running `python -m sweeper.measure.forkserver`."""

    def __init__(self, env: dict[str, str]):
        self.env, self._buffer = env, b""
        # PR_SET_PDEATHSIG fires when the *thread* that started a process ends, and Tune runs each
        # trial in a thread of its own: the server is started from a thread that lives as long as
        # the worker, so it outlives the trial that started it and dies with the worker.
        self.proc = _LAUNCHER.submit(subprocess.Popen, [sys.executable, "-m", "sweeper.measure.forkserver"],
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, start_new_session=True,
                                     preexec_fn=die_with_parent, bufsize=0).result()
        message = self._read(START_TIMEOUT_S)
        if message is None:
            self.close()
            raise ForkServerDied(f"the fork server did not start within {START_TIMEOUT_S:g} s")
        if not message.get("ready"):
            self.close()
            raise ForkServerUnusable(message.get("error", "the fork server is not usable"))
        self.preload_s = float(message["preload_s"])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _read(self, timeout_s: float | None) -> dict[str, Any] | None:
        """The server's next message; None when `timeout_s` passed first. Unbuffered, so that a
        message already read from the pipe is never left waiting behind a select."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                self.close()
                raise ForkServerDied(f"the fork server ended (exit code {self.proc.returncode})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def start(self, argv: list[str], env: dict[str, str], stderr: Path, cpus: list[int] | None) -> int:
        """Fork a measuring process running `python -m sweeper.measure ARGV`; returns its pid."""
        request = {"argv": argv, "env": env, "stderr": str(stderr), "cpus": cpus, "cwd": os.getcwd()}
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
        except BrokenPipeError:
            self.close()
            raise ForkServerDied(f"the fork server ended (exit code {self.proc.returncode})") from None
        message = self._read(START_TIMEOUT_S)
        if message is None:
            self.close()
            raise ForkServerDied(f"the fork server did not fork within {START_TIMEOUT_S:g} s")
        return int(message["pid"])

    def wait(self, timeout_s: float | None) -> int | None:
        """The child's return code (negative: killed by that signal), or None on timeout."""
        message = self._read(timeout_s)
        return None if message is None else int(message["returncode"])

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


_LAUNCHER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sweeper-forkserver-launcher")
_servers: dict[tuple[str, ...], ForkServer] = {}
_unusable: dict[tuple[str, ...], str] = {}
"""Import paths whose fork server said it cannot fork (asked once per worker)."""
_lock = threading.Lock()


def server_for(env: dict[str, str]) -> ForkServer:
    """This worker's fork server for measuring processes with this import path (started if needed).
    The server's environment is the child's minus what differs per trial; children get their own."""
    key = (env.get("PYTHONPATH", ""), env.get(NEEDS_CUDA_ENV, ""))
    with _lock:
        if key in _unusable:
            raise ForkServerUnusable(_unusable[key])
        server = _servers.get(key)
        if server is None or not server.alive():
            t0 = time.monotonic()
            try:
                server = _servers[key] = ForkServer(env)
            except ForkServerUnusable as e:
                _unusable[key] = str(e)
                log.warning("measuring processes start as new interpreters: %s", e)
                raise
            log.info("fork server started in %.1f s (imports %.1f s)", time.monotonic() - t0, server.preload_s)
        return server
