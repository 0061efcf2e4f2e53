"""Numbers a user can trust: speedup intervals, accuracy against float64, CPU slots per trial,
measured neighbour compiles, the sweep's baseline self-check."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time

import pandas as pd
import pytest
import torch
from torch import nn

from sweeper.analysis.drift import baseline_drift_pct
from sweeper.measure import accuracy, neighbours
from sweeper.measure import process as measure
from sweeper.measure.timing import WindowStats, paired_interval
from sweeper.run import cpus, isolate
from sweeper.spec.schema import parse_spec
from sweeper.spec.trials import Trial, expand
from tests.helpers import tiny_spec


def _stats(per_iter_s: list[float], iters: int = 10) -> WindowStats:
    return WindowStats([t * iters for t in per_iter_s], [t for t in per_iter_s for _ in range(iters)], iters)


# ---------------------------------------------------------------- speedup intervals


def test_interval_holds_the_speedup_and_narrows_with_stable_windows():
    rng = random.Random(1)
    noisy = [1.0 + 0.3 * rng.random() for _ in range(16)]  # a launch-bound eager step: +-30% between windows
    eager = _stats([2.0 * x for x in noisy])
    compiled = _stats([1.0 * (1 + 0.01 * rng.random()) for _ in range(16)])
    low, high = paired_interval(eager, compiled)
    point = statistics_ratio(eager, compiled)
    assert low <= point <= high
    assert low > 1.9 and high < 2.8
    steady = paired_interval(_stats([2.0] * 16), _stats([1.0] * 16))
    assert steady == pytest.approx((2.0, 2.0))
    assert (high - low) > 10 * (steady[1] - steady[0] + 1e-9)


def test_interval_pairs_windows_so_a_shared_slowdown_cancels():
    slow = [1.0] * 8 + [3.0] * 8  # the host slows halfway, for both arms alike
    low, high = paired_interval(_stats([2 * s for s in slow]), _stats(slow))
    assert low == pytest.approx(2.0, rel=0.35) and high == pytest.approx(2.0, rel=0.35)


def statistics_ratio(eager: WindowStats, compiled: WindowStats) -> float:
    return eager.median_iter_s / compiled.median_iter_s


# ---------------------------------------------------------------- accuracy against float64


def test_compiled_as_far_from_fp64_as_eager_passes_though_it_differs_from_eager():
    """Deep graphs drift legitimately: two different roundings of one result, each as good as
    the other, are further from each other than from the truth."""
    gen = torch.Generator().manual_seed(0)
    truth = torch.randn(4096, generator=gen, dtype=torch.float64)
    eager = truth + 0.02 * truth.abs() * torch.randn(4096, generator=gen, dtype=torch.float64)
    compiled = truth + 0.02 * truth.abs() * torch.randn(4096, generator=gen, dtype=torch.float64)
    ref = accuracy.Reference([truth], accuracy.FP64_DEVICE)
    v = accuracy.judge(ref, [eager.float()], [compiled.float()], tolerance=1e-2, precision="fp32")
    assert v.rel_err > 1e-2  # the old rule (compiled vs eager within 1e-2) would reject it
    assert v.accuracy_ok and v.compiled_err_vs_fp64 <= v.accuracy_tol
    wrong = accuracy.judge(ref, [eager.float()], [(compiled * 1.1).float()], tolerance=1e-2, precision="fp32")
    assert not wrong.accuracy_ok and wrong.compiled_err_vs_fp64 > 2 * wrong.eager_err_vs_fp64


def test_without_a_float64_reference_the_check_falls_back_to_eager_and_says_so():
    ref = accuracy.Reference([], accuracy.EAGER_ONLY, "float64 on cuda failed: out of memory")
    x = torch.ones(8)
    v = accuracy.judge(ref, [x], [x * 1.001], tolerance=1e-2, precision="fp32")
    assert v.accuracy_ok and v.eager_err_vs_fp64 is None and v.accuracy_reference == "eager"
    assert not accuracy.judge(ref, [x], [x * 1.1], tolerance=1e-2, precision="fp32").accuracy_ok


class _NoDouble(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float64:
            raise NotImplementedError("no float64 kernel")
        return super().forward(x)


def test_fp64_reference_runs_a_float64_copy_and_reports_when_it_cannot():
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
    from sweeper.zoo.bundle import Batch

    batch = Batch(args=(torch.randn(4, 8),), items=4)
    ref = accuracy.fp64_reference(model, batch, torch.device("cpu"), lambda m, b: [m(*b.args)])
    assert ref.source == accuracy.FP64_DEVICE and ref.tensors[0].dtype == torch.float64
    assert next(model.parameters()).dtype == torch.float32  # the model itself is untouched
    none = accuracy.fp64_reference(_NoDouble(8, 8), batch, torch.device("cpu"), lambda m, b: [m(*b.args)])
    assert none.source == accuracy.EAGER_ONLY and "no float64 kernel" in none.note


def _compare_whole(ref: list[torch.Tensor], got: list[torch.Tensor]) -> tuple[float, float]:
    """The comparison on whole float64 copies, as it was before it streamed in chunks."""
    max_abs, rel = 0.0, 0.0
    for r, g in zip(ref, got, strict=True):
        r64, g64 = r.double(), g.double()
        if r64.shape != g64.shape or not torch.isfinite(g64).all():
            return float("inf"), float("inf")
        diff = g64 - r64
        max_abs = max(max_abs, float(diff.abs().max()) if diff.numel() else 0.0)
        denom = float(r64.norm())
        rel = max(rel, float(diff.norm()) / denom if denom > 0 else float(diff.norm()))
    return max_abs, rel


def _pairs() -> list[tuple[list[torch.Tensor], list[torch.Tensor]]]:
    gen = torch.Generator().manual_seed(3)
    ref = [torch.randn(1000, generator=gen, dtype=torch.float64), torch.randn(7, 13, generator=gen,
                                                                              dtype=torch.float64),
           torch.zeros(0, dtype=torch.float64), torch.randn(5, generator=gen, dtype=torch.float64)]
    near = [(r + 1e-3 * torch.randn(r.shape, generator=gen, dtype=torch.float64)).float() for r in ref]
    bf16 = [r.bfloat16() for r in ref]
    zero_ref = [torch.zeros(64, dtype=torch.float64)], [torch.full((64,), 0.5)]
    return [(ref, near), (ref, bf16), (near, ref), zero_ref]


@pytest.mark.parametrize("chunk", [1, 7, 64, 999, 2**24])
def test_chunked_compare_equals_the_whole_tensor_formula(chunk):
    for ref, got in _pairs():  # sizes 1000, 91, 0, 5 and 64: mostly not a multiple of the chunk
        assert accuracy.compare(ref, got, chunk=chunk) == pytest.approx(_compare_whole(ref, got), rel=1e-12, abs=0)


def test_compare_of_mismatched_or_non_finite_results_is_inf_wherever_the_chunk_falls():
    gen = torch.Generator().manual_seed(4)
    ref = [torch.randn(100, generator=gen, dtype=torch.float64), torch.randn(300, generator=gen, dtype=torch.float64)]
    inf = (float("inf"), float("inf"))
    assert accuracy.compare(ref, [ref[0].float(), ref[1][:299].float()], chunk=16) == inf
    for bad in (float("nan"), float("inf"), float("-inf")):
        got = [t.float().clone() for t in ref]
        got[1][290] = bad  # in the last, partial chunk of the second tensor
        assert accuracy.compare(ref, got, chunk=16) == inf == _compare_whole(ref, got)


def test_chunked_compare_matches_the_whole_formula_on_a_non_finite_reference():
    gen = torch.Generator().manual_seed(5)
    for bad in (float("nan"), float("inf")):
        ref = [torch.randn(50, generator=gen, dtype=torch.float64), torch.randn(80, generator=gen, dtype=torch.float64)]
        ref[0][45] = bad
        got = [t.nan_to_num(posinf=0.0).float() + 0.01 for t in ref]
        got[0][10] += 0.5  # the largest error, in a chunk before the non-finite one
        chunked, whole = accuracy.compare(ref, got, chunk=16), _compare_whole(ref, got)
        assert chunked == pytest.approx(whole, rel=1e-12, nan_ok=True)


def test_compare_leaves_its_inputs_as_they_were():
    ref = [torch.arange(40, dtype=torch.float64)]
    got = [ref[0] + 0.5]  # float64 already: a chunk of it must be copied, not subtracted in place
    before = got[0].clone()
    assert accuracy.compare(ref, got, chunk=16) == pytest.approx((0.5, 0.5 * 40**0.5 / float(ref[0].norm())))
    assert torch.equal(got[0], before) and torch.equal(ref[0], torch.arange(40, dtype=torch.float64))


def test_fp64_reference_lives_on_the_host_and_judges_results_on_the_host():
    from sweeper.zoo.bundle import Batch

    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
    batch = Batch(args=(torch.randn(4, 8),), items=4)
    ref = accuracy.fp64_reference(model, batch, torch.device("cpu"), lambda m, b: [m(*b.args)])
    assert [t.device.type for t in ref.tensors] == ["cpu"]
    with torch.no_grad():
        out = [model(*batch.args)]
    v = accuracy.judge(ref, out, [out[0] * (1 + 1e-6)], tolerance=1e-4, precision="fp32")
    assert v.accuracy_ok and 0 < v.eager_err_vs_fp64 < 1e-6 and v.compiled_err_vs_fp64 > v.eager_err_vs_fp64


def _trial(**overrides) -> tuple[Trial, Trial]:
    trials, _ = expand(parse_spec(tiny_spec(**overrides)))
    return tuple(sorted(trials, key=lambda t: t.mode != "eager"))  # (eager, compiled)


@pytest.mark.slow
def test_training_row_has_both_errors_against_fp64(tmp_path):
    _, compiled = _trial(models=[{"name": "resnet18-tiny"}], axes={"phase": ["train"]})
    row = measure.run({"trial": compiled.to_dict(), "device": "cpu"}, tmp_path / "row.json")
    assert row["status"] == "ok", row["error"]
    assert row["accuracy_reference"] == "fp64_device"
    # batch-norm over 2 samples is ill-conditioned: eager fp32 itself is far from float64, and the
    # compiled gradients are judged against that, not against eager
    assert row["eager_err_vs_fp64"] > 0 and row["compiled_err_vs_fp64"] <= row["accuracy_tol"]
    assert row["speedup_ci_low"] <= row["speedup_vs_eager"] <= row["speedup_ci_high"]


# ---------------------------------------------------------------- a trial's own CPUs


def test_slots_take_whole_physical_cores():
    smt = [[c, c + 8] for c in range(8)]  # 8 cores, 2 threads each: siblings 0/8, 1/9, ...
    assert cpus.slot_cpus(smt, 8, 0) == [0, 8, 1, 9, 2, 10, 3, 11]
    assert cpus.slot_cpus(smt, 8, 1) == [4, 12, 5, 13, 6, 14, 7, 15]
    assert cpus.slot_count(smt, 8) == 2 and cpus.slot_count(smt, 5) == 2  # 5 CPUs: 3 whole cores
    assert cpus.slot_count([[0], [1]], 1) == 2
    from sweeper.envinfo import format_cpus

    assert format_cpus([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert all(sum(map(len, cpus.physical_cores())) == len(os.sched_getaffinity(0)) for _ in [0])


def test_concurrent_holders_get_disjoint_slots_and_a_third_runs_unpinned(tmp_path, monkeypatch):
    monkeypatch.setattr(cpus, "SLOT_DIR", tmp_path)
    monkeypatch.setattr(cpus, "physical_cores", lambda: [[0], [1]])
    got: list[list[int] | None] = []
    release = threading.Event()

    def hold():
        with cpus.cpu_slot(1) as mine:
            got.append(mine)
            release.wait(5)

    holders = [threading.Thread(target=hold) for _ in range(2)]
    for h in holders:
        h.start()
    while len(got) < 2:
        time.sleep(0.01)
    with cpus.cpu_slot(1, wait_s=0.3) as third:
        assert third is None
    release.set()
    for h in holders:
        h.join()
    assert sorted(got) == [[0], [1]]
    with cpus.cpu_slot(1) as again:  # released with their holders
        assert again == [0]


@pytest.mark.slow
def test_a_pinned_trial_measures_on_its_own_cpus():
    eager, _ = _trial()
    payload = {"trial": eager.to_dict(), "device": "cpu", "pin_cpus": 1}
    row = isolate.run_trial(payload, max_retries=0)
    assert row["status"] == "ok", row["error"]
    assert row["cpus_pinned"] is True and row["cpu_count"] == 1
    assert row["cpu_affinity"] in {str(c) for c in os.sched_getaffinity(0)}


# ---------------------------------------------------------------- neighbours, measured


def test_a_live_neighbours_compile_marker_is_seen_and_a_dead_ones_is_not(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / str(sleeper.pid)).touch()
        (tmp_path / str(os.getpid())).touch()  # our own marker is not a neighbour
        assert neighbours.neighbours_compiling(tmp_path) == 1
        busy = neighbours.BusyWindows(tmp_path)
        busy.before()
        busy.after()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert neighbours.neighbours_compiling(tmp_path) == 0  # its marker stays, its process is gone
    busy.before()
    busy.after()
    assert busy.busy_pct == 50.0
    with neighbours.compiling(tmp_path):
        assert (tmp_path / str(os.getpid())).exists()
    assert not (tmp_path / str(os.getpid())).exists()


@pytest.mark.slow
def test_row_says_how_many_windows_a_neighbour_compiled_in(tmp_path, monkeypatch):
    eager, _ = _trial()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    monkeypatch.setattr(neighbours, "MARKER_DIR", tmp_path)
    try:
        quiet = measure.run({"trial": eager.to_dict(), "device": "cpu"}, tmp_path / "a.json")
        (tmp_path / str(sleeper.pid)).touch()
        busy = measure.run({"trial": eager.to_dict(), "device": "cpu"}, tmp_path / "b.json")
    finally:
        sleeper.kill()
        sleeper.wait()
    assert quiet["host_busy_windows_pct"] == 0.0 and busy["host_busy_windows_pct"] == 100.0
    assert busy["cpu_count"] == len(os.sched_getaffinity(0))


# ---------------------------------------------------------------- the sweep checks itself


def test_baseline_drift_compares_in_trial_eager_with_the_eager_trial_of_its_context():
    base = {"sweep_id": "s", "model": "m", "phase": "infer", "precision": "bf16", "seq_len": None,
            "workload": None, "bucketing": "none", "device_name": "H200", "matmul_precision": "high", "status": "ok"}
    rows = [
        {**base, "mode": "eager", "batch_size": 64, "throughput_items_s": 100.0, "eager_throughput_items_s": 100.0},
        {**base, "mode": "reduce-overhead", "batch_size": 64, "throughput_items_s": 400.0,
         "eager_throughput_items_s": 50.0},  # its baseline ran at half speed: a neighbour's doing
        {**base, "mode": "default", "batch_size": 64, "throughput_items_s": 150.0, "eager_throughput_items_s": 102.0},
        {**base, "mode": "default", "batch_size": 8, "throughput_items_s": 15.0, "eager_throughput_items_s": 10.0},
        {**base, "sweep_id": "other", "mode": "default", "batch_size": 64, "throughput_items_s": 1.0,
         "eager_throughput_items_s": 1.0},
    ]
    drift = baseline_drift_pct(pd.DataFrame(rows))
    assert pd.isna(drift[0]) and drift[1] == pytest.approx(-50.0) and drift[2] == pytest.approx(2.0)
    assert pd.isna(drift[3]) and pd.isna(drift[4])  # no eager trial of that batch / in that sweep


@pytest.mark.slow
def test_new_columns_are_schema_columns(tmp_path):
    from sweeper.results.schema import COLUMN_NAMES

    _eager, compiled = _trial()
    row = measure.run({"trial": compiled.to_dict(), "device": "cpu"}, tmp_path / "row.json")
    for key in ("speedup_ci_low", "speedup_ci_high", "host_busy_windows_pct", "cpu_affinity", "eager_err_vs_fp64",
                "compiled_err_vs_fp64", "accuracy_reference", "mem_need_reserved_gib", "device_mem_used_gib",
                "eager_spread_pct"):
        assert key in row and key in COLUMN_NAMES, key
    assert json.loads((tmp_path / "row.json").read_text())["status"] == "ok"
    assert Trial.from_json(compiled.to_json()) == compiled


def test_the_in_trial_interval_is_never_narrower_than_its_floor():
    from sweeper.measure.timing import IN_TRIAL_FLOOR, speedup_interval

    low, high = speedup_interval(_stats([2.0] * 16), _stats([1.0] * 16))
    assert (low, high) == pytest.approx((2.0 * (1 - IN_TRIAL_FLOOR), 2.0 * (1 + IN_TRIAL_FLOOR)))
    rng = random.Random(3)
    wide = speedup_interval(_stats([2.0 * (1 + 0.5 * rng.random()) for _ in range(16)]), _stats([1.0] * 16))
    assert wide[1] - wide[0] > 4 * IN_TRIAL_FLOOR * 2.0  # noisy windows keep their own, wider interval


def _context_rows(eager_spread_pct: float, in_trial_eager_items_s: float) -> pd.DataFrame:
    base = {"sweep_id": "s", "model": "m", "phase": "infer", "precision": "bf16", "seq_len": None, "batch_size": 64,
            "workload": None, "bucketing": "none", "device_name": "H200", "matmul_precision": "high", "status": "ok"}
    return pd.DataFrame([
        {**base, "mode": "eager", "throughput_items_s": 100.0, "eager_throughput_items_s": 100.0,
         "throughput_spread_pct": eager_spread_pct, "speedup_vs_eager": 1.0, "speedup_ci_low": 1.0,
         "speedup_ci_high": 1.0},
        {**base, "mode": "reduce-overhead", "throughput_items_s": 300.0,
         "eager_throughput_items_s": in_trial_eager_items_s,
         "speedup_vs_eager": 300.0 / in_trial_eager_items_s, "speedup_ci_low": 300.0 / in_trial_eager_items_s * 0.98,
         "speedup_ci_high": 300.0 / in_trial_eager_items_s * 1.02},
    ])


def test_reported_interval_widens_over_an_unstable_baseline_and_reaches_the_eager_trial():
    from sweeper.analysis.drift import RUN_TO_RUN_FLOOR, UNSTABLE_BASELINE_FLOOR, eager_trial_speedup, reported_interval
    from sweeper.measure.timing import IN_TRIAL_FLOOR

    assert IN_TRIAL_FLOOR < RUN_TO_RUN_FLOOR < UNSTABLE_BASELINE_FLOOR
    stable = _context_rows(eager_spread_pct=1.0, in_trial_eager_items_s=100.0)
    low, high = reported_interval(stable)
    assert (low[1], high[1]) == pytest.approx((3.0 * (1 - RUN_TO_RUN_FLOOR), 3.0 * (1 + RUN_TO_RUN_FLOOR)))
    assert (low[0], high[0]) == (1.0, 1.0)  # the eager trial is its own baseline: no interval added
    unstable = _context_rows(eager_spread_pct=30.0, in_trial_eager_items_s=100.0)
    low, high = reported_interval(unstable)
    assert (low[1], high[1]) == pytest.approx((3.0 * (1 - UNSTABLE_BASELINE_FLOOR),
                                               3.0 * (1 + UNSTABLE_BASELINE_FLOOR)))
    drifted = _context_rows(eager_spread_pct=1.0, in_trial_eager_items_s=60.0)  # in-trial baseline slowed: 5x
    assert eager_trial_speedup(drifted)[1] == pytest.approx(3.0) and pd.isna(eager_trial_speedup(drifted)[0])
    low, high = reported_interval(drifted)
    assert low[1] == pytest.approx(3.0) and high[1] == pytest.approx(5.0 * (1 + RUN_TO_RUN_FLOOR))
    wide = stable.assign(speedup_ci_low=[1.0, 2.0], speedup_ci_high=[1.0, 4.0])  # a wider in-trial interval stands
    assert tuple(reported_interval(wide)[0]) == pytest.approx((1.0, 2.0))
    no_interval = stable.assign(speedup_ci_low=[1.0, None], speedup_ci_high=[1.0, None])
    assert pd.isna(reported_interval(no_interval)[0][1]) and pd.isna(reported_interval(no_interval)[1][1])


def test_a_rows_own_eager_spread_wins_over_the_eager_trials():
    from sweeper.analysis.drift import RUN_TO_RUN_FLOOR, baseline_spread_pct, reported_interval

    rows = _context_rows(eager_spread_pct=30.0, in_trial_eager_items_s=100.0).assign(eager_spread_pct=[30.0, 1.0])
    assert baseline_spread_pct(rows)[1] == pytest.approx(1.0)
    low, high = reported_interval(rows)
    assert (low[1], high[1]) == pytest.approx((3.0 * (1 - RUN_TO_RUN_FLOOR), 3.0 * (1 + RUN_TO_RUN_FLOOR)))
