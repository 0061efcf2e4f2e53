"""Rows on disk while a sweep runs: one part file per row, readable at every moment, compacted at
the end and on resume; a driver killed with SIGKILL in the middle of its writes loses no row it
had reported; a results directory has one live owner, and a dead owner's lock blocks nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sweeper.results.store import PARTS_DIR, RESULTS_FILE, compact, part_files, read_results
from sweeper.run.owner import LOCK_FILE, DirectoryInUse, claim
from sweeper.run.state import SweepError, SweepState
from sweeper.spec.sweep_spec import load_spec
from sweeper.spec.trials import expand
from tests.helpers import IMPORT_PATH, REPO, tiny_spec, write_spec

WRITER = """
import sys
from pathlib import Path
from sweeper.run.state import SweepState
from sweeper.spec.sweep_spec import load_spec
from sweeper.spec.trials import expand

spec = load_spec(sys.argv[1])
state = SweepState.open(spec, Path(sys.argv[2]), resume=True)
state.claim()
state.save_manifest()
for trial in state.pending(expand(spec)[0]):
    state.add(trial, {"status": "ok", "throughput_items_s": float(trial.batch_size)})
    print(trial.trial_id, flush=True)  # reported: from here on this row must survive anything
"""


def _spec(tmp: Path, n_trials: int) -> Path:
    return write_spec(tmp, tiny_spec("durable", axes={"mode": ["eager"], "batch_size": list(range(1, n_trials + 1))}))


def _kill_writer_after(spec: Path, out: Path, n_lines: int) -> list[str]:
    """Start a driver that records rows as fast as it can; SIGKILL it once it reported `n_lines`."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(spec), str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reported = []
    while len(reported) < n_lines:
        line = proc.stdout.readline()
        assert line, f"the writer ended early: {proc.stderr.read()[-2000:]}"
        reported.append(line.strip())
    proc.send_signal(signal.SIGKILL)  # it is writing the next row (or about to)
    proc.wait()
    return reported


def test_kill_9_mid_write_loses_no_reported_row_and_resume_compacts(tmp_path):
    spec, out = _spec(tmp_path, 400), tmp_path / "out"
    reported: list[str] = []
    for n in (7, 23, 41):  # three drivers in turn, each killed while writing
        reported += _kill_writer_after(spec, out, n)
        on_disk = read_results([out])  # the directory, as `sweeper report` reads it
        assert set(reported) <= set(on_disk.trial_id)
        assert on_disk.trial_id.is_unique
        assert not (out / RESULTS_FILE).exists() or n > 7  # the first driver never compacted
    state = SweepState.open(load_spec(spec), out, resume=True)
    state.claim()  # resuming compacts what the killed drivers left
    assert part_files(out) == [] and not (out / PARTS_DIR).exists()
    compacted = read_results([out / RESULTS_FILE])
    assert set(reported) <= set(compacted.trial_id) and compacted.trial_id.is_unique
    assert len(compacted) == len(state.rows)
    state.close()
    assert not (out / LOCK_FILE).exists()


def test_readers_see_parts_beside_the_compacted_file(tmp_path):
    spec = load_spec(_spec(tmp_path, 6))
    trials = expand(spec)[0]
    state = SweepState.open(spec, tmp_path / "out", resume=False)
    state.claim()
    for t in trials[:3]:
        state.add(t, {"status": "ok"})
    state.close()  # three rows compacted
    state = SweepState.open(spec, tmp_path / "out", resume=True)
    state.claim()
    state.add(trials[0], {"status": "oom", "error": "rerun"})  # a rerun's part overrides its compacted row
    for t in trials[3:5]:
        state.add(t, {"status": "ok"})
    for path in (tmp_path / "out", tmp_path / "out" / RESULTS_FILE):  # the directory or the file
        df = read_results([path]).set_index("trial_id")
        assert len(df) == 5 and df.loc[trials[0].trial_id, "status"] == "oom"
    state.close()
    assert len(read_results([tmp_path / "out" / RESULTS_FILE])) == 5 and part_files(tmp_path / "out") == []


def test_parts_are_arrow_files_and_parquet_parts_of_an_older_driver_still_count(tmp_path):
    """Parts are Arrow IPC files with the Parquet file's schema; a directory an older driver left
    mid-sweep holds Parquet parts, which readers and the resume's compaction take as well."""
    import pyarrow as pa

    from sweeper.results.store import SCHEMA, write_rows

    spec = load_spec(_spec(tmp_path, 4))
    trials, out = expand(spec)[0], tmp_path / "out"
    state = SweepState.open(spec, out, resume=False)
    state.claim()
    state.add(trials[0], {"status": "ok", "throughput_items_s": 5.0})
    [part] = part_files(out)
    assert part.suffix == ".arrow" and pa.ipc.open_file(part).read_all().schema == SCHEMA
    older = state.add(trials[1], {"status": "ok", "throughput_items_s": 6.0})
    newest = part_files(out)[-1]
    write_rows(newest.with_suffix(".parquet"), [older])  # as the older driver wrote it
    newest.unlink()
    state.ownership.release()  # the driver ends here without closing: nothing compacted
    assert [p.suffix for p in part_files(out)] == [".arrow", ".parquet"]
    assert read_results([out]).set_index("trial_id").throughput_items_s.to_dict() == {
        trials[0].trial_id: 5.0, trials[1].trial_id: 6.0}
    resumed = SweepState.open(spec, out, resume=True)
    resumed.claim()  # compacts both kinds
    assert part_files(out) == [] and len(resumed.rows) == 2
    resumed.add(trials[2], {"status": "ok"})
    resumed.close()
    assert len(read_results([out / RESULTS_FILE])) == 3


HOLDER = """
import sys, time
from pathlib import Path
from sweeper.run.owner import claim
claim(Path(sys.argv[1]), "holder-sweep")
print("held", flush=True)
time.sleep(600)
"""


def test_a_live_owner_refuses_a_dead_one_does_not(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(DirectoryInUse) as refused:
            claim(out, "second")
        text = str(refused.value)
        assert f"pid {holder.pid}" in text and f"host {os.uname().nodename}" in text and "holder-sweep" in text
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert json.loads((out / LOCK_FILE).read_text())["pid"] == holder.pid  # the dead owner's lock file is left
    mine = claim(out, "second")  # and blocks nothing
    assert json.loads((out / LOCK_FILE).read_text())["pid"] == os.getpid()
    mine.release()
    assert not (out / LOCK_FILE).exists()


def test_second_state_on_a_claimed_directory_is_a_one_line_sweep_error(tmp_path):
    spec = load_spec(_spec(tmp_path, 2))
    first = SweepState.open(spec, tmp_path / "out", resume=False)
    first.claim()
    for resume in (False, True):  # refused as in use, before any other check of what it holds
        with pytest.raises(SweepError, match=rf"in use by sweep {first.sweep_id} \(host .*, pid {os.getpid()}, since "):
            SweepState.open(spec, tmp_path / "out", resume=resume)
    second = SweepState._read(spec, tmp_path / "out", resume=False)  # one that read it just before the claim
    with pytest.raises(SweepError, match=rf"in use by sweep {first.sweep_id}"):
        second.claim()
    first.close()


@pytest.mark.slow
def test_two_real_drivers_on_one_directory(tmp_path):
    """As a new user would: two `sweeper run SPEC --results DIR` a few seconds apart. The second is
    refused in one line naming the first (before its Ray starts); no row of the first is lost. The
    first sweep's trials after its first wait for a gate file the test creates at the end, so the
    first driver is still running when the second starts, however fast the machine."""
    gate = tmp_path / "gate"
    kwargs = {"tickets_dir": str(tmp_path / "tickets"), "gate": str(gate)}
    spec = write_spec(tmp_path, tiny_spec("two", models=[{"name": "ok", "factory": "faulty_models:make_gated",
                                                         "kwargs": kwargs, "input": {"kind": "tensor", "shape": [8]}}],
                                          axes={"mode": ["eager"], "batch_size": [1, 2, 3, 4, 5, 6]},
                                          resources={"max_concurrent_trials": 1}))
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(IMPORT_PATH)}
    env.pop("RAY_ADDRESS", None)
    cmd = [sys.executable, "-m", "sweeper", "run", str(spec), "--results", str(out), "--no-report", "--address",
           "local"]
    with open(tmp_path / "first.log", "w") as log:
        first = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 600  # catches a hang only
        while not (out / LOCK_FILE).exists() or not (out / LOCK_FILE).read_text():
            assert first.poll() is None and time.monotonic() < deadline, (tmp_path / "first.log").read_text()
            time.sleep(0.1)
        time.sleep(3)  # a few seconds apart
        for extra in ([], ["--resume"]):
            second = subprocess.run(cmd + extra, env=env, capture_output=True, text=True, cwd=tmp_path, timeout=600)
            assert second.returncode == 2, second.stderr
            assert second.stderr.count("\n") == 1 and second.stderr.startswith("sweeper: error: "), second.stderr
            assert f"pid {first.pid}" in second.stderr and f"host {os.uname().nodename}" in second.stderr
            assert "Ray" not in second.stderr + second.stdout  # refused before Ray
        assert first.poll() is None, "the first sweep ended before the second was refused"
        gate.touch()
        assert first.wait(timeout=600) == 0, (tmp_path / "first.log").read_text()[-3000:]
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    rows = read_results([out / RESULTS_FILE])
    manifest = json.loads((out / "sweep.json").read_text())
    assert len(rows) == 6 and set(rows.sweep_id) == {manifest["sweep_id"]} and (rows.status == "ok").all()
    assert not (out / LOCK_FILE).exists() and part_files(out) == []


def test_a_reader_racing_compactions_always_sees_every_row(tmp_path):
    """`sweeper report` on a directory while its owner writes parts and compacts them: every read
    holds every row recorded before it started, never a vanished part's error."""
    spec = load_spec(_spec(tmp_path, 150))
    trials = expand(spec)[0]
    state = SweepState.open(spec, tmp_path / "out", resume=False)
    state.claim()
    state.save_manifest()
    stop, problems = threading.Event(), []

    def read_all() -> None:
        while not stop.is_set():
            before = len(state.by_trial)  # rows recorded before this read starts
            try:
                n = len(read_results([tmp_path / "out"]))
            except Exception as e:
                problems.append(repr(e))
                return
            if n < before:
                problems.append(f"read {n} rows, {before} were recorded")

    reader = threading.Thread(target=read_all)
    for i, t in enumerate(trials):
        state.add(t, {"status": "ok"})
        if i == 0:
            reader.start()  # from the first row on, a read never fails
        if i % 3 == 2:
            compact(state.dir, state.rows)  # what claim() and close() do
    stop.set()
    reader.join()
    state.close()
    assert problems == []
    assert len(read_results([tmp_path / "out"])) == len(trials)
