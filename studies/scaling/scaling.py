"""How sweeper's wall time for one fixed sweep scales with the number of GPUs.

    python -m studies.scaling.scaling run --gpus 2 --spec studies/scaling/scaling.yaml --out results/scaling-2gpu
    python -m studies.scaling.scaling analyze results/scaling-1gpu results/scaling-2gpu [--markdown] [--project 4,8]
    python -m studies.scaling.scaling compare results/before results/after
    python -m studies.scaling.scaling cost results/a results/b ...

`run` starts a Ray head that sees the first N GPUs, runs the sweep against it with `--address`,
and stops Ray. `analyze` reports per run: wall time, trials per minute, speedup and efficiency
against the run with the fewest GPUs, each GPU's busy fraction, the gaps between trials, the
per-trial time outside compiling and measuring, and the median of each phase (`phase_s_json`).
It splits efficiency into its two causes (busy fraction and work per trial against the base
run's), and `--project` replays the base run's trials, slowed by the widest run's work per trial,
onto more GPUs (each run's own trials replayed give back its measured wall: the model's check).
`compare` gives every compiled setting's speedup before and after. `cost` gives, per sweep, its wall
against the sum of the cold compiles it measured, and where the rest of its trials' time went."""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from sweeper.analysis.frames import prepare
from sweeper.results.store import read_results

REPO = Path(__file__).resolve().parents[2]


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


def _gpu_key(df: pd.DataFrame) -> pd.Series:
    return df["gpu_uuid"].fillna(df["node_id"].fillna("cpu") if "node_id" in df else "cpu")


def _union(g: pd.DataFrame) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """The stretches of time in which at least one of the trials `g` ran (trials sharing a GPU overlap)."""
    spans: list[tuple[pd.Timestamp, pd.Timestamp]] = []
    for start, end in sorted(zip(g.started_at, g.finished_at, strict=True)):
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    return spans


def _gpu_stats(df: pd.DataFrame, t0: pd.Timestamp, t1: pd.Timestamp) -> tuple[dict[str, dict[str, float]], float]:
    """Per GPU: busy fraction (its trials' summed time over the wall: above 1 when trials shared
    it), and its idle seconds (no trial on it) before its first trial, between trials and after its last."""
    wall_s = (t1 - t0).total_seconds()
    stats: dict[str, dict[str, float]] = {}
    gaps: list[float] = []
    for gpu, g in df.assign(_k=_gpu_key(df)).groupby("_k"):
        spans = _union(g)
        between = [(b[0] - a[1]).total_seconds() for a, b in itertools.pairwise(spans)]
        gaps += between
        stats[str(gpu)[-8:]] = {"busy": (g.finished_at - g.started_at).dt.total_seconds().sum() / wall_s,
                                "head_s": (spans[0][0] - t0).total_seconds(),
                                "gaps_s": float(sum(between)),
                                "tail_s": (t1 - spans[-1][1]).total_seconds()}
    return stats, (float(pd.Series(gaps).median()) if gaps else float("nan"))


def summarize(path: Path) -> dict:
    df = read_results([path])
    df["started_at"] = pd.to_datetime(df.started_at, utc=True)
    df["finished_at"] = pd.to_datetime(df.finished_at, utc=True)
    t0, t1 = df.started_at.min(), df.finished_at.max()
    wall_s = (t1 - t0).total_seconds()
    gpu, gap_s = _gpu_stats(df, t0, t1)
    phases = _phases(df)
    if phases.empty:  # rows from before phase timings: the compiled first call is all that is known
        inside = df.first_call_s.fillna(0)
    else:  # compile and measurement: the eager baseline and the compiled part (compile, accuracy, steady)
        inside = phases.reindex(columns=["eager", "compiled"]).fillna(0).sum(axis=1)
    dispatched = df.sort_values("started_at")
    totals = {"compile_s": pd.to_numeric(df.get("compile_s"), errors="coerce"), "trial_wall_s": df.trial_wall_s}
    waited = pd.to_numeric(df.get("gpu_lock_wait_s"), errors="coerce")
    if waited is not None and waited.notna().any():  # trials shared GPUs: seconds each waited for its GPU
        totals["gpu_lock_wait_s"] = waited
    per_trial = phases.assign(**totals).set_index(df.trial_id)
    return {"run": path.name, "gpus": len(gpu), "trials": len(df), "ok": int((df.status == "ok").sum()),
            "wall_s": wall_s, "trials_per_min": len(df) / wall_s * 60,
            "busy": {k: v["busy"] for k, v in gpu.items()},
            "idle_s": {k: {n: v[n] for n in ("head_s", "gaps_s", "tail_s")}
                                                                      for k, v in gpu.items()},
            "median_gap_s": gap_s, "trial_s_sum": float(df.trial_wall_s.sum()),
            "trials_per_gpu": int(pd.to_numeric(df.get("trials_per_gpu"), errors="coerce").max())
            if "trials_per_gpu" in df and df["trials_per_gpu"].notna().any() else 1,
            "median_overhead_s": float((df.trial_wall_s - inside).median()),
            "median_outside_measuring_s": _outside_measuring_s(df, phases),
            "median_setup_s": float(pd.to_numeric(df["setup_s"], errors="coerce").median()),
            "median_phase_s": {k: round(float(v), 2) for k, v in phases.median().items()},
            "median_total_s": {k: round(float(v.median()), 2) for k, v in totals.items()},
            "dispatch_order_s": [float(v) for v in dispatched.trial_wall_s],
            "per_trial_s": {str(t): {k: float(v) for k, v in r.items() if pd.notna(v)}
                            for t, r in per_trial.iterrows()}}


def _outside_measuring_s(df: pd.DataFrame, phases: pd.DataFrame) -> float:
    """Median, over compiled trials, of the trial's seconds outside what it measures: its wall less
    the eager and compiled phases (compile, accuracy, timed windows), the float64 reference, and
    the warm compiles (from the cache directory and from the Mega-Cache artifact). What is left:
    process starts, CUDA contexts, model builds, dispatch, teardown."""
    compiled = df["mode"].ne("eager") & df["status"].eq("ok")
    if phases.empty or not compiled.any():
        return float("nan")
    measured = phases.reindex(columns=["eager", "compiled", "reference"]).fillna(0).sum(axis=1)
    for column in ("warm_compile_s", "warm_megacache_s"):
        measured += pd.to_numeric(df.get(column, pd.Series(0.0, index=df.index)), errors="coerce").fillna(0)
    return float((df.trial_wall_s - measured)[compiled].median())


def _phases(df: pd.DataFrame) -> pd.DataFrame:
    """Seconds per phase of each trial (`phase_s_json`), one column per phase."""
    if "phase_s_json" not in df or df["phase_s_json"].isna().all():
        return pd.DataFrame(index=df.index)
    parsed = [json.loads(v) if isinstance(v, str) else {} for v in df["phase_s_json"]]
    return pd.DataFrame(parsed, index=df.index)


def schedule(trial_s: list[float], gpus: int) -> float:
    """Wall time of trials handed out in this order, each to the first GPU (or GPU share, with
    several trials per GPU) that is free, as Tune does, with no time between trials."""
    free = [0.0] * gpus
    for s in trial_s:
        heapq.heappush(free, heapq.heappop(free) + s)
    return max(free)


def slowdown(run: dict, base: dict) -> dict[str, float]:
    """Median ratio, trial by trial (same trial id), of each phase's seconds in `run` to those in `base`."""
    ratios: dict[str, list[float]] = {}
    for tid, phases in run["per_trial_s"].items():
        for name, s in phases.items():
            b = base["per_trial_s"].get(tid, {}).get(name)
            if b:
                ratios.setdefault(name, []).append(s / b)
    return {k: float(pd.Series(v).median()) for k, v in ratios.items()}


def _efficiency(r: dict, base: dict) -> tuple[float, float]:
    speedup = base["wall_s"] / r["wall_s"] * (r["trials"] / base["trials"])
    return speedup, speedup / (r["gpus"] / base["gpus"])


def analyze(paths: list[Path], markdown: bool, project: list[int]) -> None:
    rows = sorted((summarize(p) for p in paths), key=lambda r: r["gpus"])
    base = rows[0]
    for r in rows:
        r["speedup"], r["efficiency"] = _efficiency(r, base)
        r["work_ratio"] = r["trial_s_sum"] / base["trial_s_sum"] * base["trials"] / r["trials"]
        r["busy_mean"] = sum(r["busy"].values()) / len(r["busy"])
        r["replayed_wall_s"] = schedule(r["dispatch_order_s"], r["gpus"] * r["trials_per_gpu"])
        r["phase_slowdown"] = slowdown(r, base)
    widest = rows[-1]
    projections = []
    for n in project:  # the base run's trials, each slowed by the per-trial work ratio of the widest run
        trial_s = [s * widest["work_ratio"] for s in base["dispatch_order_s"]]
        row = {"gpus": n, "assumed_work_ratio": widest["work_ratio"]}
        for order, seq in (("dispatch", trial_s), ("longest_first", sorted(trial_s, reverse=True))):
            wall = schedule(seq, n)
            _, eff = _efficiency({"wall_s": wall, "trials": len(seq), "gpus": n}, base)
            row[order] = {"wall_s": wall, "busy": sum(seq) / (n * wall), "efficiency": eff}
        projections.append(row)
    if not markdown:
        for r in rows:
            del r["per_trial_s"], r["dispatch_order_s"]
        print(json.dumps({"runs": rows, "projections": projections}, indent=2, default=str))
        return
    lines = [("| GPUs | trials (ok) | wall s | trials/min | speedup | efficiency | busy per GPU | gap s "
              "| overhead s/trial | setup s/process | outside measuring s/compiled trial |"),
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        busy = ", ".join(f"{v:.2f}" for v in r["busy"].values())
        lines.append(f"| {r['gpus']} | {r['trials']} ({r['ok']}) | {r['wall_s']:.0f} | {r['trials_per_min']:.2f} | "
                     f"{r['speedup']:.2f}x | {r['efficiency']:.2f} | {busy} | {r['median_gap_s']:.1f} | "
                     f"{r['median_overhead_s']:.1f} | {r['median_setup_s']:.1f} | "
                     f"{r['median_outside_measuring_s']:.1f} |")
    lines += ["", f"Where the efficiency goes (efficiency = busy / work per trial, against {base['gpus']} GPU):",
              "",
              ("| GPUs | trial s, summed | work per trial | mean busy "
               "| idle s per GPU: before first, between, after last "
               "| wall s replayed from the trials' own times |"), "|---|---|---|---|---|---|"]
    for r in rows:
        idle = "; ".join(f"{v['head_s']:.1f}, {v['gaps_s']:.1f}, {v['tail_s']:.1f}" for v in r["idle_s"].values())
        lines.append(f"| {r['gpus']} | {r['trial_s_sum']:.0f} | {r['work_ratio']:.3f}x | {r['busy_mean']:.3f} | {idle} "
                     f"| {r['replayed_wall_s']:.0f} (measured {r['wall_s']:.0f}) |")
    names = list(dict.fromkeys(k for r in rows for k in r["median_phase_s"]))
    if names:
        totals = list(dict.fromkeys(k for r in rows for k in r["median_total_s"]))
        lines += ["", ("Median seconds per trial phase (`phase_s_json`; then the compile and the whole trial), and in "
                       f"brackets the median ratio, trial by trial, to the same trial on {base['gpus']} GPU:"), "",
                  "| GPUs | " + " | ".join(names + totals) + " |", "|---|" + "---|" * (len(names) + len(totals))]
        for r in rows:
            medians = {**r["median_phase_s"], **r["median_total_s"]}
            cells = [f"{medians.get(n, float('nan')):.1f}" for n in names + totals]
            if r is not base:
                cells = [f"{c} ({r['phase_slowdown'].get(n, float('nan')):.3f})"
                         for c, n in zip(cells, names + totals, strict=False)]
            lines.append(f"| {r['gpus']} | " + " | ".join(cells) + " |")
    if projections:
        lines += ["", (f"Projection, not a measurement: the {base['gpus']}-GPU run's trials, each "
                       f"{widest['work_ratio']:.3f}x longer (the work per trial measured on {widest['gpus']} GPUs), "
                       "handed to the first free GPU with no gaps:"), "",
                  "| GPUs | wall s, dispatch order | busy | efficiency | wall s, longest first | busy | efficiency |",
                  "|---|---|---|---|---|---|---|"]
        for p in projections:
            d, lf = p["dispatch"], p["longest_first"]
            lines.append(f"| {p['gpus']} | {d['wall_s']:.0f} | {d['busy']:.3f} | {d['efficiency']:.2f} | "
                         f"{lf['wall_s']:.0f} | {lf['busy']:.3f} | {lf['efficiency']:.2f} |")
    print("\n".join(lines))


SETTING = ["model", "mode", "precision", "phase", "batch_size"]


def _speedup_cell(r: pd.Series, side: str) -> str:
    return (f"{r['speedup_vs_eager' + side]:.3f} [{r['speedup_low' + side]:.3f}, {r['speedup_high' + side]:.3f}]")


def compare_speedups(before: Path, after: Path) -> None:
    """The same settings measured by two runs (e.g. before and after a change to how trials run):
    wall time, median overhead per trial, and each compiled setting's speedup with its reported
    interval (the in-trial one widened by the sweep's self-check, sweeper/analysis/drift.py),
    whether each lies inside the other's interval (reported, and the bare in-trial one), and
    their difference."""
    runs = {name: summarize(p) for name, p in (("before", before), ("after", after))}
    lines = ["| run | trials (ok) | wall s | overhead s/trial (median) | imports s/process (median) |",
             "|---|---|---|---|---|"]
    for name, r in runs.items():
        lines.append(f"| {name} | {r['trials']} ({r['ok']}) | {r['wall_s']:.0f} | {r['median_overhead_s']:.1f} | "
                     f"{r['median_phase_s'].get('imports', float('nan')):.2f} |")
    frames = {name: prepare(read_results([p])).query("mode != 'eager' and status == 'ok'")
              .astype({"batch_size": "Int64"}).set_index(SETTING) for name, p in (("before", before), ("after", after))}
    both = frames["before"].merge(frames["after"], left_index=True, right_index=True, suffixes=("_b", "_a"))
    lines += ["", "| setting | speedup before [reported interval] | after [reported interval] | each inside the "
              "other's: reported / in-trial | after/before |", "|---|---|---|---|---|"]
    counts = [0, 0]
    for key, r in both.sort_index().iterrows():
        inside = [all(r[f"{lo}_{x}"] <= r[f"speedup_vs_eager_{y}"] <= r[f"{hi}_{x}"]
                      for x, y in (("b", "a"), ("a", "b")))
                  for lo, hi in (("speedup_low", "speedup_high"), ("speedup_ci_low", "speedup_ci_high"))]
        counts = [c + i for c, i in zip(counts, inside, strict=True)]
        lines.append(f"| {' '.join(map(str, key))} | {_speedup_cell(r, '_b')} | {_speedup_cell(r, '_a')} | "
                     f"{'yes' if inside[0] else 'NO'} / {'yes' if inside[1] else 'NO'} | "
                     f"{r.speedup_vs_eager_a / r.speedup_vs_eager_b - 1:+.1%} |")
    lines.append(f"\nEach inside the other's interval: {counts[0]} of {len(both)} (reported), "
                 f"{counts[1]} of {len(both)} (in-trial).")
    print("\n".join(lines))


COST_PARTS = {
    "cold compile": "the compiled first calls (`compile_s`): what a sweep must pay",
    "timed + checked": "the compiled phase less its compile: accuracy, warm-up, alternated windows",
    "eager alone": "eager windows before the compile (a compiled trial), or the eager trial's own",
    "build + reference": "model builds and the float64 reference",
    "process start": "imports, environment, CUDA context of the measuring process",
    "warm compile": "the process that compiles again from the trial's cache",
    "Mega-Cache": "the process that starts from the trial's Mega-Cache artifact",
    "rest": "the trial's wall outside those: process exit, the row's way back, dispatch",
}


def cost(path: Path) -> dict:
    """A sweep's wall (first trial start to last end) against the sum of its cold compiles, and the
    trial-seconds of each part (`COST_PARTS`), summed over its trials."""
    df = read_results([path])
    t0 = pd.to_datetime(df.started_at, utc=True).min()
    wall_s = (pd.to_datetime(df.finished_at, utc=True).max() - t0).total_seconds()
    ph = _phases(df).reindex(columns=["imports", "env", "cuda_init", "build", "reference", "eager", "compiled",
                                      "warm_process", "megacache_process"]).fillna(0.0)
    num = {c: pd.to_numeric(df.get(c, pd.Series(float("nan"), index=df.index)), errors="coerce").fillna(0.0)
           for c in ("compile_s", "trial_wall_s")}
    parts = {"cold compile": num["compile_s"],
             "timed + checked": (ph["compiled"] - num["compile_s"]).clip(lower=0),
             "eager alone": ph["eager"], "build + reference": ph["build"] + ph["reference"],
             "process start": ph["imports"] + ph["env"] + ph["cuda_init"],
             "warm compile": ph["warm_process"], "Mega-Cache": ph["megacache_process"]}
    parts["rest"] = (num["trial_wall_s"] - sum(parts.values())).clip(lower=0)
    compiles = float(parts["cold compile"].sum())
    return {"run": str(path), "trials": len(df), "compiled": int((df["mode"] != "eager").sum()),
            "gpus": len(_gpu_stats(df.assign(started_at=pd.to_datetime(df.started_at, utc=True),
                                             finished_at=pd.to_datetime(df.finished_at, utc=True)),
                                   t0, t0 + pd.Timedelta(seconds=max(wall_s, 1e-9)))[0]),
            "wall_s": wall_s, "cold_compiles_s": compiles, "wall_per_compiles": wall_s / compiles if compiles else None,
            "trial_s": float(num["trial_wall_s"].sum()), "parts_s": {k: float(v.sum()) for k, v in parts.items()}}


def cost_table(paths: list[Path]) -> str:
    runs = [cost(p) for p in paths]
    lines = ["| sweep | trials (compiled) | GPUs | wall s | cold compiles s | wall / compiles | trial s, summed | "
             + " | ".join(COST_PARTS) + " |", "|---|---|---|---|---|---|---|" + "---|" * len(COST_PARTS)]
    for r in runs:
        ratio = f"{r['wall_per_compiles']:.2f}x" if r["wall_per_compiles"] else "-"
        cells = [f"{r['parts_s'][k]:.0f} ({r['parts_s'][k] / r['trial_s']:.0%})" for k in COST_PARTS]
        lines.append(f"| {r['run']} | {r['trials']} ({r['compiled']}) | {r['gpus']} | {r['wall_s']:.0f} | "
                     f"{r['cold_compiles_s']:.0f} | {ratio} | {r['trial_s']:.0f} | " + " | ".join(cells) + " |")
    lines += ["", "Parts, in trial-seconds summed over the sweep's trials (share of them):", ""]
    lines += [f"- {k}: {v}" for k, v in COST_PARTS.items()]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--gpus", type=int, required=True)
    r.add_argument("--spec", default=str(REPO / "studies" / "scaling" / "scaling.yaml"))
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("extra", nargs="*", help="more `sweeper run` arguments, e.g. --resume")
    a = sub.add_parser("analyze")
    a.add_argument("paths", nargs="+", type=Path)
    a.add_argument("--markdown", action="store_true")
    a.add_argument("--project", default="", help="GPU counts to project to from the measured runs, e.g. 4,8")
    c = sub.add_parser("compare", help="speedups of the same settings in two runs, side by side")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    k = sub.add_parser("cost", help="wall against the sum of cold compiles, and where the rest goes")
    k.add_argument("paths", nargs="+", type=Path)
    args = ap.parse_args()
    if args.cmd == "run":
        run(args.gpus, args.spec, args.out, args.extra)
    elif args.cmd == "compare":
        compare_speedups(args.before, args.after)
    elif args.cmd == "cost":
        print(cost_table(args.paths))
    else:
        analyze(args.paths, args.markdown, [int(n) for n in args.project.split(",") if n])


if __name__ == "__main__":
    main()
