"""studies/resumable_sweep.sh: a study's sweep call is marked done only when `sweeper run` finished,
and a later call after that runs nothing (the stand-in for `python3` records each call's arguments)."""

from __future__ import annotations

import os
import subprocess

from tests.helpers import REPO


def _call(tmp_path, exit_code: int) -> str:
    """One call of the run scripts' sweep with `sweeper run` exiting `exit_code`; its output."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "python3"
    fake.write_text(f'#!/bin/sh\necho "$@" >> "{tmp_path}/calls.txt"\nexit {exit_code}\n')
    fake.chmod(0o755)
    script = f'out="{tmp_path}/out"; mkdir -p "$out"; . studies/resumable_sweep.sh; resumable_sweep r1 spec.yaml'
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "LIMIT_S": "30"}
    done = subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True, check=False)
    already = done.stdout.strip().endswith("already done")
    assert done.returncode == (0 if already else exit_code), done.stderr
    return done.stdout


def test_a_cut_short_call_is_not_done_and_a_finished_one_is(tmp_path):
    assert "r1 call exit=3" in _call(tmp_path, 3)
    assert not (tmp_path / "out" / "r1.done").exists()
    assert "r1 call exit=0" in _call(tmp_path, 0)
    assert (tmp_path / "out" / "r1.done").exists()
    assert _call(tmp_path, 0).strip() == "r1 already done"
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert calls == [f"-m sweeper run spec.yaml --results {tmp_path}/out/r1 --resume --no-report"] * 2
    assert (tmp_path / "out" / "walls.txt").read_text().count("wall_s=") == 2
