"""Models built on the host and moved, against built on the device: seconds, and the same weights?

A measuring process builds its model after CUDA's start, under the trial's device as torch's default
device, so its random weights are drawn there (a factory whose code cannot run there is built on the
host: sweeper.zoo.sources.build_placed). This times, in one process
whose CUDA context is up, both ways of building each model, alternated (host, device, device,
host, ...), each ending with the model and a batch on the device and the device synchronized. It
also checks that the device-built model is the same model: the same parameter and buffer names,
shapes and dtypes, every tensor on the device, constant tensors (norm weights, zeroed biases, index
buffers) equal, and each random tensor's mean and standard deviation as the host's initialization
gives them (within `--z-max` standard errors for a sample of that size), with values far out in its
tails (FAR_SD) counted apart: the same count on both sides, or the problem names it.

    python -m benchmarks.model_build --models resnet50 vit_b_16 bert-base gpt2 [--repeats 3] [--json OUT]
    python -m benchmarks.model_build --spec my_sweep.yaml     # the spec's models: your factories too
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from sweeper.spec.sweep_spec import load_spec, parse_spec
from sweeper.spec.trials import Trial, expand
from sweeper.zoo.sources import build_placed

REPO = Path(__file__).resolve().parent.parent


def trial_for(model: str) -> Trial:
    spec = parse_spec({"name": "build", "models": [{"name": model}],
                       "axes": {"mode": ["eager"], "batch_size": [64], "seq_len": [128]}})
    trials, _ = expand(spec)
    return trials[0]


def spec_trials(path: Path) -> list[Trial]:
    """One trial per model of a sweep spec (its first), so a user's factories are checked as they are swept."""
    trials, _ = expand(load_spec(path))
    first: dict[str, Trial] = {}
    for trial in trials:
        first.setdefault(trial.model.name, trial)
    return list(first.values())


def build_once(trial: Trial, device: torch.device, on_device: bool) -> tuple[float, torch.nn.Module, str]:
    """Seconds from nothing to the model and one batch on `device`, synchronized; where it was built."""
    torch.manual_seed(trial.measure.seed)
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    bundle, place = build_placed(trial.model, device if on_device else None)
    model = bundle.model.to(device)
    bundle.make_batch(trial.batch_size, trial.seq_len, torch.Generator().manual_seed(0)).to(device)
    torch.cuda.synchronize(device)
    return time.perf_counter() - t0, model, place


def same_model(host: torch.nn.Module, dev: torch.nn.Module, device: torch.device, z_max: float) -> list[str]:
    """What differs between the two builds, beyond the random draws themselves: names, shapes,
    dtypes, devices; a constant tensor (a norm's weight, a zeroed bias) must be equal, and a random
    one's mean and standard deviation must agree within `z_max` standard errors of a sample of its size."""
    problems = []
    h, d = dict(host.state_dict()), dict(dev.state_dict())
    if h.keys() != d.keys():
        return [f"state names differ: {sorted(h.keys() ^ d.keys())[:5]}"]
    for name, a in h.items():
        b = d[name]
        if b.device.type != device.type:
            problems.append(f"{name} on {b.device}")
        if a.shape != b.shape or a.dtype != b.dtype:
            problems.append(f"{name}: {tuple(a.shape)} {a.dtype} vs {tuple(b.shape)} {b.dtype}")
            continue
        a64, b64 = a.detach().double().cpu(), b.detach().double().cpu()
        if not a.is_floating_point() or a64.numel() < 2 or a64.std().item() == 0:
            if not torch.equal(a64, b64):
                problems.append(f"{name}: constant or integer tensor differs")
            continue
        problems += _same_draw(name, a64.flatten(), b64.flatten(), z_max)
    return problems


FAR_SD = 20.0
"""A value this many robust standard deviations from its tensor's median is a far value, counted
apart: one such value moves a tensor's standard deviation by more than the sampling noise (torch
2.11's `trunc_normal_` puts rare values on its bounds, 100 standard deviations out at std 0.02)."""


def _same_draw(name: str, host: torch.Tensor, dev: torch.Tensor, z_max: float) -> list[str]:
    """The two draws' means and standard deviations agree within `z_max` standard errors, far values
    left out of both; a different count of far values is a problem of its own, named."""
    center = host.median()
    scale = 1.4826 * (host - center).abs().median().item() or host.std().item()
    kept, far = [], []
    for x in (host, dev):
        out = (x - center).abs() > FAR_SD * scale
        kept.append(x[~out])
        far.append(int(out.sum()))
    a, b = kept
    n, sd = min(a.numel(), b.numel()), a.std().item()
    z_mean = abs(a.mean().item() - b.mean().item()) / (sd * (2 / n) ** 0.5)
    z_std = abs(sd - b.std().item()) / (sd / n ** 0.5)  # each std's error is about sd / sqrt(2n)
    problems = []
    if max(z_mean, z_std) > z_max:
        problems.append(f"{name} ({n} values): mean/std {a.mean().item():.4g}/{sd:.4g} on the host, "
                        f"{b.mean().item():.4g}/{b.std().item():.4g} on the device")
    if far[0] != far[1]:
        problems.append(f"{name}: {far[0]} values beyond {FAR_SD:g} standard deviations on the host, {far[1]} "
                        "on the device")
    return problems


def measure(trial: Trial, device: torch.device, repeats: int, z_max: float) -> dict[str, Any]:
    times: dict[str, list[float]] = {"host": [], "device": []}
    built: dict[str, torch.nn.Module] = {}
    places: dict[str, str] = {}
    for i in range(repeats):
        for where in (("host", "device") if i % 2 == 0 else ("device", "host")):
            s, model, place = build_once(trial, device, where == "device")
            times[where].append(s)
            built[where], places[where] = model, place
    problems = same_model(built["host"], built["device"], device, z_max)
    return {"model": trial.model.name, "device_built_on": places["device"],
            "host_build_s": times["host"], "device_build_s": times["device"],
            "host_median_s": statistics.median(times["host"]), "device_median_s": statistics.median(times["device"]),
            "parameters": sum(p.numel() for p in built["device"].parameters()), "problems": problems}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["resnet50", "vit_b_16", "bert-base", "gpt2"])
    ap.add_argument("--spec", type=Path, help="check the models of this sweep spec instead (factories included)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--z-max", type=float, default=6.0, help="allowed mean/std difference, in standard errors")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("model_build.py: needs a CUDA device", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    torch.empty(1, device=device)
    trials = spec_trials(args.spec) if args.spec else [trial_for(m) for m in args.models]
    rows = [measure(t, device, args.repeats, args.z_max) for t in trials]
    print("| model | parameters | host-built s (median) | device-built s (median) | device build | problems |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['parameters'] / 1e6:.1f} M | {r['host_median_s']:.3f} | {r['device_median_s']:.3f} "
              f"| {r['device_built_on']} | {'; '.join(r['problems'][:3]) or 'none'} |")
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(device), "torch": torch.__version__,
                                         "rows": rows}, indent=2))
    return 1 if any(r["problems"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
