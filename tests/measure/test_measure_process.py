"""One trial measured for real on the CPU: in-process (no Ray) and in isolated processes."""

from __future__ import annotations

import json
import math

import pytest

from sweeper.measure import matching
from sweeper.measure import process as measure
from sweeper.run import isolate
from sweeper.spec.sweep_spec import parse_spec
from sweeper.spec.trials import expand
from tests.helpers import REPO, tiny_spec


def _trial(**overrides):
    trials, _ = expand(parse_spec(tiny_spec(**overrides)))
    return trials


def _payload(trial):
    return {"trial": trial.to_dict(), "device": "cpu"}


def test_compiled_inference_row_has_every_measurement(tmp_path):
    eager, compiled = _trial()
    assert (eager.mode, compiled.mode) == ("eager", "default")
    row = measure.run(_payload(compiled), tmp_path / "row.json")
    assert row["status"] == "ok", row["error"]
    assert json.loads((tmp_path / "row.json").read_text())["status"] == "ok"  # emitted to disk
    for key in ("throughput_items_s", "eager_throughput_items_s", "latency_p50_ms", "latency_p99_ms",
                "peak_mem_gib", "peak_mem_compile_gib", "eager_peak_mem_gib", "first_call_s"):
        assert row[key] > 0, key
    assert row["latency_p50_ms"] <= row["latency_p90_ms"] <= row["latency_p99_ms"]
    assert compiled.measure.windows <= row["timed_windows"] <= 3 * compiled.measure.windows
    assert row["iters_per_window"] >= 2
    assert row["throughput_tokens_s"] == pytest.approx(row["throughput_items_s"] * 16)
    assert row["speedup_vs_eager"] == pytest.approx(row["throughput_items_s"] / row["eager_throughput_items_s"])
    assert row["graphs"] >= 1 and row["recompiles"] == 0 and row["recompile_limit_hit"] is False
    assert row["accuracy_ok"] is True and row["rel_err"] <= row["accuracy_tol"]
    assert row["compile_s"] <= row["first_call_s"]
    assert row["break_even_iters"] > 0 or math.isinf(row["break_even_iters"])
    assert row["device_type"] == "cpu" and row["torch_version"]
    assert row["setup_s"] > 0  # in-process here: the pytest process started long before
    assert list(json.loads(row["phase_s_json"])) == ["imports", "env", "build", "reference", "eager", "compiled"]


def test_compiled_and_eager_windows_alternate_and_the_row_uses_the_alternated_eager(tmp_path, monkeypatch):
    _, compiled = _trial()
    calls = []
    real = matching.run_matched

    def spy(arms, windows, *rules):
        matched = real(arms, windows, *rules)
        calls.append((len(arms), matched))
        return matched

    monkeypatch.setattr(matching, "run_matched", spy)
    row = measure.run(_payload(compiled), tmp_path / "row.json")
    assert row["status"] == "ok", row["error"]
    (_, (n_arms, matched)) = calls  # eager alone first, then eager and compiled alternated
    assert n_arms == 2
    eager, timed = matched.headline(0), matched.headline(1)  # the pairs at the host's fast state
    assert row["eager_throughput_items_s"] == pytest.approx(eager.throughput(2))
    assert row["throughput_items_s"] == pytest.approx(timed.throughput(2))
    assert row["matched_pairs"] == len(timed.window_s) >= min(5, len(matched.arms[1].window_s))
    assert row["host_state"] in ("fast", "slow") and row["witness_ref_ms"] > 0
    assert row["speedup_all_windows"] == pytest.approx(matching.speedup(*matched.arms))
    windows = json.loads(row["windows_json"])
    assert len(windows["compiled_s_per_iter"]) == len(windows["eager_witness_ms"]) == len(matched.arms[0].window_s)


def test_eager_row_is_its_own_baseline(tmp_path):
    eager, _ = _trial()
    row = measure.run(_payload(eager), tmp_path / "row.json")
    assert row["status"] == "ok"
    assert row["speedup_vs_eager"] == 1.0 and row.get("compile_s") is None
    assert row["throughput_items_s"] == row["eager_throughput_items_s"]
    assert row["graphs"] == 0


def test_bad_factory_result_is_a_runtime_error_row(tmp_path):
    (trial,) = [t for t in _trial(models=[{"name": "m", "factory": "json:dumps", "kwargs": {"obj": 1}}])
                if t.mode == "eager"]
    row = measure.run(_payload(trial), tmp_path / "row.json")
    assert row["status"] == "runtime_error"
    assert "returned str, not an nn.Module" in row["error"]


def test_every_model_is_built_on_the_trials_device_and_a_factory_that_cannot_on_the_host():
    import torch

    from sweeper.measure.workbench import build_bundle
    from sweeper.zoo.sources import build_placed

    def eager_trial(factory: str):
        (trial,) = [t for t in _trial(models=[{"name": "m", "factory": factory, "input": {"kind": "tensor",
                                                                                          "shape": [8]}}])
                    if t.mode == "eager"]
        return trial

    zoo_trial, factory_trial = _trial()[0], eager_trial("faulty_models:make_ok")
    meta = torch.device("meta")  # no storage: a parameter there was created there, not moved
    for trial in (zoo_trial, factory_trial):
        bundle, place = build_placed(trial.model, meta)
        assert {p.device.type for p in bundle.model.parameters()} == {"meta"} and place == "device"
    # a factory whose code cannot run under the device (numpy reads a tensor it drew): built on the host,
    # the same weights as a host build (the failed try drew from the host's generator before it failed)
    numpy_model = eager_trial("faulty_models:make_numpy_scaled").model
    torch.manual_seed(0)
    bundle, place = build_placed(numpy_model, meta)
    assert {p.device.type for p in bundle.model.parameters()} == {"cpu"}
    assert place.startswith("host: failed under meta (TypeError: can't convert meta device type tensor to numpy")
    torch.manual_seed(0)
    host_built = build_placed(numpy_model)[0].model.state_dict()
    assert all(torch.equal(v, host_built[k]) for k, v in bundle.model.state_dict().items())
    assert torch.get_default_device().type == "cpu"  # the build's default device does not leak
    assert build_placed(factory_trial.model, torch.device("cpu"))[1] == build_placed(factory_trial.model)[1] == "host"
    # on the host, the same weights as a build without a device
    for trial in (zoo_trial, factory_trial):
        torch.manual_seed(0)
        plain = build_bundle(trial).model.state_dict()
        torch.manual_seed(0)
        on_cpu = build_bundle(trial, torch.device("cpu")).model.state_dict()
        assert all(torch.equal(plain[k], on_cpu[k]) for k in plain)


def test_a_row_says_where_its_model_was_built(tmp_path):
    row = measure.run(_payload(_trial()[0]), tmp_path / "row.json")
    assert row["status"] == "ok", row["error"]
    assert row["model_built_on"] == "host"  # a CPU trial


@pytest.mark.slow
def test_inductor_cold_then_warm_compile_in_fresh_processes():
    """A real inductor compile in a fresh cache, then again in a new process reusing it."""
    (trial,) = [t for t in _trial(measure={"backend": "inductor", "warm_compile": True}) if t.mode == "default"]
    row = isolate.run_trial(_payload(trial), max_retries=0)
    assert row["status"] == "ok", row["error"]
    assert row["attempts"] == 1
    assert row["compile_s"] > 1.0  # codegen + C++ compile of the generated kernels
    assert 0 < row["warm_compile_s"] < row["compile_s"]  # the FX graph cache served the second process
    steady_s = row["first_call_s"] - row["compile_s"]  # the cold process's step, which compile_s left out
    assert row["warm_compile_s"] == pytest.approx(row["warm_first_call_s"] - steady_s)
    assert row["accuracy_ok"] and row["graphs"] == 1
    assert row["trial_wall_s"] > row["compile_s"] + row["setup_s"]
    phases = json.loads(row["phase_s_json"])
    assert [k for k in phases if not k.startswith(("warm.", "megacache."))] == [
        "imports", "env", "build", "reference", "eager", "compiled", "cold_process", "warm_process",
                                                                                "megacache_process"]
    for tag in ("warm", "megacache"):
        own = {k: v for k, v in phases.items() if k.startswith(f"{tag}.")}
        assert list(own) == [f"{tag}.{k}" for k in ("imports", "env", "build", "compiled", "exit")]
        assert sum(own.values()) == pytest.approx(phases[f"{tag}_process"], abs=0.05)  # its own phases, then exit
    inside = sum(phases[k] for k in ("imports", "env", "build", "reference", "eager", "compiled"))
    assert row["setup_s"] == pytest.approx(sum(phases[k] for k in ("imports", "env", "build")), abs=0.05)
    assert phases["compiled"] > row["compile_s"] and inside <= phases["cold_process"] + 0.05
    assert phases["cold_process"] + phases["warm_process"] < row["trial_wall_s"]


@pytest.mark.slow
def test_megacache_warm_start_can_be_skipped_and_the_artifact_is_still_kept():
    """Measured in processes started as new interpreters (not forked from the fork server): the
    artifact such a cold process saves is kept for export as the forked one's is."""
    (trial,) = [t for t in _trial(measure={"backend": "inductor", "warm_compile": True, "megacache_warm_start": False})
                if t.mode == "default"]
    row = isolate.run_trial({**_payload(trial), "process_start": "subprocess", "import_path": [str(REPO)]},
                            max_retries=0)
    assert row["status"] == "ok", row["error"]
    phases = json.loads(row["phase_s_json"])
    assert "warm_process" in phases and "megacache_process" not in phases
    assert row["warm_compile_s"] > 0 and row.get("warm_megacache_s") is None
    assert row["megacache_bytes"] > 0 and row.get("_megacache_b64")  # saved by the cold process, for export


def test_compile_threads_reach_the_measuring_process(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    env = isolate._child_env(tmp_path, [], {"compile_threads": 3}, None)
    assert env["TORCHINDUCTOR_COMPILE_THREADS"] == "3"
    assert env["TORCHINDUCTOR_CACHE_DIR"].startswith(str(tmp_path))
    assert "TORCHINDUCTOR_COMPILE_THREADS" not in isolate._child_env(tmp_path, [], {}, None)
    pinned = isolate._child_env(tmp_path, [], {}, [0, 1])  # a pinned trial's workers follow its share
    assert pinned["TORCHINDUCTOR_COMPILE_THREADS"] == "2" and pinned["OMP_NUM_THREADS"] == "2"



def test_the_measuring_process_does_not_load_the_parquet_stack_or_ray(tmp_path):
    """Every trial pays its measuring process's imports: it writes its row as JSON and needs
    neither pandas nor pyarrow (half a second) nor Ray."""
    import subprocess
    import sys

    (eager, _) = _trial(models=[{"name": "resnet18-tiny"}])
    (tmp_path / "trial.json").write_text(json.dumps(_payload(eager)))
    script = f"""
import json, sys
from pathlib import Path
from sweeper.measure import matching, pipeline
from sweeper.measure import process as measure
d = Path({str(tmp_path)!r})
row = measure.run(json.loads((d / "trial.json").read_text()), d / "row.json")
print(json.dumps({{"status": row["status"], "loaded": [m for m in ("pandas", "pyarrow", "ray") if m in sys.modules]}}))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == {"status": "ok", "loaded": []}
    assert json.loads((tmp_path / "row.json").read_text())["status"] == "ok"


@pytest.mark.parametrize(("first_line", "version"), [
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22)  "
     "Thu Oct  2 2025", "580.159.04"),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023", "535.104.05"),
    ("NVRM version: NVIDIA UNIX aarch64 Kernel Module  550.54  Tue Feb 20 2024", "550.54"),
    ("something else entirely 1.2.3", None),
    ("", None),
])
def test_driver_version_from_the_kernel_module_proc_entry(first_line, version):
    from sweeper import envinfo

    assert envinfo.parse_proc_version(first_line + "\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0)\n") == version


def test_driver_version_falls_back_to_nvidia_smi(tmp_path, monkeypatch):
    from sweeper import envinfo

    (tmp_path / "version").write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19\n")
    monkeypatch.setattr(envinfo, "_PROC_VERSION", tmp_path / "version")
    assert envinfo.driver_version() == "535.104.05"
    smi = tmp_path / "bin" / "nvidia-smi"  # a stand-in executable: this machine has no driver
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\necho 580.159.04\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}:/usr/bin:/bin")
    monkeypatch.setattr(envinfo, "_PROC_VERSION", tmp_path / "missing")
    assert envinfo.driver_version() == "580.159.04"


def test_a_warm_run_subtracts_the_cold_step_it_is_given_and_times_one_otherwise(tmp_path):
    _, compiled = _trial()
    given = measure.run({**_payload(compiled), "steady_step_s": 1e-3}, tmp_path / "a.json", warm=True)
    assert given["status"] == "ok", given["error"]
    assert given["warm_compile_s"] == pytest.approx(given["warm_first_call_s"] - 1e-3)
    timed = measure.run(_payload(compiled), tmp_path / "b.json", warm=True)
    assert timed["status"] == "ok", timed["error"]
    assert 0 <= timed["warm_compile_s"] < timed["warm_first_call_s"]
    assert timed["warm_compile_s"] != pytest.approx(timed["warm_first_call_s"] - 1e-3, abs=1e-9)
