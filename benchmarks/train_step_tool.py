"""The tool's own processes for `train_step_check.py`: its measuring process (as the runner starts
it: a new interpreter, or forked from the fork server) and a whole one-trial sweep, each reported as
the plain loop's variants are (per-step ms of the median window of each arm) with the row's columns."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.train_step_loop import REPO

if TYPE_CHECKING:
    from train_step_variants import Setting


ROW_KEYS = ("status", "error", "latency_p50_ms", "eager_latency_p50_ms", "speedup_vs_eager", "speedup_ci_low",
            "speedup_ci_high", "iters_per_window", "timed_windows", "graphs", "graph_breaks", "gpu_util_pct",
            "eager_gpu_util_pct", "cpu_affinity", "torch_threads", "compile_s", "accuracy_ok", "host_state",
            "slow_windows_pct", "witness_ms", "eager_witness_ms", "windows_json")


def _from_row(row: dict[str, Any], batch: int) -> dict[str, Any]:
    """The tool's row as this check reports it: per-step ms of the median window, each arm."""
    per_step = {k: (batch / row[f"{p}throughput_items_s"] * 1e3 if row.get(f"{p}throughput_items_s") else None)
                for k, p in (("compiled_ms_median", ""), ("eager_ms_median", "eager_"))}
    failed = {"error": f"trial {row.get('status')}: {row.get('error')}"[:500]} if row.get("status") != "ok" else {}
    return {**per_step, "speedup": row.get("speedup_vs_eager"), "probe_ms_median": None,
            **{f"row_{k}": row.get(k) for k in ROW_KEYS}, **failed}


def _measuring_process(s: Setting, start: str) -> dict[str, Any]:
    from sweeper.run import isolate

    payload = {"trial": s.trial().to_dict(), "device": s.device, "trials_per_gpu": 1, "process_start": start}
    with tempfile.TemporaryDirectory(prefix="train-step-check-") as work:
        row = isolate.run_process(payload, Path(work), Path(s.cache_dir), s.timeout_s)
    return _from_row(row, s.batch)


def v_pipeline(s: Setting) -> dict[str, Any]:
    """The tool's measuring process (`python -m sweeper.measure`), started as the runner starts it."""
    return _measuring_process(s, "subprocess")


def v_forkserver(s: Setting) -> dict[str, Any]:
    """The tool's measuring process forked from its fork server, as a sweep's trials are by default."""
    return _measuring_process(s, "forkserver")


def v_sweep(s: Setting) -> dict[str, Any]:
    """`python -m sweeper run` on the one-trial spec: a local Ray, Tune, a worker, its fork server."""
    import pyarrow.parquet as pq
    import yaml

    with tempfile.TemporaryDirectory(prefix="train-step-check-") as work:
        spec, results = Path(work) / "spec.yaml", Path(work) / "results"
        spec.write_text(yaml.safe_dump({**s.spec(), "measure": {**s.spec()["measure"], "warm_compile": False}}))
        cmd = [sys.executable, "-m", "sweeper", "run", str(spec), "--results", str(results), "--no-report",
               "--address", "local"]
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=s.timeout_s + 120, check=False)
        if not (results / "results.parquet").exists():
            raise RuntimeError(f"sweeper run exited {done.returncode}: {done.stderr.strip()[-500:]}")
        rows = pq.read_table(results / "results.parquet").to_pylist()
    return _from_row(rows[0], s.batch)
