"""Several trials on one GPU: the per-GPU lock a sharing measuring process holds for everything
but its compiles (shared for untimed GPU work, alone for timed windows), across real processes, and
the spec and Ray resources that turn it on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from sweeper.measure import gpu_lock, matching, neighbours, witness
from sweeper.measure import process as measure
from sweeper.spec.sweep_spec import SpecError, parse_spec
from sweeper.spec.trials import expand
from tests.helpers import tiny_spec


class _Neighbour:
    """Another process (a neighbour trial) that takes the GPU's lock and holds it for `seconds`,
    or, with `seconds` None, until the test calls `release` (the test decides, not the clock):
    alone (a neighbour timing its windows), or with `shared` as for its untimed GPU work."""

    def __init__(self, lock_dir, key: str, seconds: float | None, shared: bool = False):
        hold = f"time.sleep({seconds})" if seconds is not None else "sys.stdin.readline()"
        code = textwrap.dedent(f"""
            import sys, time
            from pathlib import Path
            from sweeper.measure.gpu_lock import GpuLock
            lock = GpuLock({key!r}, Path({str(lock_dir)!r}))
            lock.acquire(exclusive={not shared})
            print("held", flush=True)
            {hold}
        """)
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stdin=subprocess.PIPE,
                                     text=True)
        self._held = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        if self.proc.stdout.readline().strip() == "held":
            self._held.set()

    def holds_within(self, seconds: float) -> bool:
        return self._held.wait(seconds)

    def release_after(self, seconds: float) -> None:
        """Let go of the lock `seconds` from now (a neighbour started with `seconds` None)."""
        def release() -> None:
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()
        threading.Timer(seconds, release).start()

    def wait(self) -> None:
        self.proc.wait()


STARTS_WITHIN_S = 300
"""How long a neighbour process may take to start and take a free lock: catches a hang only."""


def _holder(lock_dir, key: str, seconds: float | None, wait: bool = True, shared: bool = False) -> _Neighbour:
    """A neighbour holding the lock; returns once it holds it (with `wait`), else at once."""
    neighbour = _Neighbour(lock_dir, key, seconds, shared)
    if wait:
        assert neighbour.holds_within(STARTS_WITHIN_S)
    return neighbour


@pytest.fixture
def lock_dir(tmp_path):
    yield tmp_path
    gpu_lock.hold(None)  # later tests in this process get a GPU of their own again


def test_a_sharing_process_waits_for_the_gpu_then_holds_it(lock_dir):
    neighbour = _holder(lock_dir, "GPU-test", None)
    neighbour.release_after(1.0)  # the next line starts waiting at once: it waits about 1 s
    lock = gpu_lock.hold("GPU-test", lock_dir)
    neighbour.wait()
    assert lock.holding and lock.waited_s >= 0.7
    other = _holder(lock_dir, "GPU-test", 0.0, wait=False)
    assert not other.holds_within(0.5)  # held: a neighbour's timing waits
    lock.release()
    assert other.holds_within(STARTS_WITHIN_S)
    other.wait()
    assert lock.as_row()["gpu_lock_wait_s"] == lock.waited_s and lock.held_s >= 0.5
    assert lock.as_row()["gpu_lock_exclusive_s"] == 0.0  # it timed nothing


def test_untimed_gpu_work_shares_the_gpu_and_timed_windows_have_it_alone(lock_dir):
    neighbour = _holder(lock_dir, "GPU-test", None, shared=True)  # a neighbour's model build, say
    lock = gpu_lock.hold("GPU-test", lock_dir)  # this process's own untimed work: beside it at once
    assert lock.holding
    neighbour.release_after(1.0)
    with gpu_lock.timing():  # waits about 1 s, until the neighbour's untimed work is done
        neighbour.wait()
        assert lock.waited_s >= 0.7
        other = _holder(lock_dir, "GPU-test", 0.0, wait=False, shared=True)
        assert not other.holds_within(0.5)  # inside the windows: not even untimed work comes in
    assert other.holds_within(STARTS_WITHIN_S)  # back to shared: the neighbour's work comes in beside it
    other.wait()
    assert lock.holding and lock.exclusive_s >= 0.5 and lock.as_row()["gpu_lock_exclusive_s"] == lock.exclusive_s
    lock.release()
    alone = _holder(lock_dir, "GPU-test", None)  # a neighbour timing its windows
    waiting = gpu_lock.GpuLock("GPU-test", lock_dir)
    alone.release_after(1.0)
    with waiting.timing():  # not holding before: takes the GPU alone, then lets it go
        assert waiting.holding and waiting.waited_s >= 0.7
    alone.wait()
    assert not waiting.holding and waiting.exclusive_s > 0


def test_a_timed_block_inside_another_keeps_the_gpu_alone_until_the_outer_one_ends(lock_dir):
    lock = gpu_lock.hold("GPU-test", lock_dir)
    with gpu_lock.timing():
        with gpu_lock.timing():
            pass
        other = _holder(lock_dir, "GPU-test", 0.0, wait=False, shared=True)
        assert not other.holds_within(0.5)  # still alone: the inner block did not hand it back
    assert other.holds_within(STARTS_WITHIN_S)
    other.wait()
    assert lock.holding
    lock.release()


def test_the_gpu_is_free_while_compiling_unless_the_compile_autotunes(lock_dir):
    lock = gpu_lock.hold("GPU-test", lock_dir)
    with gpu_lock.released_while_compiling("default"):
        neighbour = _holder(lock_dir, "GPU-test", None, wait=False)
        assert neighbour.holds_within(STARTS_WITHIN_S)  # it times on the GPU while this process compiles
        neighbour.release_after(1.0)  # leaving the block takes the lock again at once: waits about 1 s
    neighbour.wait()
    assert lock.holding and lock.waited_s >= 0.7  # after the compile, waited for the neighbour
    with gpu_lock.released_while_compiling("max-autotune"):  # benchmarks kernels on the GPU: keeps it
        other = _holder(lock_dir, "GPU-test", 0.0, wait=False)
        assert not other.holds_within(0.5)
    lock.release()
    assert other.holds_within(STARTS_WITHIN_S)
    other.wait()


def test_a_process_whose_gpu_work_ended_with_its_compile_leaves_the_gpu_to_its_neighbours(lock_dir):
    """A warm compile's process times nothing after its first call: it does not wait for the GPU again."""
    for mode in ("default", "max-autotune"):
        lock = gpu_lock.hold("GPU-test", lock_dir)
        with gpu_lock.released_while_compiling(mode, again=False):
            pass
        assert not lock.holding
        neighbour = _holder(lock_dir, "GPU-test", 0.0, wait=False)  # a neighbour timing: at once
        assert neighbour.holds_within(STARTS_WITHIN_S)
        neighbour.wait()


def test_waiting_for_the_hosts_fast_state_lends_the_gpu_to_neighbours_untimed_work(lock_dir, monkeypatch, tmp_path):
    """Between timed windows the host-speed gate waits holding the GPU shared: a neighbour's build or
    warm-up runs meanwhile; the windows after it have the GPU alone again, and the lent seconds do not
    count as held alone."""
    monkeypatch.setattr(witness, "HOST_FILE", tmp_path / "fast_ms")
    monkeypatch.setattr(neighbours, "MARKER_DIR", tmp_path / "compiling")  # the suite's other compiles unseen
    lock = gpu_lock.hold("GPU-test", lock_dir)
    neighbour = _Neighbour(lock_dir, "GPU-test", 0.5, shared=True)  # its untimed work: 0.5 s once it has the GPU
    monkeypatch.setattr(witness, "probe_ms", lambda: 1.0 if neighbour._held.is_set() else 1.6)  # slow until then
    gate = matching.HostGate(wait_s=STARTS_WITHIN_S, ref_ms=1.0)
    t0 = time.monotonic()
    with gpu_lock.timing():
        assert gate() == 1.0 and gate.waited_s > 0  # the neighbour came in during the wait
        other = _holder(lock_dir, "GPU-test", 0.0, wait=False, shared=True)
        assert not other.holds_within(0.5)  # alone again for the windows
    timing_s = time.monotonic() - t0
    assert other.holds_within(STARTS_WITHIN_S)
    other.wait()
    neighbour.wait()
    assert lock.exclusive_s <= timing_s - 0.5  # lent at least the neighbour's 0.5 s: not counted as alone
    lock.release()
    own = gpu_lock.hold(None, lock_dir)  # a GPU of its own: the gate lends nothing, judges its own readings
    with gpu_lock.timing(), gpu_lock.shared_meanwhile() as lent:
        assert not lent and not own.holding


def test_on_a_shared_gpu_the_gate_waits_for_a_neighbours_compile_to_end(lock_dir, monkeypatch, tmp_path):
    """A neighbour compiling on the host's other cores slows a launch-bound step: a trial sharing its
    GPU waits for the compile to end (lending the GPU meanwhile); one with a GPU of its own does not."""
    markers = tmp_path / "compiling"
    monkeypatch.setattr(witness, "HOST_FILE", tmp_path / "fast_ms")
    monkeypatch.setattr(neighbours, "MARKER_DIR", markers)
    monkeypatch.setattr(witness, "probe_ms", lambda: 1.0)  # the host reads fast throughout
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from sweeper.measure.neighbours import compile_marker
        with compile_marker(Path({str(markers)!r})):
            print("compiling", flush=True)
            sys.stdin.readline()
    """)
    compiling = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
    assert compiling.stdout.readline().strip() == "compiling"
    own = gpu_lock.hold(None, lock_dir)
    with gpu_lock.timing():
        alone = matching.HostGate(wait_s=STARTS_WITHIN_S, ref_ms=1.0)
        assert alone() == 1.0 and alone.waited_s == 0.0  # a GPU of its own: the compile is not waited for
    own.release()
    gpu_lock.hold("GPU-test", lock_dir)
    threading.Timer(1.0, lambda: compiling.communicate("done\n")).start()  # the compile ends in about 1 s
    with gpu_lock.timing():
        gate = matching.HostGate(wait_s=STARTS_WITHIN_S, ref_ms=1.0)
        assert gate() == 1.0 and gate.waited_s >= 0.7
    assert compiling.wait() == 0 and neighbours.neighbours_compiling() == 0


def test_a_dead_holders_lock_is_free_at_once(lock_dir):
    neighbour = _holder(lock_dir, "GPU-test", 60)
    os.kill(neighbour.proc.pid, signal.SIGKILL)
    neighbour.wait()
    lock = gpu_lock.hold("GPU-test", lock_dir)
    assert lock.holding and lock.waited_s < 30  # free at once, not when the dead holder's 60 s would end


def test_a_gpu_of_its_own_waits_for_nothing_and_says_so(lock_dir):
    neighbour = _holder(lock_dir, "GPU-test", 30.0)
    lock = gpu_lock.hold(None, lock_dir)
    with gpu_lock.released_while_compiling("default"), gpu_lock.released_while_compiling("max-autotune"):
        pass
    with gpu_lock.timing():  # the neighbour holds its GPU lock alone, and this process does not care
        pass
    assert not lock.holding and lock.as_row() == {"gpu_lock_wait_s": None, "gpu_lock_held_s": None,
                                                  "gpu_lock_exclusive_s": None}
    neighbour.proc.kill()
    neighbour.wait()


def test_a_sharing_trials_row_records_its_wait(lock_dir, tmp_path, monkeypatch):
    """A measuring process that shares its GPU waits for its neighbour before it builds its model.
    (No CUDA here: the CPU stands in for the GPU, under the name a shared GPU's lock would have;
    on CUDA the device's figure of memory in use is dropped, since it counts the neighbour's.)"""
    monkeypatch.setattr(gpu_lock, "LOCK_DIR", lock_dir)
    monkeypatch.setattr(gpu_lock, "key_for", lambda device, n: "GPU-test" if n > 1 else None)
    monkeypatch.setattr(neighbours, "MARKER_DIR", tmp_path / "compiling")  # the suite's other compiles unseen
    eager = next(t for t in expand(parse_spec(tiny_spec(axes={"mode": ["eager"]})))[0])
    neighbour = _holder(lock_dir, "GPU-test", None)
    neighbour.release_after(1.5)  # the measuring below asks for the lock well within 0.5 s of this
    row = measure.run({"trial": eager.to_dict(), "device": "cpu", "trials_per_gpu": 2}, tmp_path / "row.json")
    neighbour.wait()
    assert row["status"] == "ok", row["error"]
    assert row["trials_per_gpu"] == 2 and row["gpu_lock_wait_s"] >= 0.5 and row["gpu_lock_held_s"] > 0
    assert 0 < row["gpu_lock_exclusive_s"] < row["gpu_lock_held_s"]  # its windows alone, its build shared
    assert not gpu_lock.current().holding  # let go when the row is written
    assert json.loads(row["windows_json"])["busy_pairs"] == []  # watched for compiling neighbours: none
    alone = measure.run({"trial": eager.to_dict(), "device": "cpu"}, tmp_path / "alone.json")
    assert alone["trials_per_gpu"] == 1 and alone["gpu_lock_wait_s"] is None
    assert "busy_pairs" not in json.loads(alone["windows_json"])  # a GPU of its own: neighbours only counted


@pytest.mark.parametrize(("resources", "message"), [
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


@pytest.mark.slow
def test_ray_runs_two_trials_on_each_gpu_and_never_three(tmp_path):
    """The real runner on a private Ray that declares two GPUs (this machine has none): with
    `trials_per_gpu: 2` each trial asks for half a GPU and half that GPU's CPU share, so four run at
    once, two on each GPU, each told its GPU (CUDA_VISIBLE_DEVICES) and that it shares it."""
    import json

    import pandas as pd

    from tests.helpers import REPO

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "tests.factories.shared_gpu_probe", str(tmp_path / "out")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    facts = [json.loads(n) for n in pd.read_parquet(tmp_path / "out" / "results.parquet")["notes"]]
    assert len(facts) == 8
    assert all(len(f["gpu_ids"]) == 1 and f["cuda_visible"] == f["gpu_ids"][0] for f in facts)
    assert {f["trials_per_gpu"] for f in facts} == {2} and {f["pin_cpus"] for f in facts} == {2}  # 8 CPUs / 2 GPUs / 2

    def most_at_once(runs: list[dict]) -> int:
        return max(sum(r["start"] <= f["start"] < r["end"] for r in runs) for f in runs)

    assert most_at_once(facts) == 4
    for gpu in ("0", "1"):
        assert most_at_once([f for f in facts if f["gpu_ids"] == [gpu]]) == 2
