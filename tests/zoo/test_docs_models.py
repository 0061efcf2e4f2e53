"""docs/models.md's examples run as written: each YAML spec validates as it stands and runs on the
local Ray (with plumbing measure settings: the aot_eager backend, short windows, CPU), and the
notebook example runs as a script, unchanged, in a fresh interpreter."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import yaml

import sweeper
from sweeper.spec.sweep_spec import parse_spec
from sweeper.spec.trials import expand
from tests.helpers import REPO, tiny_spec

DOC = REPO / "docs" / "models.md"
PLUMBING = {"measure": tiny_spec()["measure"], "resources": {"device": "cpu", "max_concurrent_trials": 1}}


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_page_has_a_timm_a_hugging_face_and_a_notebook_example():
    specs = [yaml.safe_load(b) for b in _blocks("yaml")]
    names = [m["name"] for s in specs for m in s["models"]]
    assert any(n.startswith("timm:") for n in names) and any(n.startswith("hf:") for n in names)
    assert len(_blocks("python")) == 1 and "sweeper.sweep(" in _blocks("python")[0]


@pytest.mark.parametrize("index", range(len(_blocks("yaml"))))
def test_each_yaml_example_validates_as_written(index):
    trials, _ = expand(parse_spec(yaml.safe_load(_blocks("yaml")[index]), source=f"docs example {index}"))
    assert trials


pytest.importorskip("timm")


@pytest.mark.slow  # a real Ray sweep per example
@pytest.mark.parametrize("index", range(len(_blocks("yaml"))))
def test_each_yaml_example_runs(ray_local, tmp_path, index):
    spec = {**yaml.safe_load(_blocks("yaml")[index]), **PLUMBING}
    res = sweeper.sweep(spec, results=tmp_path / "r", report=False)
    assert len(res) == len(expand(parse_spec(spec))[0]) and not res.missing
    assert res.df["status"].eq("ok").all(), res.df[["model", "mode", "status", "error"]].to_string()


BAD_SPEC = """
try:  # a spec error, raised as the CLI's one-line error
    sweeper.sweep({"name": "bad", "models": [{"name": "m", "factory": TinyMLP, "input": {"kind": "tensor",
                   "shape": [16]}}], "axes": {"mode": ["fast"]}}, results="results/bad")
except sweeper.SweeperError as e:
    print("ERROR", e)
"""


@pytest.mark.slow  # a real script with its own local Ray
def test_the_notebook_example_runs_as_a_script(tmp_path):
    """As written, in a fresh interpreter: its model class lives in the script's __main__, which no
    Ray worker can import, and the sweep still runs it."""
    (tmp_path / "example.py").write_text(_blocks("python")[0] + "\nprint('STATUS', sorted(res.df['status']))\n"
                                         "print('ADVICE', best['advice'])\n" + BAD_SPEC)
    # a new private Ray, never a `ray start` cluster that happens to run on this machine
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0", "RAY_ADDRESS": "local"}
    done = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "STATUS ['ok', 'ok']" in done.stdout
    assert "ERROR spec: axes.mode.0: Input should be" in done.stdout
    assert "[2/2]" in done.stderr  # the progress lines, on stderr as the CLI prints them
    assert (tmp_path / "notebook.html").stat().st_size > 10_000
    assert (tmp_path / "results" / "notebook" / "results.parquet").exists()
