"""The aoti path on the CPU, for real: export and package in one process, load and measure in a fresh
one; an export refusal named with torch's reason; a loading process that dies is a crashed row that
keeps the build's figures; a package whose library carries its own libstdc++ fails to load with
the cause named."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from sweeper.run import isolate
from sweeper.run.state import SweepState
from sweeper.spec.sweep_spec import parse_spec
from sweeper.spec.trials import expand
from tests.helpers import IMPORT_PATH, run_cli, static_gxx, tiny_spec

_TENSOR = {"kind": "tensor", "shape": [8]}


def _spec(factory: str):
    return parse_spec(tiny_spec(models=[{"name": "m", "factory": factory, "input": _TENSOR}],
                                axes={"mode": ["default"], "path": ["aoti"], "batch_size": [4]},
                                measure={"backend": "inductor"}))


def _run(factory: str, keep_package: bool = False) -> dict:
    (trial,) = expand(_spec(factory))[0]
    row = isolate.run_trial({"trial": trial.to_dict(), "device": "cpu", "process_start": "subprocess",
                             "import_path": list(IMPORT_PATH)}, max_retries=0)
    if not keep_package:
        row.pop("_aoti_b64", None)
    return row


@pytest.fixture(scope="module")
def ok_row() -> dict:
    """One real AOTInductor build of a tiny linear model (tens of seconds on 2 cores), shared."""
    return _run("faulty_models:make_ok", keep_package=True)


def test_aoti_combinations_that_cannot_run_are_dropped_with_a_reason():
    spec = parse_spec(tiny_spec(axes={"mode": ["eager", "default", "reduce-overhead"], "path": ["jit", "aoti"],
                                      "phase": ["infer", "train"]}, measure={"backend": "inductor"}))
    trials, dropped = expand(spec)
    aoti = [t for t in trials if t.path == "aoti"]
    assert [(t.mode, t.phase) for t in aoti] == [("default", "infer")]
    reasons = {d.reason for d in dropped}
    assert "path 'aoti' packages inference only" in reasons
    assert any(r.startswith("path 'aoti' runs without CUDA graphs") for r in reasons)
    assert {t.trial_id for t in trials if t.path == "jit"} == {t.trial_id for t in expand(parse_spec(tiny_spec(
        axes={"mode": ["eager", "default", "reduce-overhead"], "phase": ["infer", "train"]},
        measure={"backend": "inductor"})))[0]}


def test_a_cpu_check_that_raises_is_a_named_runtime_error(monkeypatch):
    """Fault injection: inductor's CPU check, run before the timed load, raising (the loader would
    meet it too) ends the load process as a runtime_error that names the check."""
    import torch._inductor.cpu_vec_isa as vec_isa

    from sweeper.measure import aoti
    from sweeper.measure.failures import TrialFailed

    def broken():
        raise OSError("no C++ compiler")

    monkeypatch.setattr(vec_isa, "pick_vec_isa", broken)
    with pytest.raises(TrialFailed, match=r"^inductor's CPU check \(run by aoti_load_package\): OSError: no C"):
        aoti.cpu_isa_check_s()


@pytest.mark.slow
def test_an_aoti_trial_builds_loads_in_a_fresh_process_and_is_measured(ok_row):
    row = ok_row
    assert row["status"] == "ok", row["error"]
    assert row["aoti_export_s"] > 0 and row["aoti_package_s"] > 0 and row["aoti_package_bytes"] > 0
    assert row["compile_s"] == pytest.approx(row["aoti_export_s"] + row["aoti_package_s"])
    assert row["aoti_load_s"] > 0 and row["first_call_s"] > 0
    assert row["aoti_isa_check_s"] > 0  # inductor's CPU check, timed apart from the load it would slow
    assert row["throughput_items_s"] > 0 and row["eager_throughput_items_s"] > 0 and row["speedup_ci_low"] > 0
    assert row["accuracy_ok"] and row["compiled_err_vs_fp64"] is not None and row["peak_mem_gib"] > 0
    assert json.loads(row["inductor_options_json"]) == {}


@pytest.mark.slow
def test_the_kept_package_is_exported_and_loads_in_a_fresh_process(ok_row, tmp_path):
    spec = _spec("faulty_models:make_ok")
    (trial,) = expand(spec)[0]
    state = SweepState.open(spec, tmp_path / "results", resume=False)
    state.add(trial, dict(ok_row))
    kept = tmp_path / "results" / "aoti" / f"{trial.trial_id}.pt2"
    assert kept.stat().st_size == ok_row["aoti_package_bytes"]
    assert run_cli(["export", str(tmp_path / "results"), "--model", "m", "--trial", trial.trial_id,
                    "-o", str(tmp_path / "export")]) == 0
    code = "import torch, load_package; print(tuple(load_package.load_model()(torch.randn(4, 8)).shape))"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path / "export", capture_output=True, text=True,
                         timeout=300, check=True)
    assert out.stdout.strip().splitlines()[-1] == "(4, 8)"
    assert json.loads((tmp_path / "export" / "versions.json").read_text())["batch_size"] == 4
    assert "of inductor's CPU check, which compiles test programs once per inductor cache directory" in \
        (tmp_path / "export" / "README.md").read_text()


@pytest.mark.slow
def test_an_export_refusal_is_an_export_error_with_torch_s_reason():
    row = _run("aoti_models:make_branchy")
    assert row["status"] == "export_error"
    assert row["error"].startswith("aoti build: torch.export refused the model:")
    assert "data" in row["error"].lower()  # torch names the data-dependent branch


@pytest.mark.slow
def test_a_loading_process_that_segfaults_is_a_crashed_row_with_the_build_kept():
    row = _run("aoti_models:make_crash_on_run")
    assert row["status"] == "crashed"
    assert "aoti load (fresh process)" in row["error"] and "SIGSEGV" in row["error"]
    # it died in its eager arm, before the load began: the error does not blame torch's loader
    assert "aoti_load_package" not in row["error"]
    assert row["aoti_package_bytes"] > 0 and row["aoti_package_s"] > 0


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_a_host_compiler_that_links_its_own_libstdcxx_is_replaced_and_the_package_loads(tmp_path, monkeypatch):
    """Fault injection as a GPU host's toolchain does it: its environment names in CXX a g++ that links
    libstdc++ into every shared object, which would put a second C++ runtime in the package's library
    (its constructor's std::regex then fails beside torch's libstdc++). The build takes another
    compiler and says so. (The same compiler first on PATH with CXX unset: tests/measure/
    test_cxx_runtime.py; where no other compiler is found, a failed load names it:
    tests/run/test_aoti_runs.py.)"""
    static = static_gxx(tmp_path / "bin")
    monkeypatch.setenv("CXX", static)
    row = _run("faulty_models:make_ok")
    assert row["status"] == "ok", row["error"]
    assert row["aoti_cxx_replaced"] == static and row["aoti_cxx"] not in (None, static)
    assert row["aoti_load_s"] > 0 and row["throughput_items_s"] > 0
