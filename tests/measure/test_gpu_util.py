"""GPU utilization sampling: the sampler's logic against a fake NVML (this machine has no NVIDIA
driver, so no real NVML can answer here), nulls on CPU with the real package, and the paired
check that sampling does not disturb the timing (on a GPU only)."""

from __future__ import annotations

import json
import threading
import time
import types

import pytest
import torch

from sweeper.measure import gpu_util
from sweeper.measure import process as measure
from sweeper.spec.sweep_spec import parse_spec
from sweeper.spec.trials import expand
from tests.helpers import REPO, tiny_spec


class FakeNVML(types.ModuleType):
    """The part of pynvml the probe uses. `sm_pct` is what the next reading says; `instant`
    decides whether the driver offers instantaneous power."""

    NVML_SUCCESS = 0
    NVML_FI_DEV_POWER_INSTANT = 186
    NVML_CLOCK_SM = 1

    class NVMLError(Exception):
        pass

    def __init__(self, instant: bool = True):
        super().__init__("pynvml")
        self.instant, self.sm_pct, self.calls, self.clock_mhz = instant, 50.0, 0, 1980
        self.lock = threading.Lock()

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetUtilizationRates(self, handle):
        with self.lock:
            self.calls += 1
        return types.SimpleNamespace(gpu=self.sm_pct, memory=self.sm_pct / 2)

    def nvmlDeviceGetClockInfo(self, handle, clock) -> int:
        assert clock == self.NVML_CLOCK_SM
        return self.clock_mhz

    def nvmlDeviceGetPowerUsage(self, handle) -> int:
        return 300_000  # mW, the driver's averaged figure

    def nvmlDeviceGetFieldValues(self, handle, ids):
        ret = self.NVML_SUCCESS if self.instant else 3  # NVML_ERROR_NOT_SUPPORTED
        return [types.SimpleNamespace(nvmlReturn=ret, value=types.SimpleNamespace(uiVal=int(self.sm_pct * 1000)))]


def _window(sampler: gpu_util.Sampler, arm: gpu_util.ArmUtil, nvml: FakeNVML, stale: float, value: float,
            seconds: float) -> None:
    """A window whose readings say `stale` until the settle time has passed, `value` after."""
    nvml.sm_pct = stale
    sampler.begin(arm)
    time.sleep(gpu_util.SETTLE_S * 0.8)
    nvml.sm_pct = value
    time.sleep(seconds - gpu_util.SETTLE_S * 0.8)
    sampler.end()


def test_each_arm_gets_the_means_of_its_own_settled_readings() -> None:
    nvml = FakeNVML()
    sampler = gpu_util.Sampler(gpu_util.Probe(nvml, "h"), period_s=0.02)
    eager, compiled = gpu_util.ArmUtil(), gpu_util.ArmUtil()
    for _ in range(2):
        _window(sampler, eager, nvml, stale=90.0, value=40.0, seconds=0.4)
        _window(sampler, compiled, nvml, stale=40.0, value=90.0, seconds=0.4)
    sampler.close()
    e, c = eager.as_row("eager_"), compiled.as_row("")
    assert e["eager_gpu_util_pct"] == pytest.approx(40.0) and c["gpu_util_pct"] == pytest.approx(90.0)
    assert e["eager_gpu_mem_util_pct"] == pytest.approx(20.0) and c["gpu_power_w"] == pytest.approx(90.0)
    assert len(compiled.kept) >= 4


def test_no_readings_between_windows_and_a_short_window_keeps_its_last() -> None:
    nvml = FakeNVML(instant=False)
    sampler = gpu_util.Sampler(gpu_util.Probe(nvml, "h"), period_s=0.02)
    time.sleep(0.1)
    assert nvml.calls == 0  # idle until a window begins
    arm = gpu_util.ArmUtil()
    nvml.sm_pct = 70.0
    sampler.begin(arm)
    time.sleep(0.07)  # shorter than the settle time: no settled reading
    sampler.end()
    calls = nvml.calls
    time.sleep(0.1)
    sampler.close()
    assert nvml.calls <= calls + 1  # at most one reading already under way when the window ended
    assert len(arm.kept) == 1 and arm.as_row("")["gpu_power_w"] == pytest.approx(300.0)  # averaged power


def test_no_probe_on_cpu_or_without_a_driver() -> None:
    assert gpu_util.open_probe(torch.device("cpu"), FakeNVML()) is None
    assert gpu_util.ArmUtil().as_row("eager_") == {"eager_gpu_util_pct": None, "eager_gpu_mem_util_pct": None,
                                                   "eager_gpu_power_w": None}
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    pytest.importorskip("pynvml")  # the real package: NVML itself cannot start without a driver
    assert gpu_util.open_probe(torch.device("cuda")) is None


def _trials(**axes):
    trials, _ = expand(parse_spec(tiny_spec(models=[{"name": "lstm-tiny"}], axes=axes)))
    return {t.mode: t for t in trials}


@pytest.mark.parametrize("mode", ["eager", "default"])
def test_rows_carry_nulls_on_cpu(tmp_path, mode: str) -> None:
    row = measure.run({"trial": _trials()[mode].to_dict(), "device": "cpu"}, tmp_path / "row.json")
    assert row["status"] == "ok", row["error"]
    for col in gpu_util.COLUMNS:
        assert col in row and row[col] is None and row[f"eager_{col}"] is None


def test_the_pipeline_samples_each_arm_inside_its_windows(tmp_path, monkeypatch) -> None:
    """The fake NVML stands in for a GPU's: every timed window of either arm is sampled, the rows
    get both arms' means, and an eager row is its own baseline."""
    nvml = FakeNVML()
    nvml.sm_pct = 64.0
    monkeypatch.setattr(gpu_util, "open_probe", lambda device: gpu_util.Probe(nvml, "h"))
    monkeypatch.setattr(gpu_util, "SAMPLE_PERIOD_S", 0.01)
    monkeypatch.setattr(gpu_util, "SETTLE_S", 0.0)
    trials = _trials()
    for mode in ("eager", "default"):
        trial = trials[mode]
        payload = {"trial": {**trial.to_dict(), "measure": {**trial.measure.model_dump(), "min_window_s": 0.05}},
                   "device": "cpu"}
        row = measure.run(payload, tmp_path / f"{mode}.json")
        assert row["status"] == "ok", row["error"]
        assert row["gpu_util_pct"] == row["eager_gpu_util_pct"] == pytest.approx(64.0)
        assert row["gpu_mem_util_pct"] == pytest.approx(32.0) and row["eager_gpu_power_w"] == pytest.approx(64.0)
        assert row["gpu_clock_mhz"] == row["eager_gpu_clock_mhz"] == 1980
        windows = json.loads(row["windows_json"])
        assert windows["eager_clock_mhz"] == [1980] * len(windows["eager_s_per_iter"])


def test_sampling_switched_off_reads_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(gpu_util, "open_probe", lambda device: pytest.fail("NVML opened"))
    trial = _trials()["eager"]
    payload = {"trial": {**trial.to_dict(), "measure": {**trial.measure.model_dump(), "gpu_util": False}},
               "device": "cpu"}
    assert measure.run(payload, tmp_path / "row.json")["gpu_util_pct"] is None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_sampling_changes_the_step_time_by_less_than_one_percent() -> None:
    """The paired check on a GPU: vit_tiny training in bf16, eager (launch-bound: every kernel is
    launched from Python, so a sampling thread would show here first), windows with and without
    the sampler alternated."""
    pytest.importorskip("pynvml")
    from benchmarks import util_overhead

    trial = util_overhead.pick(str(REPO / "studies" / "claims" / "train.yaml"), "vit_tiny:eager:bf16")
    result = util_overhead.sampling_overhead(trial, torch.device("cuda"), windows=20)
    assert result["readings"] > 0 and result["gpu_util_pct"] is not None
    assert abs(result["change_pct"]) < 1.0, result


def test_the_sampler_wakeup_benchmark_runs_the_real_sampler_and_reports_its_figures() -> None:
    """benchmarks/sampler_wakeup.py on this CPU, briefly: the real sampler thread, waking every
    millisecond with a stand-in reading, wakes during the loop's windows and the benchmark turns
    the paired windows into a cost per wake-up with an interval. What that cost is (a 300 us
    reading costs the loop about that much, a 10 us one far less) is a performance figure: the
    benchmark measures and reports it (benchmarks/results/cpu/sampler_wakeup/), nothing here
    asserts it, since on a loaded machine a few dozen short windows spread by more than it."""
    import math

    from benchmarks import sampler_wakeup

    for reading_us in (300, 10):
        result = sampler_wakeup.wakeup_cost(windows=24, reading_us=reading_us, min_window_s=0.03)
        assert result["windows"] == 24 and result["reading_us"] == reading_us
        assert result["wakeups_per_window"] >= 1, result  # the sampler thread ran inside the windows
        low, high = result["wakeup_us_ci"]
        assert all(math.isfinite(v) for v in (result["wakeup_us"], low, high, result["change_pct"])), result
        assert low <= high and result["bound_pct_at_sample_period"] >= 0, result
