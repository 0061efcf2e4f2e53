"""benchmarks/train_step_check.py: the plain training loop beside the tool's, on this CPU, tiny.

The fast tests check the command line and the table without starting torch; the slow ones run
the real script (fresh processes per variant, dynamo with the eager backend, the tool's own
measuring process) and a real fault: a measuring process killed at its time limit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import train_step_check as check

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, *args: str, timeout: float = 600) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "out.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}  # one thread: a 2-core host shared
    done = subprocess.run([sys.executable, "-m", "benchmarks.train_step_check", "--device", "cpu", "--smoke",
                           "--backend", "eager", "--out", str(out), *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False, cwd=REPO)
    return done, json.loads(out.read_text()) if out.exists() else {}


@pytest.mark.parametrize(("args", "says"), [
    (["--setting", "resnet99:fp32:default"], "no zoo model 'resnet99'"),
    (["--setting", "resnet18:fp16:default"], "precision one of fp32, bf16"),
    (["--setting", "resnet18-default"], "expected MODEL:PRECISION:MODE"),
    (["--variants", "plain,sampler,bogus"], "unknown bogus"),
    (["--pairs", "0"], "--pairs 0: must be at least 1"),
])
def test_bad_input_is_one_line_and_exits_nonzero(capsys, args, says):
    assert check.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err, err


def test_setting_defaults_to_the_smoke_model_and_checks_names():
    assert check.parse_setting("bf16:reduce-overhead", "vit_tiny") == {"model": "vit_tiny", "precision": "bf16",
                                                                       "mode": "reduce-overhead"}
    args = check.parse_args(["--smoke", "--device", "cpu"])
    assert args.settings == [{"model": "vit-tiny", "precision": "fp32", "mode": "default"}]
    assert (args.batch, args.pairs, args.iters) == (2, 2, 2) and "sweep" not in args.variant_list


def test_table_compares_each_variant_with_the_plain_loop():
    results = [{"variant": "plain", "eager_ms_median": 13.5, "compiled_ms_median": 10.0, "speedup": 1.35,
                "probe_ms_median": 1.2},
               {"variant": "pipeline", "eager_ms_median": 13.9, "compiled_ms_median": 14.5, "speedup": 0.95,
                "probe_ms_median": None},
               {"variant": "sampler", "error": "RuntimeError: boom"}]
    lines = check.table("label", results).splitlines()
    assert lines[0] == "label" and lines[1].split()[:3] == ["variant", "eager", "ms"]
    assert lines[3].split() == ["pipeline", "13.90", "14.50", "0.950", "-", "+45.0%", "-", "-", "-", "-"]
    assert lines[4].split()[0] == "sampler" and lines[4].endswith("RuntimeError: boom")


def test_fast_state_compares_plain_and_tool_windows_at_the_host_s_fast_cpu_state():
    # plain: probes before eager, compiled, eager, ...; the slow windows (probe 2.0 against 1.0) run slower
    plain = {"variant": "plain", "eager_ms": [13.0, 13.2, 13.1, 13.0], "compiled_ms": [8.0, 12.0, 8.2, 12.4],
             "probe_ms": [1.0, 1.0, 2.0, 2.0, 1.1, 1.1, 2.1, 2.0], "eager_ms_median": 13.05,
             "compiled_ms_median": 10.1, "speedup": 1.29}
    f = check.fast_state(plain)
    assert f["compiled_fast_ms"] == pytest.approx(8.1) and f["eager_fast_ms"] == pytest.approx(13.05)
    assert f["fast_windows_pct"] == pytest.approx(50.0)
    windows = {"ref_ms": 1.0, "eager_s_per_iter": [0.013, 0.0131], "compiled_s_per_iter": [0.0081, 0.0125],
               "eager_witness_ms": [1.1, 1.0], "compiled_witness_ms": [1.2, 1.9]}
    tool = {"variant": "pipeline", "eager_ms_median": 13.05, "compiled_ms_median": 8.1, "speedup": 1.61,
            "row_windows_json": json.dumps(windows)}
    t = check.fast_state(tool)
    assert t["compiled_fast_ms"] == pytest.approx(8.1) and t["fast_windows_pct"] == pytest.approx(75.0)
    assert check.fast_state({"variant": "sweep", "compiled_ms_median": 9.0}) == {}
    line = check.table("label", [plain, tool]).splitlines()[3].split()
    assert line[0] == "pipeline" and line[-1] == "+0.0%"


def test_show_prints_the_tables_of_saved_runs_and_refuses_a_bad_file(tmp_path, capsys):
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps({"settings": [{"label": "resnet18 train", "results": [
        {"variant": "plain", "eager_ms_median": 13.5, "compiled_ms_median": 10.0, "speedup": 1.35}]}]}))
    assert check.main(["--show", str(saved)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "resnet18 train"
    (tmp_path / "bad.json").write_text("{")
    assert check.main(["--show", str(tmp_path / "bad.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad.json" in err


def test_trial_cpus_is_none_where_a_trial_would_hold_the_whole_host():
    total = len(os.sched_getaffinity(0))
    assert check.trial_cpus(None, "cpu") == (None, total)
    if total >= 2:
        pinned, threads = check.trial_cpus(1, "cuda")
        assert threads == 1 and len(pinned) >= 1  # one whole core (its SMT siblings with it)


@pytest.mark.slow
def test_smoke_run_times_plain_tool_and_the_steps_between(tmp_path):
    variants = "plain,tool_step,tool_timing,markers,hooks,health,restored,pipeline"
    done, doc = _run(tmp_path, "--variants", variants)
    assert done.returncode == 0, done.stderr[-2000:]
    (entry,) = doc["settings"]
    results = {r["variant"]: r for r in entry["results"]}
    assert list(results) == variants.split(",")
    for name, r in results.items():
        assert "error" not in r, (name, r)
        assert r["eager_ms_median"] > 0 and r["compiled_ms_median"] > 0, (name, r)
        assert r["speedup"] == pytest.approx(r["eager_ms_median"] / r["compiled_ms_median"], rel=0.2), (name, r)
    for name in ("plain", "tool_step", "markers", "hooks", "health", "restored"):
        assert len(results[name]["eager_ms"]) == len(results[name]["compiled_ms"]) == 2
        assert len(results[name]["probe_ms"]) == 4 and min(results[name]["probe_ms"]) > 0
        assert results[name]["graphs"] >= 1, name  # dynamo compiled the model in that process
    assert len(results["tool_timing"]["compiled_ms"]) == 5  # the trial's own windows (smoke: measure.windows 5)
    assert results["restored"]["accuracy_ok"] is True
    assert 0 <= results["markers"]["host_busy_windows_pct"] <= 100  # counted over its 4 windows (None: never ran)
    assert results["health"]["graph_breaks"] == 0 and results["health"]["graphs"] == 1
    assert results["pipeline"]["row_status"] == "ok"
    assert 5 <= results["pipeline"]["row_timed_windows"] <= 15  # more rounds while the host reads slow
    assert "vit-tiny train fp32 (matmul high) batch 2 default (eager), cpu" in done.stdout
    progress = [line for line in done.stdout.splitlines() if line.startswith("[")]
    assert [line.split()[:3] for line in progress] == [[f"[{i}/8]", "vit-tiny:fp32:default", f"{v}:"]
                                                       for i, v in enumerate(results, 1)]  # one line per variant


@pytest.mark.slow
def test_a_failed_variant_is_a_result_and_the_rest_still_run(tmp_path):
    done, doc = _run(tmp_path, "--variants", "pipeline,plain", "--timeout-s", "2")
    assert done.returncode == 1
    pipeline, plain = doc["settings"][0]["results"]
    assert pipeline["variant"] == "pipeline" and pipeline["error"].startswith("trial timeout:"), pipeline
    assert pipeline["compiled_ms_median"] is None
    assert plain["variant"] == "plain" and "error" not in plain and plain["compiled_ms_median"] > 0
    assert "trial timeout: trial exceeded trial_timeout_s=2" in done.stdout
