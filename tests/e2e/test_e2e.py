"""A real sweep on a real local Ray (CPU): spec -> Tune trials -> rows in Parquet -> report."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from sweeper.results.schema import COLUMN_NAMES
from sweeper.results.store import read_results
from sweeper.spec.sweep_spec import load_spec
from sweeper.spec.trials import expand
from tests.helpers import REPO, run_cli, tiny_spec, write_spec


@pytest.fixture(scope="module")
def plumbing_sweep(ray_local, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("e2e")
    spec = write_spec(tmp, tiny_spec("e2e", models=[{"name": "bert-tiny"}, {"name": "resnet18-tiny"}]))
    code = run_cli(["run", str(spec), "--results", str(tmp / "out")])
    return spec, tmp / "out", code


@pytest.mark.slow  # a real Ray sweep
def test_sweep_writes_one_ok_row_per_trial(plumbing_sweep):
    spec_path, out, code = plumbing_sweep
    assert code == 0
    trials, _ = expand(load_spec(spec_path))
    df = read_results([out / "results.parquet"])
    assert sorted(df.trial_id) == sorted(t.trial_id for t in trials)
    assert (df.status == "ok").all(), df[["model", "mode", "error"]]
    assert list(pd.read_parquet(out / "results.parquet").columns) == COLUMN_NAMES
    manifest = json.loads((out / "sweep.json").read_text())
    assert set(df.sweep_id) == {manifest["sweep_id"]}
    assert set(df.model) == {"bert-tiny", "resnet18-tiny"}
    for col in ("throughput_items_s", "peak_mem_gib", "speedup_vs_eager", "hostname", "node_ip",
                "torch_version", "started_at", "finished_at", "trial_wall_s", "config_json"):
        assert df[col].notna().all(), col
    compiled = df[df["mode"] == "default"]
    assert compiled.first_call_s.gt(0).all() and compiled.graphs.ge(1).all()
    assert (df[df["mode"] == "eager"].speedup_vs_eager == 1.0).all()


@pytest.mark.slow  # a real Ray sweep
def test_sweep_writes_the_report(plumbing_sweep):
    _, out, _ = plumbing_sweep
    html = (out / "report.html").read_text()
    n_rows = len(read_results([out / "results.parquet"]))
    assert f'<h1>sweeper: e2e</h1><p class="sub">{n_rows} trials' in html  # this sweep's rows, all of them
    assert "bert-tiny" in html and "resnet18-tiny" in html
    assert "<script src=" not in html and html.count("Plotly") > 0  # one offline file, plotly inlined


@pytest.mark.slow  # a real Ray sweep
def test_rerun_needs_resume_and_resume_runs_nothing_new(plumbing_sweep, capsys):
    spec_path, out, _ = plumbing_sweep
    before = pd.read_parquet(out / "results.parquet")
    assert run_cli(["run", str(spec_path), "--results", str(out)]) == 2
    assert "--resume" in capsys.readouterr().err
    assert run_cli(["run", str(spec_path), "--results", str(out), "--resume", "--no-report"]) == 0
    after = pd.read_parquet(out / "results.parquet")
    assert after.trial_id.is_unique
    pd.testing.assert_frame_equal(before, after)


def test_validate_and_models_commands(capsys):
    assert run_cli(["validate", str(REPO / "experiments" / "gpu_smoke.yaml")]) == 0
    assert "48 trials over 4 models" in capsys.readouterr().out
    assert run_cli(["models"]) == 0
    listing = capsys.readouterr().out
    for name in ("resnet50", "vit_b_16", "bert-base", "gpt2", "t5-small", "bert-tiny"):
        assert name in listing


@pytest.mark.slow
def test_readme_smoke_sweep_with_inductor(ray_local, tmp_path, capsys):
    """The README's main job, exactly: experiments/smoke.yaml (real inductor compiles, warm too)."""
    code = run_cli(["run", str(REPO / "experiments" / "smoke.yaml"), "--results", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    df = read_results([Path(tmp_path)])
    assert len(df) == 4 and (df.status == "ok").all(), df[["model", "mode", "error"]]
    compiled = df[df["mode"] == "default"]
    assert compiled.compile_s.gt(0).all() and compiled.warm_compile_s.gt(0).all()
    assert "speedup" in out and "report:" in out
