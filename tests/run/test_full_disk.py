"""A results file system that fills up: warned of before the sweep, and, when it fills mid-sweep,
one line, exit 3, no measured row lost, and `--resume` after freeing space finishes every trial
exactly once. The full disk is real: a small tmpfs mounted for the test (root only; skipped where
mounting is refused), filled to the last byte while the sweep's second trial is held at a gate."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import IMPORT_PATH, rows_on_disk, start_sweep, tiny_spec, wait_for, write_spec

HANG_S = 600
"""Limits that catch a hang only."""


@pytest.fixture
def small_fs(tmp_path) -> Iterator[Path]:
    """A 4 MB tmpfs of the test's own, unmounted afterwards."""
    mount = Path(tempfile.mkdtemp(prefix="sweeper-fs-"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        mount.rmdir()
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
        mount.rmdir()


def _fill(mount: Path) -> Path:
    """Write a ballast file until the file system refuses another byte."""
    ballast = mount / "ballast"
    fd = os.open(ballast, os.O_CREAT | os.O_WRONLY | os.O_APPEND)
    try:
        for chunk in (b"\0" * 65536, b"\0" * 512, b"\0"):  # then the last blocks a smaller write still finds
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, chunk)
    finally:
        os.close(fd)
    return ballast


def _env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(IMPORT_PATH),
           "RAY_TMPDIR": tempfile.mkdtemp(prefix="swd-"), "SWEEPER_FALLBACK_DIR": str(tmp_path / "fallback")}
    env.pop("RAY_ADDRESS", None)
    return env


@pytest.mark.slow
def test_a_full_disk_mid_sweep_stops_in_one_line_and_resume_finishes_every_trial_once(small_fs, tmp_path):
    from sweeper.results.store import RESULTS_FILE, read_results
    from sweeper.spec.sweep_spec import parse_spec
    from sweeper.spec.trials import expand

    gate, tickets = tmp_path / "gate", tmp_path / "tickets"
    spec_dict = tiny_spec("full", models=[{"name": "m", "factory": "faulty_models:make_gated", "input": {
        "kind": "tensor", "shape": [8]}, "kwargs": {"tickets_dir": str(tickets), "gate": str(gate)}}],
        axes={"mode": ["eager"], "batch_size": [1, 2, 3, 4]}, resources={"max_concurrent_trials": 1})
    spec, out, env = write_spec(tmp_path, spec_dict), small_fs / "out", _env(tmp_path)
    ids = {t.trial_id for t in expand(parse_spec(spec_dict))[0]}
    log = tmp_path / "driver.log"
    driver = start_sweep(spec, out, env, log, tmp_path)
    try:
        wait_for("a row", lambda: rows_on_disk(out) >= 1, driver, log, HANG_S)
        wait_for("a second trial measuring", lambda: (tickets / "1").exists(), driver, log, HANG_S)
        ballast = _fill(small_fs)
        gate.touch()  # the second trial finishes; its row finds the disk full
        assert driver.wait(timeout=HANG_S) == 3, log.read_text()[-3000:]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)
    err = log.read_text()
    assert "Traceback" not in err, err[-3000:]
    line = err.strip().splitlines()[-1]
    command = f"python -m sweeper run {spec} --results {out} --resume --no-report"
    assert line.startswith(f"sweeper: stopped: cannot write into {out}: No space left on device; "), line
    assert f"; 1 of 4 trials are saved in {out / RESULTS_FILE} and 1 more in {tmp_path / 'fallback'}/" in line, line
    assert line.endswith(f"(--resume takes them back); free space there, then finish the sweep: {command}"), line

    # every measured row is on disk: one in the results directory, the one the disk refused in the fallback
    first = set(read_results([out]).trial_id)
    (fallback,) = (tmp_path / "fallback").iterdir()
    kept = set(read_results([fallback]).trial_id)
    assert len(first) == len(kept) == 1 and not first & kept and first | kept <= ids

    ballast.unlink()  # space again: the printed command finishes the sweep
    done = subprocess.run([sys.executable, *shlex.split(command)[1:]], env=env, cwd=tmp_path, capture_output=True,
                          text=True,
                          timeout=HANG_S)
    assert done.returncode == 0, done.stderr[-3000:]
    final = read_results([out / RESULTS_FILE])
    assert sorted(final.trial_id) == sorted(ids) and (final.status == "ok").all()  # each trial exactly once
    assert first | kept <= set(final.trial_id) and not fallback.exists()
    assert sorted(p.name for p in tickets.iterdir()) == ["0", "1", "2", "3"]  # the two kept rows were not run again


def test_a_sweep_larger_than_the_free_space_is_warned_of_in_one_line(tmp_path):
    import shutil

    from sweeper.run import space
    from sweeper.spec.sweep_spec import parse_spec
    from sweeper.spec.trials import expand

    spec = parse_spec(tiny_spec("big", axes={"mode": ["default"]}, measure={"trace": True, "warm_compile": True}))
    (trial,) = expand(spec)[0]
    free = shutil.disk_usage(tmp_path).free
    one = sum(space.estimate_bytes(tmp_path, [trial], ("json", "csv", "tensorboard"), None).values())
    assert one == (space.PART_BYTES + space.COMPACTED_ROW_BYTES + space.MEGACACHE_BYTES + space.TRACE_BYTES
                   + space.TUNE_BASE_BYTES + sum(space.TUNE_LOG_BYTES.values()))
    many = [trial] * int(free / one + 1)
    line = space.shortfall_line(tmp_path, many, ("json", "csv", "tensorboard"), None)
    assert line is not None and "\n" not in line
    assert line.startswith(f"sweeper: warning: {tmp_path} has ") and f"; these {len(many)} trials will likely " in line
    assert "(Mega-Cache artifacts " in line and ", compile traces " in line and ", Tune records " in line
    assert line.endswith("to shrink it: --tune-logs none, measure.trace: false, measure.megacache_warm_start: "
                         "false; a sweep that runs out of space stops and keeps its rows")
    assert space.shortfall_line(tmp_path, [trial] * 10, (), None) is None
    smaller = space.estimate_bytes(tmp_path, many, (), "s3://elsewhere")  # no Tune records here
    assert "Tune records" not in smaller


def test_a_row_the_full_disk_refuses_is_kept_and_taken_back_on_resume(small_fs, tmp_path, monkeypatch):
    """The sweep state alone, on the real small file system: the refused row stays in memory, goes
    to the fallback directory, and the next claim of the directory takes it back exactly once."""
    from sweeper.results.store import RESULTS_FILE, read_results
    from sweeper.run import rescue
    from sweeper.run.state import SweepState
    from sweeper.spec.sweep_spec import parse_spec
    from sweeper.spec.trials import expand

    monkeypatch.setenv(rescue.FALLBACK_ENV, str(tmp_path / "fallback"))
    spec = parse_spec(tiny_spec("state", axes={"mode": ["eager"], "batch_size": [1, 2, 3]}))
    trials = expand(spec)[0]
    state = SweepState.open(spec, small_fs / "out", resume=False)
    state.claim()
    state.add(trials[0], {"status": "ok"})
    ballast = _fill(small_fs)
    with pytest.raises(rescue.ResultsUnwritable) as caught:
        state.add(trials[1], {"status": "ok"})
    assert caught.value.error.errno == 28 and [r["trial_id"] for r in state.unwritten] == [trials[1].trial_id]
    assert [r["trial_id"] for r in state.rows] == [trials[0].trial_id, trials[1].trial_id]
    written, fallback = state.save_unwritten()
    assert written == 0 and fallback == tmp_path / "fallback" / state.sweep_id and not state.unwritten
    state.close()  # no compaction on a full disk: the part file stays for the resume
    ballast.unlink()

    again = SweepState.open(spec, small_fs / "out", resume=True)
    again.claim()
    assert sorted(r["trial_id"] for r in again.rows) == sorted(t.trial_id for t in trials[:2])
    assert not fallback.exists()
    assert [t.trial_id for t in again.pending(trials)] == [trials[2].trial_id]
    again.close()
    assert sorted(read_results([small_fs / "out" / RESULTS_FILE]).trial_id) == sorted(t.trial_id for t in trials[:2])


def test_an_oserror_wrapped_by_tune_is_found_behind_its_wrapper(tmp_path):
    import errno

    from sweeper.run import rescue

    def wrapped(error: OSError) -> BaseException:
        try:
            try:
                raise error
            except OSError:
                raise RuntimeError("Traceback (most recent call last): ...")  # noqa: B904 - as Tune's TuneError
        except RuntimeError as e:
            return e

    full = OSError(errno.ENOSPC, "No space left on device")
    assert rescue.unwritable(wrapped(full), tmp_path) is full
    inside = FileNotFoundError(errno.ENOENT, "No such file or directory", str(tmp_path / "tune" / "x.json"))
    assert rescue.unwritable(wrapped(inside), tmp_path) is inside
    elsewhere = FileNotFoundError(errno.ENOENT, "No such file or directory", "/elsewhere/x")
    assert rescue.unwritable(wrapped(elsewhere), tmp_path) is None
    assert rescue.unwritable(ValueError("not a file system's"), tmp_path) is None
