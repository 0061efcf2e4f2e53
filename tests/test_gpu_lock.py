"""Several trials on one GPU: the per-GPU lock that their warm-ups and timed windows take turns
under, held across real processes, and the spec and Ray resources that turn it on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from sweeper.measure import gpu_lock
from sweeper.measure import process as measure
from sweeper.spec.schema import SpecError, parse_spec
from sweeper.spec.trials import expand

from conftest import tiny_spec


def _holder(lock_dir, key: str, seconds: float) -> subprocess.Popen:
    """Another process (a neighbour trial) holding the GPU's lock for `seconds`; returns once it holds it."""
    code = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from sweeper.measure.gpu_lock import GpuLock
        with GpuLock({key!r}, Path({str(lock_dir)!r})).held():
            print("held", flush=True)
            time.sleep({seconds})
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.fixture
def shared(tmp_path):
    yield tmp_path
    gpu_lock.use(None)  # later tests in this process get a GPU of their own again


def test_timed_work_waits_while_a_neighbour_holds_the_gpu(shared):
    lock = gpu_lock.use("GPU-test", shared)
    neighbour = _holder(shared, "GPU-test", 1.0)
    with gpu_lock.timed():
        with gpu_lock.timed():  # re-entrant: a warm-up inside a timed block takes nothing more
            pass
    neighbour.wait()
    assert lock.waited_s >= 0.7 and lock.held_s >= 0.0
    assert lock.as_row()["gpu_lock_wait_s"] == lock.waited_s


def test_only_an_autotuning_compile_takes_the_lock(shared):
    gpu_lock.use("GPU-test", shared)
    neighbour = _holder(shared, "GPU-test", 1.5)
    t0 = time.monotonic()
    with gpu_lock.compiling("default"), gpu_lock.compiling("reduce-overhead"):
        assert time.monotonic() - t0 < 0.5  # compiles on the CPU while the neighbour times
    entered = threading.Event()

    def autotune() -> None:
        with gpu_lock.compiling("max-autotune"):
            entered.set()

    thread = threading.Thread(target=autotune)
    thread.start()
    assert not entered.wait(0.5)  # benchmarks kernels on the GPU: waits for the neighbour
    neighbour.wait()
    thread.join(5)
    assert entered.is_set()


def test_a_dead_holders_lock_is_free_at_once(shared):
    neighbour = _holder(shared, "GPU-test", 60)
    os.kill(neighbour.pid, signal.SIGKILL)
    neighbour.wait()
    lock = gpu_lock.use("GPU-test", shared)
    with gpu_lock.timed():
        pass
    assert lock.waited_s < 1.0


def test_a_gpu_of_its_own_waits_for_nothing_and_says_so(shared):
    neighbour = _holder(shared, "GPU-test", 2.0)
    lock = gpu_lock.use(None, shared)
    t0 = time.monotonic()
    with gpu_lock.timed(), gpu_lock.compiling("max-autotune"):
        pass
    assert time.monotonic() - t0 < 0.5
    assert lock.as_row() == {"gpu_lock_wait_s": None, "gpu_lock_held_s": None}
    neighbour.kill()
    neighbour.wait()


def test_a_sharing_trials_row_records_its_wait_and_drops_the_devices_memory_figure(shared, tmp_path, monkeypatch):
    """A measuring process that shares its GPU waits for its neighbour before its eager windows.
    (No CUDA here: the CPU stands in for the GPU, under the name a shared GPU's lock would have;
    on CUDA the device's figure of memory in use is dropped, since it counts the neighbour's.)"""
    monkeypatch.setattr(gpu_lock, "LOCK_DIR", shared)
    monkeypatch.setattr(gpu_lock, "key_for", lambda device, n: "GPU-test" if n > 1 else None)
    eager = next(t for t in expand(parse_spec(tiny_spec(axes={"mode": ["eager"]})))[0])
    neighbour = _holder(shared, "GPU-test", 6.0)  # longer than building the tiny model takes
    row = measure.run({"trial": eager.to_dict(), "device": "cpu", "trials_per_gpu": 2}, tmp_path / "row.json")
    neighbour.wait()
    assert row["status"] == "ok", row["error"]
    assert row["trials_per_gpu"] == 2 and row["gpu_lock_wait_s"] >= 1.0 and row["gpu_lock_held_s"] > 0
    alone = measure.run({"trial": eager.to_dict(), "device": "cpu"}, tmp_path / "alone.json")
    assert alone["trials_per_gpu"] == 1 and alone["gpu_lock_wait_s"] is None


@pytest.mark.parametrize("resources, message", [
    ({"device": "cpu", "trials_per_gpu": 2}, "contradicts device 'cpu'"),
    ({"device": "cuda", "gpus_per_trial": 0.5, "trials_per_gpu": 2}, "needs gpus_per_trial 1"),
    ({"device": "cuda", "trials_per_gpu": 5}, "less than or equal to 4"),
])
def test_spec_refuses_sharing_that_cannot_work(resources, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(tiny_spec(resources=resources))


def test_sharing_is_part_of_the_sweeps_identity_only_when_set():
    plain = parse_spec(tiny_spec(resources={"device": "cuda"}))
    assert "trials_per_gpu" not in plain.identity()["resources"]  # sweeps started before it still resume
    shared = parse_spec(tiny_spec(resources={"device": "cuda", "trials_per_gpu": 2}))
    assert shared.spec_hash() != plain.spec_hash()
    assert plain.resources.gpu_share == 1.0 and shared.resources.gpu_share == 0.5  # what a trial asks Ray for
