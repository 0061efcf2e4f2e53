"""The whole path on the CPU with real inductor compiles: a regional trial run in its fresh
processes (cold, warm from the cache dir, warm from its Mega-Cache artifact), its row and artifact
kept by the driver, `sweeper export`, and the exported module loading the artifact in a fresh
process, whose first call then skips inductor's compile (FX graph cache hits, no miss), timed
against the same first call compiled cold."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from sweeper.run import isolate
from sweeper.run.state import SweepState
from sweeper.spec.sweep_spec import parse_spec
from sweeper.spec.trials import expand
from tests.helpers import REPO, run_cli, tiny_spec

log = logging.getLogger(__name__)

def _first_call(export_dir, how: str) -> dict:
    """benchmarks/export_first_call.py (what the GPU study runs): the exported setting's first call
    in a fresh process with empty inductor and Triton caches, from the artifact or cold."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "benchmarks.export_first_call", str(export_dir),
                          *(["--cold"] if how == "cold" else [])], env=env, capture_output=True, text=True,
                         timeout=600, check=True, cwd=REPO)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_regional_trial_artifact_exported_and_loaded_in_a_fresh_process(tmp_path):
    """The artifact a measuring process forked from the fork server (the default start) saved loads
    in the deployment's plain interpreter with every compile a cache hit. (An artifact saved by a
    measuring process started as a new interpreter: tests/measure/test_measure_process.py.)"""
    spec = parse_spec(tiny_spec(axes={"scope": ["regional"], "batch_size": [2]},
                                measure={"backend": "inductor", "warm_compile": True}))
    (trial,) = [t for t in expand(spec)[0] if t.mode != "eager"]
    payload = {"trial": trial.to_dict(), "device": "cpu", "process_start": "forkserver", "import_path": [str(REPO)]}
    row = isolate.run_trial(payload, max_retries=0)
    assert row["status"] == "ok", row["error"]
    assert (row["scope"], row["compiled_regions"], row["region_classes"], row["graphs"]) == ("regional", 2,
                                                                                             "BertLayer", 1)
    assert row["megacache_bytes"] > 0 and row["warm_megacache_s"] > 0 and row["megacache_load_s"] > 0
    assert "megacache_process" in json.loads(row["phase_s_json"])
    state = SweepState.open(spec, tmp_path / "results", resume=False)
    state.add(trial, row)
    assert (tmp_path / "results" / "megacache" / f"{trial.trial_id}.bin").stat().st_size == row["megacache_bytes"]
    out = tmp_path / "export"
    # on two shared CPU cores eager may well win; the trial is exported by its id
    assert run_cli(["export", str(tmp_path / "results"), "--model", "bert-tiny", "--trial", trial.trial_id,
                    "-o", str(out)]) == 0
    loaded = _first_call(out, "artifact")
    cold = _first_call(out, "cold")
    log.warning("first call: %.2f s from the artifact, %.2f s cold; trial: cold compile %.2f s, warm from cache "
                "dir %.2f s, warm from artifact %.2f s (+%.2f s load), artifact %d bytes", loaded["first_call_s"],
                cold["first_call_s"], row["compile_s"], row["warm_compile_s"], row["warm_megacache_s"],
                row["megacache_load_s"], row["megacache_bytes"])
    assert loaded["fx_graph_cache_hits"] >= 1 and loaded["fx_graph_cache_misses"] == 0  # inductor's compile skipped
    assert cold["fx_graph_cache_hits"] == 0 and cold["fx_graph_cache_misses"] >= 1
    assert loaded["artifact"] and not cold["artifact"] and loaded["device"] == "cpu"
    one_at_a_time = loaded["ended_at"] <= cold["started_at"] or cold["ended_at"] <= loaded["started_at"]
    assert loaded["pid"] != cold["pid"] and one_at_a_time  # each its own process, never beside the other
