"""How sweeper's wall time for one fixed sweep scales with the number of GPUs.

    python benchmarks/scaling.py run --gpus 2 --spec experiments/scaling.yaml --out results/scaling-2gpu
    python benchmarks/scaling.py analyze results/scaling-1gpu results/scaling-2gpu [--markdown]

`run` starts a Ray head that sees the first N GPUs (the way a cluster is used), runs the
sweep against it with `--address`, and stops Ray. `analyze` reads the rows back and reports,
per run: sweep wall time (first trial start to last trial end), trials per minute, speedup
and efficiency against the run with the fewest GPUs, each GPU's busy fraction (time inside
trials / sweep wall), the median gap between consecutive trials on one GPU (scheduling and
worker start), the median per-trial time spent outside compiling and measuring (process
starts, imports, CUDA init, model build, process teardown, warm-compile process), and the
median of each phase of `phase_s_json`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sweeper.results import read_results  # noqa: E402


def _ray(*args: str, env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-m", "ray.scripts.scripts", *args], env=env, check=True,
                   stdout=subprocess.DEVNULL)


def run(gpus: int, spec: str, out: Path, extra: list[str]) -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(gpus)),
           "RAY_USAGE_STATS_ENABLED": "0"}
    _ray("start", "--head", f"--num-gpus={gpus}", "--dashboard-host=127.0.0.1",
         "--include-dashboard=false", "--disable-usage-stats", env=env)
    t0 = time.monotonic()
    try:
        code = subprocess.call([sys.executable, "-m", "sweeper", "run", spec, "--address", "auto",
                                "--results", str(out), "--no-report", *extra], env=env)
    finally:
        _ray("stop", env=env)
    meta = {"gpus": gpus, "spec": spec, "driver_wall_s": time.monotonic() - t0, "exit_code": code}
    (out / "scaling.json").write_text(json.dumps(meta, indent=2))


def _gpu_stats(df: pd.DataFrame, wall_s: float) -> tuple[dict[str, float], float]:
    busy: dict[str, float] = {}
    gaps: list[float] = []
    key = df["gpu_uuid"].fillna(df["node_id"].fillna("cpu"))
    for gpu, g in df.assign(_k=key).groupby("_k"):
        g = g.sort_values("started_at")
        busy[str(gpu)[-8:]] = (g.finished_at - g.started_at).dt.total_seconds().sum() / wall_s
        gaps += (g.started_at.iloc[1:].values - g.finished_at.iloc[:-1].values).astype("timedelta64[ms]").astype(float).tolist()
    return busy, (pd.Series(gaps).median() / 1e3 if gaps else float("nan"))


def summarize(path: Path) -> dict:
    df = read_results([path / "results.parquet"])
    df["started_at"] = pd.to_datetime(df.started_at, utc=True)
    df["finished_at"] = pd.to_datetime(df.finished_at, utc=True)
    wall_s = (df.finished_at.max() - df.started_at.min()).total_seconds()
    busy, gap_s = _gpu_stats(df, wall_s)
    phases = _phases(df)
    if phases.empty:  # rows from before phase timings: the compiled first call is all that is known
        inside = df.first_call_s.fillna(0)
    else:  # compile and measurement: the eager baseline and the compiled part (compile, accuracy, steady)
        inside = phases.reindex(columns=["eager", "compiled"]).fillna(0).sum(axis=1)
    return {"run": path.name, "gpus": len(busy), "trials": len(df), "ok": int((df.status == "ok").sum()),
            "wall_s": wall_s, "trials_per_min": len(df) / wall_s * 60,
            "busy": busy, "median_gap_s": gap_s,
            "median_overhead_s": float((df.trial_wall_s - inside).median()),
            "median_setup_s": float(pd.to_numeric(df["setup_s"], errors="coerce").median()),
            "median_phase_s": {k: round(float(v), 2) for k, v in phases.median().items()}}


def _phases(df: pd.DataFrame) -> pd.DataFrame:
    """Seconds per phase of each trial (`phase_s_json`), one column per phase."""
    if "phase_s_json" not in df or df["phase_s_json"].isna().all():
        return pd.DataFrame()
    parsed = [json.loads(v) if isinstance(v, str) else {} for v in df["phase_s_json"]]
    return pd.DataFrame(parsed, index=df.index)


def analyze(paths: list[Path], markdown: bool) -> None:
    rows = sorted((summarize(p) for p in paths), key=lambda r: r["gpus"])
    base = rows[0]
    lines = ["| GPUs | trials (ok) | wall s | trials/min | speedup | efficiency | busy per GPU | gap s "
             "| overhead s/trial | setup s/process |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        speedup = base["wall_s"] / r["wall_s"] * (r["trials"] / base["trials"])
        eff = speedup / (r["gpus"] / base["gpus"])
        busy = ", ".join(f"{v:.2f}" for v in r["busy"].values())
        lines.append(f"| {r['gpus']} | {r['trials']} ({r['ok']}) | {r['wall_s']:.0f} | {r['trials_per_min']:.2f} | "
                     f"{speedup:.2f}x | {eff:.2f} | {busy} | {r['median_gap_s']:.1f} | {r['median_overhead_s']:.1f} | "
                     f"{r['median_setup_s']:.1f} |")
    names = list(dict.fromkeys(k for r in rows for k in r["median_phase_s"]))
    if names:
        lines += ["", "Median seconds per trial phase (`phase_s_json`):", "",
                  "| GPUs | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        lines += [f"| {r['gpus']} | " + " | ".join(f"{r['median_phase_s'].get(n, float('nan')):.1f}" for n in names)
                  + " |" for r in rows]
    print("\n".join(lines) if markdown else json.dumps(rows, indent=2, default=str))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--gpus", type=int, required=True)
    r.add_argument("--spec", default=str(REPO / "experiments" / "scaling.yaml"))
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("extra", nargs="*", help="more `sweeper run` arguments, e.g. --resume")
    a = sub.add_parser("analyze")
    a.add_argument("paths", nargs="+", type=Path)
    a.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    if args.cmd == "run":
        run(args.gpus, args.spec, args.out, args.extra)
    else:
        analyze(args.paths, args.markdown)


if __name__ == "__main__":
    main()
