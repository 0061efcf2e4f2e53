"""The `--address` checks made before Ray's own connect: Ray Client's extra for a ray://
address, and something listening at HOST:PORT (a head still starting gets PROBE_S)."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

from sweeper.run.state import SweepError

PROBE_S = 10.0
"""How long an address may refuse connections (a head still starting) before the sweep gives up."""


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
