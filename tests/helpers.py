"""Helpers the tests share: the repository root, a tiny spec, a spec file, the CLI in this process."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import psutil
import yaml

REPO = Path(__file__).resolve().parent.parent


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
        "measure": {"backend": "aot_eager", "warmup_iters": 1, "min_window_iters": 2,
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
