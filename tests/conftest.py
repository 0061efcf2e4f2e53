"""Shared fixtures: one local Ray per test session, and a helper that runs a real sweep."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # test-only model factories (faulty_models.py, ...)
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


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

    import sweeper

    def refuse(*args, **kwargs):
        raise AssertionError("Ray was started")

    fake = types.ModuleType("sweeper.run.ray_tune")
    fake.connect = fake.run_sweep = fake.resolve_device = refuse
    monkeypatch.setitem(sys.modules, "sweeper.run.ray_tune", fake)
    monkeypatch.setattr(sweeper, "runner", fake, raising=False)


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
