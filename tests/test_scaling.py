"""The scaling benchmark's analysis, on hand-made timelines with known answers."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sweeper.results import write_rows

from conftest import REPO

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _timeline(path: Path, gpus: int, trial_s: float, gap_s: float, n: int = 8) -> None:
    """`n` trials of `trial_s` each, dealt round-robin to `gpus` GPUs, `gap_s` apart on a GPU."""
    rows = []
    for i in range(n):
        gpu, slot = i % gpus, i // gpus
        start = T0 + timedelta(seconds=slot * (trial_s + gap_s))
        phases = {"imports": 3.0, "build": 1.0, "reference": 0.5, "eager": 2.0, "compiled": trial_s - 8.0,
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
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "scaling.py"), "analyze",
                          str(tmp_path / "two"), str(tmp_path / "one")], capture_output=True, text=True, check=True)
    one, two = json.loads(out.stdout)
    assert (one["gpus"], two["gpus"]) == (1, 2)
    assert one["wall_s"] == pytest.approx(160.0) and two["wall_s"] == pytest.approx(95.0)
    assert two["median_gap_s"] == pytest.approx(5.0) and list(two["busy"].values()) == pytest.approx([80 / 95] * 2)
    assert two["median_overhead_s"] == pytest.approx(20.0 - 2.0 - 12.0)  # outside eager + compiled
    assert two["median_phase_s"]["imports"] == 3.0
    md = subprocess.run([sys.executable, str(REPO / "benchmarks" / "scaling.py"), "analyze", "--markdown",
                         str(tmp_path / "one"), str(tmp_path / "two")], capture_output=True, text=True, check=True)
    assert "| 2 | 8 (8) | 95 | 5.05 | 1.68x | 0.84 |" in md.stdout
    assert "| imports | build | reference | eager | compiled | cold_process |" in md.stdout


def test_the_scaling_spec_is_48_inference_trials_over_vision_and_nlp() -> None:
    from sweeper.spec import load_spec
    from sweeper.trials import expand

    trials, dropped = expand(load_spec(REPO / "experiments" / "scaling.yaml"))
    assert len(trials) >= 48 and not dropped
    assert {t.phase for t in trials} == {"infer"} and {t.task for t in trials} == {"vision", "nlp"}
    assert sum(t.mode == "eager" for t in trials) == len(trials) // 2
