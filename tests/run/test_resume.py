"""Interrupted sweeps lose nothing: a driver killed with SIGKILL is resumed without rerunning
or duplicating a finished trial; a changed spec, a corrupt results file or manifest is
explained in one line and left untouched; every row is on disk before the next is taken."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml

from sweeper.results.store import MANIFEST_FILE, PARTS_DIR, RESULTS_FILE, part_files, read_results
from sweeper.run.rescue import ResultsUnwritable
from sweeper.run.state import SweepState
from sweeper.spec.sweep_spec import load_spec
from sweeper.spec.trials import expand
from tests.helpers import IMPORT_PATH, run_cli, tiny_spec, write_spec

FIRST_ROW_TIMEOUT_S = 600
"""Catches a hang only: a loaded 2-core machine is slow, not broken."""


def _ok_model(**kwargs) -> dict:
    return {"name": "ok", "factory": "faulty_models:make_ok", "kwargs": kwargs,
            "input": {"kind": "tensor", "shape": [8]}}


def _spec(tmp: Path, name: str = "resume", batch_sizes=(1, 2, 3, 4), window_s: float = 0.01,
          model: dict | None = None) -> Path:
    return write_spec(tmp, tiny_spec(name, models=[model or _ok_model()],
                                     axes={"mode": ["eager"], "batch_size": list(batch_sizes)},
                                     measure={"min_window_s": window_s}, resources={"max_concurrent_trials": 1}))


def _state_with_rows(tmp: Path, statuses: dict[int, str]) -> tuple[Path, Path, SweepState]:
    """A sweep directory as a driver leaves it, with one row per batch size in `statuses`."""
    spec_path = _spec(tmp)
    spec = load_spec(spec_path)
    state = SweepState.open(spec, tmp / "out", resume=False)
    trials = {t.batch_size: t for t in expand(spec)[0]}
    for bs, status in statuses.items():
        state.add(trials[bs], {"status": status, "error": None if status == "ok" else "boom",
                               "finished_at": "2026-01-01T00:00:00+00:00"})
    state.close()  # compacted into results.parquet, as a driver leaves it
    return spec_path, tmp / "out", state


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("sweeper: error: ") and err.count("\n") == 1, err
    return err


# ---- the driver killed mid-sweep, then resumed -------------------------------------------

def _marked(marker: str) -> list[psutil.Process]:
    """Processes started by the killed driver: they inherited its marker variable."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get("SWEEPER_TEST_RUN") == marker:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def _kill_leftovers(marker: str) -> None:
    """Ray's reaper takes most of the killed driver's processes down; a worker that was still
    starting can be orphaned, and one more can appear while the raylet dies: kill until quiet."""
    psutil.wait_procs(_marked(marker), timeout=10)
    deadline, quiet = time.monotonic() + 60, 0
    while quiet < 3 and time.monotonic() < deadline:
        left = _marked(marker)
        quiet = 0 if left else quiet + 1
        for proc in left:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        time.sleep(0.5)


def _wait_for_first_row(proc: subprocess.Popen, results: Path, log: Path) -> None:
    deadline = time.monotonic() + FIRST_ROW_TIMEOUT_S
    while time.monotonic() < deadline:
        if part_files(results.parent) or results.exists():  # a row on disk (a part file until compaction)
            return
        if proc.poll() is not None:
            pytest.fail(f"the sweep ended before it could be killed:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    pytest.fail(f"no row after {FIRST_ROW_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


@pytest.mark.slow
def test_driver_killed_then_resumed(ray_local, tmp_path):
    """kill -9 after the first row, while the second trial is measuring: it waits at a gate file
    the test creates only after the kill, so the kill always lands mid-sweep."""
    gate, tickets = tmp_path / "gate", tmp_path / "tickets"
    gated = {**_ok_model(tickets_dir=str(tickets), gate=str(gate)), "factory": "faulty_models:make_gated"}
    spec_path, out = _spec(tmp_path, model=gated), tmp_path / "out"
    trials = expand(load_spec(spec_path))[0]
    marker = uuid.uuid4().hex
    ray_tmp = Path(tempfile.mkdtemp(prefix="swr-"))  # its own Ray, not the session's; short for socket paths
    env = {**os.environ, "SWEEPER_TEST_RUN": marker, "RAY_TMPDIR": str(ray_tmp),
           "PYTHONPATH": os.pathsep.join(IMPORT_PATH)}
    env.pop("RAY_ADDRESS", None)
    log = tmp_path / "driver.log"
    with open(log, "w") as sink:
        driver = subprocess.Popen([sys.executable, "-m", "sweeper", "run", str(spec_path), "--results", str(out),
                                   "--no-report"], env=env, stdout=sink, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        _wait_for_first_row(driver, out / RESULTS_FILE, log)
        deadline = time.monotonic() + FIRST_ROW_TIMEOUT_S  # catches a hang only
        while not (tickets / "1").exists():  # the second trial is measuring
            assert driver.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        _kill_leftovers(marker)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    before = read_results([out / RESULTS_FILE])
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    assert len(before) == 1, log.read_text()[-3000:]
    gate.touch()

    assert run_cli(["run", str(spec_path), "--results", str(out), "--resume", "--no-report"]) == 0
    after = read_results([out / RESULTS_FILE])
    assert after.trial_id.is_unique and sorted(after.trial_id) == sorted(t.trial_id for t in trials)
    assert set(after.sweep_id) == {manifest["sweep_id"]}
    assert json.loads((out / MANIFEST_FILE).read_text()) == manifest
    assert (after.status == "ok").all(), after[["batch_size", "status", "error"]]
    kept = after.set_index("trial_id").loc[before.trial_id].reset_index()[list(before.columns)]
    pd.testing.assert_frame_equal(kept, before)  # finished rows untouched: not rerun, not rewritten


# ---- what resume refuses, in one line, touching nothing ----------------------------------

def _snapshot(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_changed_spec_is_detected_and_explained(tmp_path, capsys, no_ray):
    spec_path, out, _ = _state_with_rows(tmp_path, {1: "ok"})
    files = _snapshot(out)
    changed = yaml.safe_load(spec_path.read_text())
    changed["axes"]["batch_size"] = [1, 2, 8]
    changed["measure"]["warmup_iters"] = 2
    spec_path.write_text(yaml.safe_dump(changed))
    assert run_cli(["run", str(spec_path), "--results", str(out), "--resume"]) == 2
    err = _one_line_error(capsys)
    assert "the spec changed since sweep" in err
    assert "axes.batch_size: [1, 2, 3, 4] -> [1, 2, 8]" in err and "measure.warmup_iters: 1 -> 2" in err
    assert "Resume with the old spec" in err
    assert _snapshot(out) == files


def test_description_change_is_not_a_spec_change(tmp_path, capsys, no_ray, monkeypatch):
    spec_path, out, _state = _state_with_rows(tmp_path, dict.fromkeys((1, 2, 3, 4), "ok"))
    spec = yaml.safe_load(spec_path.read_text())
    spec_path.write_text(yaml.safe_dump({**spec, "description": "now with notes"}))
    monkeypatch.setattr(no_ray, "connect", lambda address: None)
    monkeypatch.setattr(no_ray, "resolve_device", lambda spec: "cpu")  # nothing left to run: no sweep starts
    assert run_cli(["run", str(spec_path), "--results", str(out), "--resume", "--no-report"]) == 0
    assert len(read_results([out / RESULTS_FILE])) == 4


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_corrupt_results_file_refused_and_left_alone(tmp_path, capsys, no_ray, damage):
    spec_path, out, _ = _state_with_rows(tmp_path, {1: "ok", 2: "ok"})
    data = (out / RESULTS_FILE).read_bytes()
    broken = {"truncated": data[: len(data) - 100], "garbage": b"PAR1" + os.urandom(500), "empty": b""}[damage]
    (out / RESULTS_FILE).write_bytes(broken)
    files = _snapshot(out)
    assert run_cli(["run", str(spec_path), "--results", str(out), "--resume"]) == 2
    err = _one_line_error(capsys)
    assert f"{out / RESULTS_FILE}: not a readable Parquet file" in err and "left untouched" in err
    assert _snapshot(out) == files
    assert run_cli(["report", str(out), "-o", str(tmp_path / "r.html")]) == 2  # never half a report
    assert "not a readable Parquet file" in _one_line_error(capsys)


@pytest.mark.parametrize("manifest", ["{not json", '["a list"]', '{"sweep_id": "x"}'])
def test_corrupt_manifest_refused(tmp_path, capsys, no_ray, manifest):
    spec_path, out, _ = _state_with_rows(tmp_path, {1: "ok"})
    (out / MANIFEST_FILE).write_text(manifest)
    files = _snapshot(out)
    assert run_cli(["run", str(spec_path), "--results", str(out), "--resume"]) == 2
    assert f"{out / MANIFEST_FILE}:" in _one_line_error(capsys)
    assert _snapshot(out) == files


def test_results_without_manifest_refused(tmp_path, capsys, no_ray):
    spec_path, out, _ = _state_with_rows(tmp_path, {1: "ok"})
    (out / MANIFEST_FILE).unlink()
    assert run_cli(["run", str(spec_path), "--results", str(out), "--resume"]) == 2
    assert f"holds {RESULTS_FILE} but no {MANIFEST_FILE}" in _one_line_error(capsys)


def test_rerun_without_resume_refused(tmp_path, capsys, no_ray):
    spec_path, out, state = _state_with_rows(tmp_path, {1: "ok"})
    assert run_cli(["run", str(spec_path), "--results", str(out)]) == 2
    assert f"already holds sweep {state.sweep_id}: pass --resume" in _one_line_error(capsys)


def test_nothing_written_until_the_sweep_starts(tmp_path):
    spec = load_spec(_spec(tmp_path))
    state = SweepState.open(spec, tmp_path / "out", resume=False)
    assert not (tmp_path / "out").exists()  # a refused or failed start leaves no directory behind
    state.save_manifest()
    assert json.loads((tmp_path / "out" / MANIFEST_FILE).read_text())["sweep_id"] == state.sweep_id


# ---- retry-failed, durability, atomic writes ---------------------------------------------

@pytest.mark.slow
def test_retry_failed_reruns_only_crashed_and_timeout(ray_local, tmp_path):
    spec_path, out, _ = _state_with_rows(tmp_path, {1: "ok", 2: "crashed", 3: "timeout", 4: "oom"})
    before = read_results([out / RESULTS_FILE]).set_index("batch_size")
    assert run_cli(["run", str(spec_path), "--results", str(out), "--retry-failed", "--no-report"]) == 0
    after = read_results([out / RESULTS_FILE]).set_index("batch_size")
    assert after.trial_id.is_unique and len(after) == 4
    assert after.loc[2, "status"] == after.loc[3, "status"] == "ok"  # healthy now: rerun
    for bs in (1, 4):  # ok stays, oom is never retried
        pd.testing.assert_series_equal(after.loc[bs], before.loc[bs])


def test_each_row_is_on_disk_before_the_next(tmp_path):
    from sweeper.run.collector import Collector as _Collector
    from sweeper.run.progress import Progress

    spec_path = _spec(tmp_path)
    spec = load_spec(spec_path)
    trials = expand(spec)[0]
    state = SweepState.open(spec, tmp_path / "out", resume=False)
    collector = _Collector(state, {t.trial_id: t for t in trials}, Progress(total=len(trials), slots=1))

    class FakeTrial:
        def __init__(self, tid):
            self.config = {"trial_id": tid}  # what Tune holds of a trial: its flat parameters
            self.error_file, self.num_failures = str(tmp_path / "missing-error.txt"), 2

    for i, t in enumerate(trials[:3]):
        collector.on_trial_start(0, [], FakeTrial(t.trial_id))
        row = {"status": "ok", "throughput_items_s": float(i + 1)}
        collector.on_trial_result(0, [], FakeTrial(t.trial_id), {"row_json": json.dumps(row)})
        collector.on_trial_result(0, [], FakeTrial(t.trial_id), {"row_json": json.dumps(row)})  # twice: one row
        on_disk = read_results([state.results_path])
        assert sorted(on_disk.trial_id) == sorted(x.trial_id for x in trials[: i + 1])
    dead = FakeTrial(trials[3].trial_id)
    collector.on_trial_start(0, [], dead)
    collector.on_trial_error(0, [], dead)
    last = read_results([state.results_path]).set_index("trial_id").loc[trials[3].trial_id]
    assert last.status == "crashed" and last.attempts == 2 and "Ray worker" in last.error
    assert last.finished_at is not None and last.trial_wall_s >= 0


def test_failed_write_keeps_the_previous_file(tmp_path, monkeypatch):
    _, out, state = _state_with_rows(tmp_path, {1: "ok"})
    good = (out / RESULTS_FILE).read_bytes()
    trial = next(t for t in expand(state.spec)[0] if t.batch_size == 2)

    def disk_full(*args):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(ResultsUnwritable) as caught:  # stops the sweep as Ctrl-C does (run.rescue)
        state.add(trial, {"status": "ok"})
    assert caught.value.error.errno == 28 and [r["trial_id"] for r in state.unwritten] == [trial.trial_id]
    assert (out / RESULTS_FILE).read_bytes() == good
    assert {p.name for p in out.iterdir()} == {RESULTS_FILE, MANIFEST_FILE, PARTS_DIR}
    assert list((out / PARTS_DIR).iterdir()) == []  # no part, no temp file left
    assert len(read_results([out])) == 1


def _as_written_before(out: Path, *settings: str) -> None:
    """Make the manifest look written by an older sweeper that did not know `settings` yet."""
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    for setting in settings:
        section, key = setting.split(".")
        del manifest["spec"][section][key]
    manifest["spec_hash"] = "0" * 16
    (out / MANIFEST_FILE).write_text(json.dumps(manifest))


def test_a_setting_added_since_the_sweep_started_resumes_at_its_default_only(tmp_path, capsys, no_ray,
                                                                             monkeypatch):
    spec_path, out, _ = _state_with_rows(tmp_path, dict.fromkeys((1, 2, 3, 4), "ok"))
    _as_written_before(out, "measure.megacache_warm_start", "measure.gpu_util")
    monkeypatch.setattr(no_ray, "connect", lambda address: None)
    monkeypatch.setattr(no_ray, "resolve_device", lambda spec: "cpu")  # nothing left to run: no sweep starts
    assert run_cli(["run", str(spec_path), "--results", str(out), "--resume", "--no-report"]) == 0
    assert len(read_results([out / RESULTS_FILE])) == 4
    changed = yaml.safe_load(spec_path.read_text())
    changed["measure"]["gpu_util"] = False  # the new setting, not at its default: the rows did not measure that
    spec_path.write_text(yaml.safe_dump(changed))
    capsys.readouterr()
    assert run_cli(["run", str(spec_path), "--results", str(out), "--resume", "--no-report"]) == 2
    assert "measure.gpu_util: null -> false" in _one_line_error(capsys)
