"""How long Ray's own connect takes to a running cluster, idle and with every core busy: the
measurement behind run.address's default connect limit (SWEEPER_RAY_CONNECT_S).

Starts a private `ray start --head` (own temp dir, ports and auth token, with its Ray Client
server), then times, in a fresh interpreter each time, `ray.init(ADDRESS)` for the GCS address
and for ray://HOST:PORT (Ray Client), first on the idle machine and then with one CPU-burning
process per core beside it. Prints JSON: seconds per connect, per address kind and load.

    python -m benchmarks.ray_connect --repeats 3 --out ray_connect.json
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

_CONNECT = ("import sys, time, ray; t0 = time.monotonic(); ray.init(address=sys.argv[1], log_to_driver=False, "
            "logging_level='ERROR'); print(time.monotonic() - t0)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _head(temp_dir: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str, str]:
    gcs, client = _free_port(), _free_port()
    cmd = [sys.executable, "-c", "from ray.scripts.scripts import main; main()", "start", "--head", "--block",
           f"--port={gcs}", "--include-dashboard=false", "--num-cpus=2", "--num-gpus=0", f"--temp-dir={temp_dir}",
           f"--object-store-memory={100 * 2**20}", "--disable-usage-stats", f"--ray-client-server-port={client}"]
    log = temp_dir / "head.log"
    proc = subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    while "Ray runtime started" not in log.read_text():
        if proc.poll() is not None:
            raise SystemExit(f"ray start failed:\n{log.read_text()[-3000:]}")
        time.sleep(0.3)
    return proc, f"127.0.0.1:{gcs}", f"ray://127.0.0.1:{client}"


def _connect_s(address: str, env: dict[str, str]) -> float:
    out = subprocess.run([sys.executable, "-c", _CONNECT, address], env=env, capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"connect to {address} failed:\n{out.stderr[-3000:]}")
    return float(out.stdout.split()[-1])


def measure(repeats: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    temp_dir = Path(tempfile.mkdtemp(prefix="sweeper-rc-"))
    head, gcs, client = _head(temp_dir, env)
    found: dict[str, Any] = {"cpus": os.cpu_count(), "repeats": repeats}
    try:
        for load in ("idle", "loaded"):
            hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    for _ in range(os.cpu_count() or 1)] if load == "loaded" else []
            try:
                for kind, address in (("gcs", gcs), ("client", client)):
                    found[f"{kind}_{load}_s"] = [round(_connect_s(address, env), 2) for _ in range(repeats)]
            finally:
                for hog in hogs:
                    hog.kill()
                    hog.wait()
    finally:
        spawned = psutil.Process(head.pid).children(recursive=True)  # Ray's processes: own groups, ours to end
        head.terminate()
        head.wait(timeout=60)
        _, alive = psutil.wait_procs(spawned, timeout=10)
        for p in alive:
            p.kill()
        shutil.rmtree(temp_dir, ignore_errors=True)
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    text = json.dumps(measure(args.repeats), indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
