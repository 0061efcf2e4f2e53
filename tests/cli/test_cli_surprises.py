"""The CLI does what a new user expects, each test doing what the user did."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers import IMPORT_PATH, REPO, rows_on_disk, run_cli, start_sweep, tiny_spec, wait_for, write_spec


def test_unwritable_results_directory_fails_with_exit_2_before_ray(tmp_path, capsys, no_ray) -> None:
    spec = write_spec(tmp_path, tiny_spec())
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    assert run_cli(["run", str(spec), "--results", str(blocker / "results")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sweeper: error: ") and err.count("\n") == 1
    assert "cannot write results there" in err and "--results" in err


LOCAL_FACTORY = '''
from torch import nn


def build(width: int = 8) -> nn.Module:
    return nn.Sequential(nn.Linear(4, width), nn.ReLU(), nn.Linear(width, 2))
'''


def _console_script(tmp_path: Path) -> list[str]:
    """`sweeper` as pip installs it: a script in the environment's bin directory, so Python's
    first import directory is that bin directory, not the working directory."""
    installed = Path(sys.executable).parent / "sweeper"
    if installed.is_file():
        return [str(installed)]
    wrapper = tmp_path / "bin" / "sweeper"
    wrapper.parent.mkdir()
    wrapper.write_text("import sys\nfrom sweeper.cli import main\nsys.exit(main())\n")
    return [sys.executable, str(wrapper)]


@pytest.mark.parametrize("entry", ["console script", "python -m"])
def test_factory_module_in_the_working_directory_imports(entry, tmp_path) -> None:
    work = tmp_path / "project"
    work.mkdir()
    (work / "mymod.py").write_text(LOCAL_FACTORY)
    spec = tiny_spec("local", models=[{"name": "mine", "factory": "mymod:build",
                                       "input": {"kind": "tensor", "shape": [4]}}])
    write_spec(work, spec)
    command = _console_script(tmp_path) if entry == "console script" else [sys.executable, "-m", "sweeper"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    proc = subprocess.run([*command, "validate", "spec.yaml"], cwd=work, capture_output=True, text=True,
                          timeout=120, env={**env, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("spec.yaml: valid; 2 trials over 1 models"), proc.stdout


def test_dropped_vision_trial_names_no_sequence_length(tmp_path, capsys, no_ray) -> None:
    spec = write_spec(tmp_path, tiny_spec("drops", models=[{"name": "resnet18-tiny"}],
                                          axes={"mode": ["eager", "max-autotune"]}))
    assert run_cli(["validate", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "  dropped resnet18-tiny max-autotune bs2: mode 'max-autotune' needs the inductor" in out, out
    assert "seqNone" not in out


@pytest.mark.parametrize("umask", [0o022, 0o027], ids=["022", "027"])
def test_output_files_follow_the_umask(umask, tmp_path) -> None:
    """The manifest and Parquet file a sweep writes, and the report, get the modes a plain file
    written under the user's umask would."""
    from sweeper.cli.app import main
    from sweeper.results import synthetic
    from sweeper.results.store import write_rows
    from sweeper.run.state import SweepState
    from sweeper.spec.sweep_spec import parse_spec
    from sweeper.spec.trials import expand

    old = os.umask(umask)
    try:
        state = SweepState.open(parse_spec(tiny_spec("modes")), tmp_path / "res", resume=False)
        trial = expand(state.spec)[0][0]
        state.add(trial, {"status": "ok"})
        state.close()  # compacts the row's part file into results.parquet
        write_rows(tmp_path / "demo.parquet", synthetic.make_rows(6, seed=1, models=["resnet50"]))
        assert main(["report", str(tmp_path / "demo.parquet"), "-o", str(tmp_path / "report.html")]) == 0
        (tmp_path / "plain").write_text("x")
    finally:
        os.umask(old)
    expected = 0o666 & ~umask
    assert (tmp_path / "plain").stat().st_mode & 0o777 == expected
    for path in (state.results_path, tmp_path / "res" / "sweep.json", tmp_path / "report.html"):
        assert path.stat().st_mode & 0o777 == expected, (path, oct(path.stat().st_mode))


def _eager_spec(tmp_path: Path, name: str, factory: str, batch_sizes: list[int], **kwargs: object) -> Path:
    return write_spec(tmp_path, tiny_spec(name, models=[{"name": "m", "factory": factory, "kwargs": kwargs,
                                                         "input": {"kind": "tensor", "shape": [8]}}],
                                          axes={"mode": ["eager"], "batch_size": batch_sizes},
                                          resources={"max_concurrent_trials": 1}))


@pytest.mark.slow
def test_ctrl_c_prints_the_resume_command_and_exits_130(ray_local, tmp_path) -> None:
    """Ctrl-C in a terminal: SIGINT to the sweep's whole process group, after its first row, while
    its second trial is measuring. That trial waits for a gate file the test creates only after
    the interrupt, so the signal lands mid-sweep however fast or slow the machine is."""
    from sweeper.results.store import RESULTS_FILE, read_results

    tickets, gate = tmp_path / "tickets", tmp_path / "gate"
    spec = _eager_spec(tmp_path, "interrupt", "faulty_models:make_gated", [1, 2, 3, 4, 5, 6],
                       tickets_dir=str(tickets), gate=str(gate))
    out = tmp_path / "out"
    ray_tmp = Path(tempfile.mkdtemp(prefix="swi-"))  # its own Ray, short for socket paths
    env = {**os.environ, "RAY_TMPDIR": str(ray_tmp),
           "PYTHONPATH": os.pathsep.join(IMPORT_PATH)}
    env.pop("RAY_ADDRESS", None)
    log = tmp_path / "driver.log"
    driver = start_sweep(spec, out, env, log, tmp_path)
    try:
        wait_for("a row", lambda: rows_on_disk(out) >= 1, driver, log)
        wait_for("a second trial measuring", lambda: (tickets / "1").exists(), driver, log)
        os.killpg(driver.pid, signal.SIGINT)
        assert driver.wait(timeout=600) == 130, log.read_text()[-3000:]  # the timeout only catches a hang
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    lines = log.read_text().strip().splitlines()
    last = lines[-1]
    progress = [line for line in lines if re.search(r"starting 6 trials|started m eager|\[\d/6\]", line)]
    assert "starting 6 trials, each holding 1 CPU, 0 GPUs; cluster: " in progress[0], progress
    assert progress[0].endswith("1 start now; 5 wait for a free slot (at most 1 at a time)"), progress
    assert "started m eager bs1 infer fp32 | 1 running" in progress[1], progress
    assert all(re.match(r"\d\d:\d\d:\d\d ", line) for line in progress), progress  # timestamped
    command = f"python -m sweeper run {spec} --results {out} --resume --no-report"
    assert last.startswith("sweeper: interrupted; ") and last.endswith(f"to finish the sweep: {command}"), last
    saved = len(read_results([out / RESULTS_FILE]))
    assert saved == 1 and f"; 1 of 6 trials are saved in {out / RESULTS_FILE};" in last
    gate.touch()
    assert run_cli(shlex.split(command)[3:]) == 0  # the printed command finishes the sweep
    assert len(read_results([out / RESULTS_FILE])) == 6


@pytest.mark.slow
def test_sweep_whose_every_trial_failed_exits_1_and_prints_each_error(ray_local, tmp_path, capsys) -> None:
    spec = _eager_spec(tmp_path, "broken", "faulty_models:make_unbuildable", [1, 2])
    assert run_cli(["run", str(spec), "--results", str(tmp_path / "out"), "--no-report"]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    start = lines.index("failed trials: 2 of 2")
    for bs, line in zip((1, 2), lines[start + 1:start + 3], strict=True):
        expected = f"  m eager bs{bs} infer fp32: RUNTIME_ERROR: ValueError: width must be a multiple"
        assert line.startswith(expected), line
        assert line.endswith("(got 50)"), line
    assert "every trial failed (2)" in captured.err


def test_ray_client_address_without_ray_client_is_refused_up_front(tmp_path, capsys, monkeypatch) -> None:
    """Without grpcio (the ray[client] extra) a ray:// address fails in one line, before Ray starts."""
    monkeypatch.setitem(sys.modules, "grpc", None)  # what Python does for a package that is not installed
    spec = write_spec(tmp_path, tiny_spec("client"))
    address = "ray://127.0.0.1:10001"
    assert run_cli(["run", str(spec), "--results", str(tmp_path / "out"), "--address", address]) == 2
    err = capsys.readouterr().err
    assert err == (f"sweeper: error: --address {address} needs Ray Client: pip install \"ray[client]\" (or run the "
                   "sweep on the cluster: ray job submit -- sweeper run SPEC)\n")
    assert not (tmp_path / "out" / "sweep.json").exists()
