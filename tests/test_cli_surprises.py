"""The CLI does what a new user expects, each test doing what the user did."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_cli, tiny_spec, write_spec


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
    from sweeper.spec.schema import parse_spec
    from sweeper.spec.trials import expand

    old = os.umask(umask)
    try:
        state = SweepState.open(parse_spec(tiny_spec("modes")), tmp_path / "res", resume=False)
        trial = expand(state.spec)[0][0]
        state.add(trial, {"status": "ok"})
        write_rows(tmp_path / "demo.parquet", synthetic.make_rows(6, seed=1, models=["resnet50"]))
        assert main(["report", str(tmp_path / "demo.parquet"), "-o", str(tmp_path / "report.html")]) == 0
        (tmp_path / "plain").write_text("x")
    finally:
        os.umask(old)
    expected = 0o666 & ~umask
    assert (tmp_path / "plain").stat().st_mode & 0o777 == expected
    for path in (state.results_path, tmp_path / "res" / "sweep.json", tmp_path / "report.html"):
        assert path.stat().st_mode & 0o777 == expected, (path, oct(path.stat().st_mode))
