"""The `--address` checks made before Ray's own connect: Ray Client's extra for a ray://
address, and something listening at HOST:PORT (a head still starting gets PROBE_S); and how long
Ray's own connect may take (`connect_limit_s`)."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from sweeper.run.state import SweepError

log = logging.getLogger(__name__)
PROBE_S = 10.0
"""How long an address may refuse connections (a head still starting) before the sweep gives up."""
CONNECT_ENV = "SWEEPER_RAY_CONNECT_S"
CONNECT_S = 120.0
"""Ray's own connect to a cluster that accepts connections must finish within this, else the
command ends with one line naming the address and CONNECT_ENV, which sets the limit. Measured by
benchmarks/ray_connect.py on a 2-core VM (benchmarks/results/cpu/ray_connect/): a Ray Client
connect took 1.9-3.8 s idle and 2.5-4.4 s with a CPU-burning process per core, a GCS connect
under 1.3 s; the test suite on that machine, with a sweep and an install beside it, saw one exceed
25 s. The default leaves room for a far more loaded machine or a distant head."""

CLIENT_RETRIES = 3
"""A Ray Client head starts a server process per client; on a loaded head that process can die
starting up: the attach is tried again this many times, within the connect limit."""
CLIENT_SERVER_DIED = ("Starting Ray client server failed", "Proxy failed to Connect to backend",
                      "in start_specific_server")
"""Ray Client's texts for a per-client server that died before it answered (found dead at once, not
answering within the head's RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S, or gone while the proxy was
still starting it: its traceback then ends inside the proxy's `start_specific_server`)."""


def attach(init: Callable[[], None], target: str | None) -> None:
    """`init()` (ray.init), tried again when a Ray Client head failed to start this client's server;
    the connect limit's watchdog bounds all attempts together."""
    for attempt in range(CLIENT_RETRIES + 1):
        try:
            init()
            return
        except ConnectionError as e:
            transient = (target or "").startswith("ray://") and any(t in str(e) for t in CLIENT_SERVER_DIED)
            if not transient or attempt == CLIENT_RETRIES:
                raise
            log.warning("sweeper: Ray at %s could not start a client server (a busy head); trying again", target)


def connect_limit_s() -> float:
    """The connect limit in seconds: CONNECT_ENV if set (a positive number), else CONNECT_S."""
    value = os.environ.get(CONNECT_ENV)
    if value is None:
        return CONNECT_S
    try:
        limit = float(value)
    except ValueError:
        limit = 0.0
    if not limit > 0:
        raise SweepError(f"{CONNECT_ENV}={value!r}: not a positive number of seconds")
    return limit


def check_client(target: str | None) -> None:
    """A ray:// address needs Ray Client, which needs the ray[client] extra (grpcio)."""
    if target and target.startswith("ray://"):
        try:
            import grpc  # noqa: F401
        except ImportError:
            raise SweepError(f"--address {target} needs Ray Client: pip install \"ray[client]\" (or run the sweep "
                             "on the cluster: ray job submit -- sweeper run SPEC)") from None


def probe(address: str) -> None:
    """Raise SweepError unless something accepts TCP connections at the address's host and port."""
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    try:
        host, port = parts.hostname, parts.port or 10001
    except ValueError:
        host, port = None, None
    if not host:
        raise SweepError(f"--address {address}: not HOST:PORT, ray://HOST:PORT, auto or local")
    deadline = time.monotonic() + PROBE_S
    while True:
        try:
            socket.create_connection((host, port), timeout=2.0).close()
            return
        except OSError as e:
            if time.monotonic() > deadline:
                raise SweepError(f"no Ray cluster at {address} ({e.strerror or e}); start one with "
                                 "`ray start --head`, or leave out --address for a local Ray") from None
            time.sleep(0.5)


def error_summary(text: str, limit: int = 400) -> str:
    """An error's text on one line: a traceback (Ray Client sends the head's) as its first line and its
    last (the exception), whitespace collapsed, at most `limit` characters."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    summary = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
    summary = " ".join(summary.split())
    return summary if len(summary) <= limit else summary[:limit - 3] + "..."
