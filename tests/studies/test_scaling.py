"""The scaling benchmark's analysis, on hand-made timelines with known answers."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sweeper.results.store import write_rows
from tests.helpers import REPO

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _timeline(path: Path, gpus: int, trial_s: float, gap_s: float, n: int = 8, imports_s: float = 3.0) -> None:
    """`n` trials of `trial_s` each, dealt round-robin to `gpus` GPUs, `gap_s` apart on a GPU."""
    rows = []
    for i in range(n):
        gpu, slot = i % gpus, i // gpus
        start = T0 + timedelta(seconds=slot * (trial_s + gap_s))
        phases = {"imports": imports_s, "build": 1.0, "reference": 0.5, "eager": 2.0, "compiled": trial_s - 8.0,
                  "cold_process": trial_s - 0.5}
        rows.append({"sweep_id": "s", "trial_id": f"t{i}", "model": "m", "mode": "default", "status": "ok",
                     "gpu_uuid": f"GPU-{gpu:08d}", "started_at": start.isoformat(),
                     "finished_at": (start + timedelta(seconds=trial_s)).isoformat(), "trial_wall_s": trial_s,
                     "first_call_s": 1.0, "setup_s": 4.5, "phase_s_json": json.dumps(phases)})
    path.mkdir()
    write_rows(path / "results.parquet", rows)


def test_speedup_efficiency_busy_gap_and_phases(tmp_path: Path) -> None:
    _timeline(tmp_path / "one", gpus=1, trial_s=20.0, gap_s=0.0)
    _timeline(tmp_path / "two", gpus=2, trial_s=20.0, gap_s=5.0)  # 4 slots: 95 s instead of 80 s
    out = subprocess.run([sys.executable, "-m", "studies.scaling.scaling", "analyze",
                          str(tmp_path / "two"), str(tmp_path / "one")], capture_output=True, text=True,
                         check=True, cwd=REPO)
    one, two = json.loads(out.stdout)["runs"]
    assert (one["gpus"], two["gpus"]) == (1, 2)
    assert one["wall_s"] == pytest.approx(160.0) and two["wall_s"] == pytest.approx(95.0)
    assert two["median_gap_s"] == pytest.approx(5.0) and list(two["busy"].values()) == pytest.approx([80 / 95] * 2)
    assert two["median_overhead_s"] == pytest.approx(20.0 - 2.0 - 12.0)  # outside eager + compiled
    assert two["median_outside_measuring_s"] == pytest.approx(20.0 - 2.0 - 12.0 - 0.5)  # and the reference
    assert two["median_phase_s"]["imports"] == 3.0
    md = subprocess.run([sys.executable, "-m", "studies.scaling.scaling", "analyze", "--markdown",
                         str(tmp_path / "one"), str(tmp_path / "two")], capture_output=True, text=True,
                         check=True, cwd=REPO)
    assert "| 2 | 8 (8) | 95 | 5.05 | 1.68x | 0.84 |" in md.stdout
    assert "| imports | build | reference | eager | compiled | cold_process | compile_s | trial_wall_s |" in md.stdout
    # the idle time of the 2-GPU run is all between trials (3 gaps of 5 s on each GPU)
    assert two["idle_s"] == {"00000000": {"head_s": 0.0, "gaps_s": 15.0, "tail_s": 0.0},
                             "00000001": {"head_s": 0.0, "gaps_s": 15.0, "tail_s": 0.0}}
    assert two["replayed_wall_s"] == pytest.approx(80.0) and two["work_ratio"] == pytest.approx(1.0)


def test_the_scaling_spec_is_48_inference_trials_over_vision_and_nlp() -> None:
    from sweeper.spec.sweep_spec import load_spec
    from sweeper.spec.trials import expand

    trials, dropped = expand(load_spec(REPO / "studies" / "scaling" / "scaling.yaml"))
    assert len(trials) >= 48 and not dropped
    assert {t.phase for t in trials} == {"infer"} and {t.task for t in trials} == {"vision", "nlp"}
    assert sum(t.mode == "eager" for t in trials) == len(trials) // 2


def _scaling():
    from studies.scaling import scaling

    return scaling


def test_schedule_hands_each_trial_to_the_first_free_gpu() -> None:
    schedule = _scaling().schedule
    assert schedule([10, 10, 10, 30], gpus=2) == 40  # the long trial goes last, onto one GPU
    assert schedule([30, 10, 10, 10], gpus=2) == 30  # longest first: the short ones fill the other GPU
    assert schedule([5, 7, 9], gpus=1) == 21 and schedule([5, 7, 9], gpus=8) == 9


def test_head_and_tail_idle_per_gpu(tmp_path: Path) -> None:
    rows = []
    for tid, gpu, start, length in (("a", 0, 0, 30), ("b", 1, 2, 10), ("c", 1, 15, 5)):
        s = T0 + timedelta(seconds=start)
        rows.append({"sweep_id": "s", "trial_id": tid, "model": "m", "mode": "eager", "status": "ok",
                     "gpu_uuid": f"GPU-{gpu:08d}", "started_at": s.isoformat(),
                     "finished_at": (s + timedelta(seconds=length)).isoformat(), "trial_wall_s": float(length),
                     "first_call_s": 0.0, "setup_s": 1.0})
    (tmp_path / "r").mkdir()
    write_rows(tmp_path / "r" / "results.parquet", rows)
    run = _scaling().summarize(tmp_path / "r")
    assert run["wall_s"] == 30.0 and run["trial_s_sum"] == 45.0
    assert run["idle_s"]["00000001"] == {"head_s": 2.0, "gaps_s": 3.0, "tail_s": 10.0}
    assert run["busy"]["00000001"] == pytest.approx(0.5) and run["dispatch_order_s"] == [30.0, 10.0, 5.0]


def test_per_trial_slowdown_pairs_trials_and_the_projection_uses_it(tmp_path: Path) -> None:
    _timeline(tmp_path / "one", gpus=1, trial_s=20.0, gap_s=0.0)
    _timeline(tmp_path / "two", gpus=2, trial_s=22.0, gap_s=0.0, imports_s=4.5)  # every trial 10% longer
    out = subprocess.run([sys.executable, "-m", "studies.scaling.scaling", "analyze", "--project", "4,8",
                          str(tmp_path / "one"), str(tmp_path / "two")], capture_output=True, text=True,
                         check=True, cwd=REPO)
    result = json.loads(out.stdout)
    two = result["runs"][1]
    assert two["work_ratio"] == pytest.approx(1.1) and two["efficiency"] == pytest.approx(160 / 88 / 2)
    assert two["phase_slowdown"]["imports"] == pytest.approx(1.5)
    assert two["phase_slowdown"]["trial_wall_s"] == pytest.approx(1.1)
    four, eight = result["projections"]
    assert four["dispatch"]["wall_s"] == pytest.approx(44.0)  # 8 trials of 22 s, 2 deep on 4 GPUs
    assert four["dispatch"]["efficiency"] == pytest.approx(1 / 1.1)
    assert eight["longest_first"]["busy"] == pytest.approx(1.0) and eight["gpus"] == 8


def _speedups(path: Path, speedups: dict[str, float]) -> None:
    """One eager trial and a compiled trial per mode, each with a +-2% in-trial interval over a
    stable baseline that ran as fast as the eager trial."""
    base = {"sweep_id": "s", "model": "m", "precision": "bf16", "phase": "infer", "batch_size": 64, "status": "ok",
            "device_name": "H200", "eager_throughput_items_s": 100.0, "eager_spread_pct": 1.0,
            "started_at": T0.isoformat(), "finished_at": (T0 + timedelta(seconds=10)).isoformat(),
            "trial_wall_s": 10.0, "setup_s": 1.0, "phase_s_json": json.dumps({"eager": 2.0, "compiled": 5.0})}
    rows = [{**base, "trial_id": "e", "mode": "eager", "throughput_items_s": 100.0, "speedup_vs_eager": 1.0,
             "speedup_ci_low": 1.0, "speedup_ci_high": 1.0, "throughput_spread_pct": 1.0}]
    rows += [{**base, "trial_id": mode, "mode": mode, "throughput_items_s": 100.0 * s, "speedup_vs_eager": s,
              "speedup_ci_low": s * 0.98, "speedup_ci_high": s * 1.02} for mode, s in speedups.items()]
    path.mkdir()
    write_rows(path / "results.parquet", rows)


def test_compare_judges_each_speedup_by_the_other_runs_reported_interval(tmp_path: Path) -> None:
    _speedups(tmp_path / "before", {"default": 2.0, "reduce-overhead": 2.0})
    _speedups(tmp_path / "after", {"default": 2.06, "reduce-overhead": 2.2})
    out = subprocess.run([sys.executable, "-m", "studies.scaling.scaling", "compare",
                          str(tmp_path / "before"), str(tmp_path / "after")], capture_output=True, text=True,
                         check=True, cwd=REPO)
    lines = {line.split(" |")[0]: line for line in out.stdout.splitlines() if line.startswith("| m ")}
    assert "| 2.000 [1.920, 2.080] | 2.060 [1.978, 2.142] | yes / NO | +3.0% |" in lines["| m default bf16 infer 64"]
    assert "| NO / NO | +10.0% |" in lines["| m reduce-overhead bf16 infer 64"]
    assert "Each inside the other's interval: 1 of 2 (reported), 0 of 2 (in-trial)." in out.stdout


def test_trials_sharing_a_gpu_overlap_without_negative_idle_and_replay_on_every_share(tmp_path: Path) -> None:
    rows = []
    for i in range(8):  # two GPUs, two trials on each at a time, 20 s each: 40 s
        start = T0 + timedelta(seconds=20 * (i // 4))
        rows.append({"sweep_id": "s", "trial_id": f"t{i}", "model": "m", "mode": "default", "status": "ok",
                     "gpu_uuid": f"GPU-{i % 2:08d}", "started_at": start.isoformat(),
                     "finished_at": (start + timedelta(seconds=20)).isoformat(), "trial_wall_s": 20.0,
                     "trials_per_gpu": 2, "setup_s": 1.0, "phase_s_json": json.dumps({"eager": 2.0, "compiled": 12.0})})
    (tmp_path / "shared").mkdir()
    write_rows(tmp_path / "shared" / "results.parquet", rows)
    out = subprocess.run([sys.executable, "-m", "studies.scaling.scaling", "analyze", str(tmp_path / "shared")],
                         capture_output=True, text=True,
                         check=True, cwd=REPO)
    (run,) = json.loads(out.stdout)["runs"]
    assert run["wall_s"] == pytest.approx(40.0) and list(run["busy"].values()) == pytest.approx([2.0, 2.0])
    assert all(v == {"head_s": 0.0, "gaps_s": 0.0, "tail_s": 0.0} for v in run["idle_s"].values())
    assert run["trials_per_gpu"] == 2 and run["replayed_wall_s"] == pytest.approx(40.0)  # 4 shares, not 2 GPUs


def test_cost_is_the_wall_against_the_cold_compiles_and_the_parts_add_up(tmp_path: Path) -> None:
    """8 compiled trials of 20 s back to back on one GPU, each compiling cold for 6 s of its 12 s
    compiled phase, with a warm-compile process of 1 s: wall 160 s against 48 s of cold compiles."""
    from studies.scaling.scaling import COST_PARTS, cost, cost_table

    _timeline(tmp_path / "one", gpus=1, trial_s=20.0, gap_s=0.0)
    df_path = tmp_path / "one" / "results.parquet"
    import pandas as pd

    df = pd.read_parquet(df_path)
    df["compile_s"] = 6.0
    df["phase_s_json"] = [json.dumps({**json.loads(p), "warm_process": 1.0}) for p in df["phase_s_json"]]
    df.to_parquet(df_path)
    r = cost(tmp_path / "one")
    assert (r["trials"], r["compiled"], r["gpus"]) == (8, 8, 1)
    assert r["wall_s"] == pytest.approx(160.0) and r["cold_compiles_s"] == pytest.approx(48.0)
    assert r["wall_per_compiles"] == pytest.approx(160.0 / 48.0)
    per_trial = {k: v / 8 for k, v in r["parts_s"].items()}
    assert per_trial == pytest.approx({"cold compile": 6.0, "timed + checked": 6.0, "eager alone": 2.0,
                                       "build + reference": 1.5, "process start": 3.0, "warm compile": 1.0,
                                       "Mega-Cache": 0.0, "rest": 0.5})
    assert sum(r["parts_s"].values()) == pytest.approx(r["trial_s"])
    table = cost_table([tmp_path / "one"])
    assert "| 8 (8) | 1 | 160 | 48 | 3.33x | 160 |" in table and all(k in table for k in COST_PARTS)
