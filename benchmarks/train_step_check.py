"""Does the tool time a training step as a user's plain loop does? Both side by side, and the steps between.

    python -m benchmarks.train_step_check [--setting resnet18:fp32:default ...] [--phase train] [--batch 64]
        [--pairs 40] [--iters 10] [--variants plain,tool_step,...] [--out OUT.json]
    python -m benchmarks.train_step_check --device cpu --smoke --backend eager --out OUT.json   # a tiny run
    python -m benchmarks.train_step_check --show OUT.json ...   # the tables of earlier runs

For each setting (MODEL:PRECISION:MODE) each variant runs in a fresh process, one at a time
(train_step_variants.py): `plain`, a user's loop (train_step_loop.py: eager and compiled windows
alternated, a CPU probe timed before each window); the plain loop with one of the tool's
differences switched on (dynamic, tool_build, tool_step, tool_timing, sampler, markers, memory,
hooks, health, restored, affinity); and the tool itself (pipeline, forkserver, sweep;
train_step_tool.py). A launch-bound compiled step follows the host's CPU speed, so compare a
variant's compiled ms with plain's at a similar probe ms (the JSON keeps every window). The
processes share one inductor cache unless --cold-cache; the JSON is written after every variant."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sweeper import zoo  # the registry, without torch
from sweeper.results.schema import WITNESS_SLOW_FACTOR
from sweeper.run import cpus

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

ALL_VARIANTS = ("plain", "dynamic", "tool_build", "tool_step", "tool_timing", "sampler", "markers", "memory",
                "hooks", "health", "restored", "affinity", "pipeline", "forkserver", "sweep")
DEFAULT_VARIANTS = ALL_VARIANTS[:-1]
PRECISIONS = ("fp32", "bf16")
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
CLAIMS_MEASURE = {"warmup_iters": 5, "windows": 8, "min_window_iters": 5, "min_window_s": 0.5, "warm_compile": False,
                  "gpu_util": True}
"""The tool's measure section for its trial: the claims sweep's (studies/claims/train.yaml), no warm compile."""
SMOKE = {"model": "vit-tiny", "batch": 2, "pairs": 2, "iters": 2, "warmup": 1, "probe_ops": 200,
         "measure": {"warmup_iters": 1, "windows": 5, "min_window_iters": 2, "min_window_s": 0.01,
                     "warm_compile": False, "gpu_util": True}}
NORMAL = {"model": "resnet18", "batch": 64, "pairs": 40, "iters": 10, "warmup": 5, "probe_ops": 1000,
          "measure": CLAIMS_MEASURE}


class BadInput(ValueError):
    pass


def parse_setting(text: str, default_model: str) -> dict[str, str]:
    """MODEL:PRECISION:MODE (MODEL may be left out: PRECISION:MODE) -> its parts, checked."""
    parts = text.split(":")
    if len(parts) == 2:
        parts = [default_model, *parts]
    if len(parts) != 3:
        raise BadInput(f"--setting {text!r}: expected MODEL:PRECISION:MODE, e.g. resnet18:fp32:default")
    model, precision, mode = parts
    if model not in zoo.REGISTRY:
        raise BadInput(f"--setting {text!r}: no zoo model {model!r} (sweeper models lists them)")
    if precision not in PRECISIONS or mode not in MODES:
        raise BadInput(f"--setting {text!r}: precision one of {', '.join(PRECISIONS)}, mode one of {', '.join(MODES)}")
    return {"model": model, "precision": precision, "mode": mode}


def parse_variants(text: str) -> list[str]:
    names = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [v for v in names if v not in ALL_VARIANTS]
    if unknown or not names:
        raise BadInput(f"--variants: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(ALL_VARIANTS)}")
    return names


def gpu_count() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
        return max(1, pynvml.nvmlDeviceGetCount())
    except Exception:
        return 1


def cpu_model() -> str | None:
    """The host's CPU model (hosts of one GPU kind differ in it, and a launch-bound step with them)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or None
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), None)


def trial_cpus(pin: int | None, device: str) -> tuple[list[int] | None, int]:
    """The CPUs a trial would be pinned to (the first slot of `pin` CPUs; by default each GPU's equal
    share of this host's CPUs, as the tool's cpus_per_trial), or None where the tool leaves a trial
    unpinned (the share is the whole host); and the threads its process would get."""
    cores = cpus.physical_cores()
    total = sum(len(c) for c in cores)
    share = pin or max(1, total // (gpu_count() if device == "cuda" else 1))
    if share >= total or cpus.slot_count(cores, share) == 0:
        return None, total
    return cpus.slot_cpus(cores, share, 0), share


def child_env(cache: Path, variant: str, threads: int) -> dict[str, str]:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"), "TRITON_CACHE_DIR": str(cache / "triton"),
           "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "PYTHONUNBUFFERED": "1"}
    if variant == "affinity":  # as the runner and Ray set them for a trial of `threads` CPUs
        env.update(OMP_NUM_THREADS=str(threads), TORCHINDUCTOR_COMPILE_THREADS=str(threads))
    return env


def run_variant(setting: dict[str, Any], variant: str, work: Path, pin: list[int] | None, threads: int) -> dict:
    """One variant in a fresh process; its result, or the error that ended it."""
    cache = Path(setting["cache_dir"])
    (work / "setting.json").write_text(json.dumps(setting))
    out = work / f"{variant}.json"
    out.unlink(missing_ok=True)  # a variant that ran before (another setting) must not stand in for this one
    cmd = [sys.executable, "-m", "benchmarks.train_step_variants", "--variant", variant,
           "--setting", str(work / "setting.json"), "--out", str(out)]
    preexec = (lambda: os.sched_setaffinity(0, pin)) if variant == "affinity" and pin else None
    limit_s = setting["timeout_s"] + 180  # the tool's own processes stop at timeout_s; this is the backstop
    proc = subprocess.Popen(cmd, env=child_env(cache, variant, threads), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=preexec)
    try:
        _, stderr = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # with its compile workers
        proc.communicate()
        return {"error": f"timed out after {limit_s:.0f} s"}
    if not out.exists():
        return {"error": f"exited {proc.returncode}: {stderr.strip()[-400:]}"}
    return json.loads(out.read_text())


def _ms(x: Any) -> str:
    return f"{x:9.2f}" if isinstance(x, (int, float)) else f"{'-':>9}"


def progress(r: dict[str, Any]) -> str:
    eager, compiled = _ms(r.get("eager_ms_median")).strip(), _ms(r.get("compiled_ms_median")).strip()
    return f"{r['variant']}: eager {eager} ms, compiled {compiled} ms" + (f"; {r['error']}" if "error" in r else "")


def fast_state(r: dict[str, Any]) -> dict[str, Any]:
    """Per-step ms of each arm over the windows taken at the host's fast CPU state, and their share:
    a plain variant's windows whose CPU probe read within WITNESS_SLOW_FACTOR of its own fast state
    (the 20% quantile of its probes), the tool's windows whose witness did (its `windows_json`). A
    launch-bound step follows the host's CPU speed; compared at one state, two processes should agree."""
    if r.get("probe_ms"):
        probes = r["probe_ms"]
        ref = sorted(probes)[int(0.2 * (len(probes) - 1))]
        arms = {"eager": (r["eager_ms"], probes[0::2]), "compiled": (r["compiled_ms"], probes[1::2])}
    elif r.get("row_windows_json"):
        w = json.loads(r["row_windows_json"])
        ref = w["ref_ms"]
        arms = {"eager": ([x * 1e3 for x in w.get("eager_s_per_iter", [])], w.get("eager_witness_ms", [])),
                "compiled": ([x * 1e3 for x in w.get("compiled_s_per_iter", [])], w.get("compiled_witness_ms", []))}
    else:
        return {}
    out: dict[str, Any] = {}
    fast_n = total = 0
    for arm, (ms, reads) in arms.items():
        fast = [m for m, p in zip(ms, reads, strict=False) if p <= ref * WITNESS_SLOW_FACTOR]
        out[f"{arm}_fast_ms"] = statistics.median(fast) if fast else None
        fast_n, total = fast_n + len(fast), total + min(len(ms), len(reads))
    out["fast_windows_pct"] = 100.0 * fast_n / total if total else None
    return out


def table(label: str, results: list[dict[str, Any]]) -> str:
    """Every variant against the plain loop: medians over all windows, and at the fast state."""
    by = {r["variant"]: {**r, **fast_state(r)} for r in results}
    plain = by.get("plain", {})
    lines = [label, (f"{'variant':12} {'eager ms':>9} {'compiled ms':>11} {'speedup':>8} {'probe ms':>9} "
                     f"{'vs plain':>9} {'fast eager':>10} {'fast comp':>10} {'fast %':>7} {'vs plain':>9}  note")]

    def rel(a: float | None, b: float | None) -> str:
        return f"{(a / b - 1) * 100:+8.1f}%" if a and b else f"{'-':>9}"
    for name, r in by.items():
        comp = r.get("compiled_ms_median")
        speed = f"{r['speedup']:8.3f}" if r.get("speedup") else f"{'-':>8}"
        note = r.get("error") or r.get("note") or r.get("row_error") or ""
        pct = f"{r['fast_windows_pct']:7.0f}" if r.get("fast_windows_pct") is not None else f"{'-':>7}"
        lines.append(f"{name:12} {_ms(r.get('eager_ms_median'))} {_ms(comp):>11} {speed} "
                     f"{_ms(r.get('probe_ms_median'))} {rel(comp, plain.get('compiled_ms_median'))} "
                     f"{_ms(r.get('eager_fast_ms')):>10} {_ms(r.get('compiled_fast_ms')):>10} {pct} "
                     f"{rel(r.get('compiled_fast_ms'), plain.get('compiled_fast_ms'))}  {note}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setting", action="append",
                    help="MODEL:PRECISION:MODE, repeatable (default resnet18:fp32:default)")
    ap.add_argument("--phase", default="train", choices=["train", "inference"])
    ap.add_argument("--batch", type=int)
    ap.add_argument("--matmul-precision", default="high", choices=["highest", "high", "medium"])
    ap.add_argument("--backend", default="inductor", choices=["inductor", "aot_eager", "eager"])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--pairs", type=int, help="alternated eager/compiled window pairs (default 40)")
    ap.add_argument("--iters", type=int, help="steps per window of the plain loop (default 10)")
    ap.add_argument("--warmup", type=int, help="steps of each arm before timing (default 5)")
    ap.add_argument("--probe-ops", type=int, help="tiny CPU ops of the probe before each window (default 1000)")
    ap.add_argument("--variants", default=",".join(DEFAULT_VARIANTS), help=f"comma list of {', '.join(ALL_VARIANTS)}")
    ap.add_argument("--pin-cpus", type=int, help="CPUs of the affinity variant's slot (default: a trial's share)")
    ap.add_argument("--cold-cache", action="store_true", help="a fresh inductor cache for every process")
    ap.add_argument("--cache-dir", type=Path,
                    help="the processes' inductor/Triton cache, kept after the run (default: a temporary one)")
    ap.add_argument("--timeout-s", type=float, default=600.0, help="limit of one variant's process")
    ap.add_argument("--smoke", action="store_true", help="tiny: vit-tiny, batch 2, 2 pairs of 2 steps")
    ap.add_argument("--out", type=Path, help="JSON of every variant's result (rewritten after each)")
    ap.add_argument("--show", type=Path, nargs="+", metavar="JSON",
                    help="print the tables of earlier runs' JSON, run nothing")
    args = ap.parse_args(argv)
    base = SMOKE if args.smoke else NORMAL
    for k in ("batch", "pairs", "iters", "warmup", "probe_ops"):
        value = getattr(args, k)
        if value is not None and value < (0 if k == "warmup" else 1):
            raise BadInput(f"--{k.replace('_', '-')} {value}: must be at least {0 if k == 'warmup' else 1}")
        setattr(args, k, base[k] if value is None else value)
    args.settings = [parse_setting(t, base["model"]) for t in (args.setting or [f"{base['model']}:fp32:default"])]
    args.variant_list, args.measure = parse_variants(args.variants), base["measure"]
    return args


def setting_dict(args: argparse.Namespace, s: dict[str, str], cache: Path) -> dict[str, Any]:
    return {**s, "phase": args.phase, "matmul_precision": args.matmul_precision, "batch": args.batch,
            "backend": args.backend, "device": args.device, "pairs": args.pairs, "iters": args.iters,
            "warmup": args.warmup, "probe_ops": args.probe_ops, "measure": args.measure, "cache_dir": str(cache),
            "timeout_s": args.timeout_s}


def label(s: dict[str, Any]) -> str:
    prec = f"fp32 (matmul {s['matmul_precision']})" if s["precision"] == "fp32" else "bf16 autocast"
    return (f"{s['model']} {s['phase']} {prec} batch {s['batch']} {s['mode']} ({s['backend']}), {s['device']}: "
            f"{s['pairs']} pairs of {s['iters']}-step windows")


def run_all(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    pin, threads = trial_cpus(args.pin_cpus, args.device)
    doc: dict[str, Any] = {"argv": sys.argv[1:], "host": platform.node(), "cpu_model": cpu_model(),
                           "cpus": len(os.sched_getaffinity(0)), "loadavg_1m": os.getloadavg()[0],
                           "affinity_cpus": pin, "affinity_threads": threads, "settings": []}
    total, n = len(args.settings) * len(args.variant_list), 0
    cache = args.cache_dir.resolve() if args.cache_dir else root / "cache"
    for s in args.settings:
        setting = setting_dict(args, s, cache)
        entry = {"setting": setting, "label": label(setting), "results": []}
        doc["settings"].append(entry)
        for variant in args.variant_list:
            n += 1
            if args.cold_cache:
                shutil.rmtree(cache, ignore_errors=True)
            t0 = time.monotonic()
            result = {"variant": variant, **run_variant(setting, variant, root, pin, threads)}
            entry["results"].append(result)
            print(f"[{n}/{total}] {s['model']}:{s['precision']}:{s['mode']} {progress(result)} "
                  f"({time.monotonic() - t0:.0f} s)", flush=True)
            if args.out:
                args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def show(paths: list[Path]) -> int:
    for path in paths:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            print(f"train_step_check: {path}: not readable JSON of a run ({e})", file=sys.stderr)
            return 2
        for entry in doc.get("settings", []):
            print(table(entry["label"], entry["results"]) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except BadInput as e:
        print(f"train_step_check: {e}", file=sys.stderr)
        return 2
    if args.show:
        return show(args.show)
    root = Path(tempfile.mkdtemp(prefix="train-step-check-"))
    try:
        doc = run_all(args, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for entry in doc["settings"]:
        print("\n" + table(entry["label"], entry["results"]), flush=True)
    return 0 if all("error" not in r for e in doc["settings"] for r in e["results"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
