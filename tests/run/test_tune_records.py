"""What Tune keeps of a real sweep (local Ray, CPU): each trial's flat metrics and named
parameters in Tune's own result files and TensorBoard events under RESULTS/tune (or --storage),
the same numbers as the Parquet rows; and a real search sweep on Tune's OptunaSearch."""

from __future__ import annotations

import base64
import importlib.util
import json
import math
import random
import struct
from pathlib import Path

import pandas as pd
import pytest

from sweeper.results.store import read_results
from sweeper.run.search import PARAMS, STATUS_CODES
from tests.helpers import run_cli, tiny_spec, write_spec

AXES = {"mode": ["eager", "default"], "dynamic": [False, True], "batch_size": [2], "seq_len": [16, 1024]}


def _tune_trials(storage: Path) -> dict[str, dict]:
    """Trial dir name -> {"params": params.json, "result": last line of result.json, "files": names}."""
    found = {}
    for result in storage.glob("run-*/*/result.json"):
        lines = result.read_text().splitlines()
        found[result.parent.name] = {"params": json.loads((result.parent / "params.json").read_text()),
                                     "result": json.loads(lines[-1]),
                                     "files": {p.name.split(".")[0] for p in result.parent.iterdir()}}
    return found


@pytest.fixture(scope="module")
def grid_sweep(ray_local, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tune")
    spec = write_spec(tmp, tiny_spec("tune", axes=AXES))
    code = run_cli(["run", str(spec), "--results", str(tmp / "out"), "--no-report"])
    return tmp / "out", code


@pytest.mark.slow  # a real Ray sweep (the module's grid)
def test_tune_result_files_hold_each_rows_metrics_and_params(grid_sweep):
    out, code = grid_sweep
    assert code == 0
    rows = read_results([out / "results.parquet"]).set_index("trial_id")
    tune = _tune_trials(out / "tune")
    assert sorted(tune) == sorted(rows.index)  # seq_len 1024 > bert-tiny's 512 positions: never a trial
    for tid, t in tune.items():
        row = rows.loc[tid]
        assert set(t["params"]) == {*PARAMS, "trial_id"} and t["params"]["trial_id"] == tid
        assert t["params"]["mode"] == row["mode"] and t["params"]["batch_size"] == row["batch_size"]
        assert t["params"]["seq_len"] == 16 and t["params"]["dynamic"] == str(row["dynamic"]).lower()
        assert t["result"]["status_code"] == STATUS_CODES[row["status"]] == 0
        for metric in ("throughput_items_s", "speedup_vs_eager", "peak_mem_gib", "trial_wall_s"):
            assert t["result"][metric] == pytest.approx(row[metric], rel=1e-9), metric
        compile_s = t["result"]["compile_s"]
        assert math.isnan(compile_s) if row["mode"] == "eager" else compile_s == pytest.approx(row["compile_s"])
        measured = json.loads(t["result"]["row_json"])  # the row itself still travels to the driver
        assert measured["throughput_items_s"] == row["throughput_items_s"] and measured["node_id"] == row["node_id"]
        assert {"events", "progress", "result", "params"} <= t["files"]  # TensorBoard, CSV and JSON loggers


def _event_tags(path: Path) -> set[str]:
    """Scalar and HParams tags of a TensorBoard events file (TFRecord framing: length, crc, data, crc)."""
    from tensorboardX.proto.event_pb2 import Event

    data, tags, at = path.read_bytes(), set(), 0
    while at < len(data):
        (length,) = struct.unpack_from("<Q", data, at)
        event = Event.FromString(data[at + 12:at + 12 + length])
        tags |= {v.tag for v in event.summary.value}
        at += 12 + length + 4
    return tags


@pytest.mark.slow  # a real Ray sweep (the module's grid)
def test_tensorboard_events_carry_the_metrics_and_hparams(grid_sweep):
    out, _ = grid_sweep
    for events in (out / "tune").glob("run-*/*/events.out.tfevents.*"):
        tags = _event_tags(events)
        assert {"ray/tune/throughput_items_s", "ray/tune/status_code", "_hparams_/session_start_info"} <= tags


@pytest.mark.slow
def test_optuna_search_measures_baselines_and_its_budget_only(ray_local, tmp_path):
    axes = {**AXES, "dynamic": [None, False, True]}
    spec = write_spec(tmp_path, tiny_spec("search", axes=axes, search={"algorithm": "optuna", "max_trials": 2,
                                                                        "seed": 1}))
    storage = (tmp_path / "elsewhere").as_uri()
    assert run_cli(["run", str(spec), "--results", str(tmp_path / "out"), "--no-report",
                    "--storage", storage]) == 0
    df = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert sorted(df["mode"]) == ["default", "default", "eager"] and (df.status == "ok").all()
    assert df.trial_id.is_unique and (df.seq_len == 16).all()
    assert sorted(_tune_trials(tmp_path / "elsewhere")) == sorted(df.trial_id)
    assert not (tmp_path / "out" / "tune").exists()


@pytest.mark.slow
@pytest.mark.parametrize(("flags", "message"), [
    (["--storage", "nosuchscheme://bucket/x"], "--storage nosuchscheme://bucket/x: "),
    (["--callback", "mlflow"], "--callback mlflow needs the mlflow package: pip install mlflow"),
])
def test_bad_storage_or_missing_logger_fails_in_one_line(ray_local, tmp_path, capsys, flags, message):
    if "mlflow" in flags and importlib.util.find_spec("mlflow") is not None:
        pytest.skip("mlflow is installed here")
    spec = write_spec(tmp_path, tiny_spec("bad"))
    assert run_cli(["run", str(spec), "--results", str(tmp_path / "out"), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"sweeper: error: {message}") and "\n" not in err
    assert not (tmp_path / "out" / "results.parquet").exists()


@pytest.mark.slow
def test_large_files_reach_the_results_directory_and_never_tune_records(ray_local, tmp_path):
    """The real runner on the session's Ray, with only the measuring replaced: each compiled trial's
    artifact (3 MiB) and trace (1 MiB) are files beside the results that the rows name, written before
    the row landed, and nothing Tune keeps (RESULTS/tune) holds them."""
    from sweeper.results.traces import PACKED_KEY
    from sweeper.run import ray_tune as runner
    from sweeper.run.artifacts import B64_KEY
    from sweeper.run.state import SweepState
    from sweeper.spec.sweep_spec import load_spec
    from sweeper.spec.trials import expand

    def measure(payload: dict, max_retries: int = 1) -> dict:
        import base64
        import random

        tid, row = payload["trial"]["trial_id"], {"status": "ok", "error": None, "throughput_items_s": 1.0}
        if payload["trial"]["mode"] != "eager":
            rng = random.Random(tid)
            row[B64_KEY] = base64.b64encode(rng.randbytes(3 * 2**20)).decode()
            row[PACKED_KEY] = base64.b64encode(rng.randbytes(2**20)).decode()
        return row

    spec = load_spec(write_spec(tmp_path, tiny_spec("big", axes={"dynamic": [False, True]})))
    trials, _ = expand(spec)
    state = SweepState.open(spec, tmp_path / "out", resume=False)
    state.claim()
    state.save_manifest()
    assert runner.run_sweep(state, trials, "cpu", _measure=measure) == []
    state.close()
    rows = read_results([tmp_path / "out"]).set_index("trial_id")
    compiled = [t.trial_id for t in trials if t.mode != "eager"]
    assert len(compiled) == 2 and rows.megacache_file.notna().sum() == rows.trace_bytes.notna().sum() == 2
    slices = []
    for tid in compiled:
        rng = random.Random(tid)
        artifact, trace = rng.randbytes(3 * 2**20), rng.randbytes(2**20)
        assert rows.loc[tid, "megacache_file"] == f"megacache/{tid}.bin"
        assert (tmp_path / "out" / rows.loc[tid, "megacache_file"]).read_bytes() == artifact
        assert (tmp_path / "out" / "traces" / f"{tid}.log.gz").read_bytes() == trace
        assert rows.loc[tid, "trace_bytes"] == len(trace)
        slices += [base64.b64encode(artifact[3000:3300]), base64.b64encode(trace[3000:3300])]
    tune_files = [p for p in (tmp_path / "out" / "tune").rglob("*") if p.is_file()]
    assert tune_files and max(p.stat().st_size for p in tune_files) < 256 * 2**10
    assert not [p for p in tune_files for s in slices if s in p.read_bytes()]


@pytest.mark.slow  # a real Ray sweep each
@pytest.mark.parametrize(("logs", "kept"), [(("json",), {"result", "params"}), ((), set())])
def test_tune_logs_keeps_only_the_records_asked_for(ray_local, tmp_path, logs, kept):
    """`--tune-logs json` keeps result.json and params.json, no CSV or TensorBoard events; `none`
    no per-trial record at all; the rows are whole either way."""
    from sweeper.run import ray_tune as runner
    from sweeper.run.state import SweepState
    from sweeper.spec.sweep_spec import load_spec
    from sweeper.spec.trials import expand

    def measure(payload: dict, max_retries: int = 1) -> dict:
        return {"status": "ok", "error": None, "throughput_items_s": float(payload["trial"]["batch_size"])}

    spec = load_spec(write_spec(tmp_path, tiny_spec("logs", axes={"mode": ["eager"], "batch_size": [1, 2, 3]})))
    trials, _ = expand(spec)
    state = SweepState.open(spec, tmp_path / "out", resume=False)
    state.claim()
    state.save_manifest()
    assert runner.run_sweep(state, trials, "cpu", tune_logs=logs, _measure=measure) == []
    state.close()
    rows = read_results([tmp_path / "out"])
    assert sorted(rows.throughput_items_s) == [1.0, 2.0, 3.0]
    trial_dirs = [d for d in (tmp_path / "out" / "tune").glob("run-*/*") if d.is_dir()]
    records = {p.name.split(".")[0] for d in trial_dirs for p in d.iterdir()}
    assert records == kept


@pytest.mark.parametrize(("value", "expected"), [("all", ("json", "csv", "tensorboard")), ("none", ()),
                                             ("tensorboard, json", ("json", "tensorboard"))])
def test_tune_logs_option_words(value, expected):
    from sweeper.run.options import tune_logs

    assert tune_logs(value) == expected


@pytest.mark.parametrize("value", ["jsn", "", "none,json"])
def test_tune_logs_option_refuses_other_words(value):
    from sweeper.run.options import tune_logs
    from sweeper.run.state import SweepError

    with pytest.raises(SweepError, match=f"--tune-logs {value!r}: expected all, none or"):
        tune_logs(value)
